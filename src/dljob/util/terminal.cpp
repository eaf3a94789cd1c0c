#include <dljob/util/terminal.hpp>

#include <sstream>

namespace dljob::util {

bool TerminalSafeBuf::put(unsigned char c) {
    const auto out = [&](char byte) { return m_target->sputc(byte) != traits_type::eof(); };
    if (m_after_c2) {
        m_after_c2 = false;
        if (c >= 0x80 && c <= 0x9f) { // U+0080-U+009F: a C1 control
            return out('M') && out('-') && out('^') && out(static_cast<char>(c - 0x80 + '@'));
        }
        if (!out(static_cast<char>(0xc2))) {
            return false;
        }
    }
    if (c == 0xc2) {
        m_after_c2 = true;
        return true;
    }
    if (c == '\n' || c == '\t' || c == '\r' || (c >= 0x20 && c != 0x7f)) {
        return out(static_cast<char>(c));
    }
    return out('^') && out(c == 0x7f ? '?' : static_cast<char>(c + '@'));
}

TerminalSafeBuf::int_type TerminalSafeBuf::overflow(int_type c) {
    if (traits_type::eq_int_type(c, traits_type::eof())) {
        return traits_type::not_eof(c);
    }
    return put(static_cast<unsigned char>(traits_type::to_char_type(c))) ? c : traits_type::eof();
}

std::streamsize TerminalSafeBuf::xsputn(const char* s, std::streamsize n) {
    for (std::streamsize i = 0; i < n; ++i) {
        if (!put(static_cast<unsigned char>(s[i]))) {
            return i;
        }
    }
    return n;
}

TerminalSafeBuf::~TerminalSafeBuf() {
    if (m_after_c2) { // a lone lead byte at the very end: written as it came
        m_target->sputc(static_cast<char>(0xc2));
    }
}

// A pending 0xC2 is kept over a flush: written now, the byte after it could not be checked.
int TerminalSafeBuf::sync() {
    return m_target->pubsync();
}

std::string terminal_safe(std::string_view text) {
    std::ostringstream out;
    {
        TerminalSafeBuf buffer(out.rdbuf());
        buffer.sputn(text.data(), static_cast<std::streamsize>(text.size()));
    }
    return out.str();
}

} // namespace dljob::util
