#pragma once
// Text from files on its way to a terminal. A job's log, a recipe or a metrics record can hold
// escape sequences (written by the job, or by anyone who can write its run directory) that a
// terminal would obey: retitle the window, redefine keys, write the clipboard (OSC 52), hide
// lines. What dljob prints to a terminal shows control characters as `cat -v` does instead.

#include <streambuf>
#include <string>
#include <string_view>

namespace dljob::util {

/// Passes text through to `target`, control characters other than newline, tab and carriage
/// return (kept for progress lines) written visibly: ESC as "^[", DEL as "^?", and the C1
/// controls U+0080-U+009F (which some terminals also obey) as "M-^[" and the like. Other bytes,
/// UTF-8 included, pass unchanged. Flushing goes to `target`.
class TerminalSafeBuf : public std::streambuf {
public:
    explicit TerminalSafeBuf(std::streambuf* target) : m_target(target) {}
    ~TerminalSafeBuf() override;
    TerminalSafeBuf(const TerminalSafeBuf&) = delete;
    TerminalSafeBuf& operator=(const TerminalSafeBuf&) = delete;
    TerminalSafeBuf(TerminalSafeBuf&&) = delete;
    TerminalSafeBuf& operator=(TerminalSafeBuf&&) = delete;

protected:
    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

private:
    bool put(unsigned char c);
    std::streambuf* m_target;
    bool m_after_c2 = false; // the last byte was 0xC2, the lead byte of U+0080-U+00BF
};

/// `text` as TerminalSafeBuf writes it.
std::string terminal_safe(std::string_view text);

} // namespace dljob::util
