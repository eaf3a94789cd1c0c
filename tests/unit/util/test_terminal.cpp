#include <dljob/util/terminal.hpp>

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace dljob::util {
namespace {

using namespace std::string_literals;

TEST(TerminalSafe, ControlCharactersAreShownNotObeyed) {
    // OSC 52 (write the clipboard), a title change, a colour, a bell, DEL.
    EXPECT_EQ(terminal_safe("a\x1b]52;c;ZWNobw==\x07z"), "a^[]52;c;ZWNobw==^Gz");
    EXPECT_EQ(terminal_safe("\x1b[31mred\x1b[0m"), "^[[31mred^[[0m");
    EXPECT_EQ(terminal_safe("x\x7fy"s), "x^?y");
    EXPECT_EQ(terminal_safe("nul\0end"s), "nul^@end");
    // U+009B (CSI in one character, obeyed by some terminals) as UTF-8.
    EXPECT_EQ(terminal_safe("a\xc2\x9b"
                            "2Jb"),
              "aM-^[2Jb");
}

TEST(TerminalSafe, TextLinesTabsProgressAndUtf8PassUnchanged) {
    const std::string text = "iter 10\tloss 0.5\r\niter 20 — 12 µs, été, 日本\n";
    EXPECT_EQ(terminal_safe(text), text);
    EXPECT_EQ(terminal_safe("\xc2\xa0nbsp"), "\xc2\xa0nbsp"); // U+00A0 shares the lead byte
}

TEST(TerminalSafe, ACharacterSplitAcrossWritesAndFlushesIsStillCaught) {
    std::ostringstream target;
    {
        TerminalSafeBuf buffer(target.rdbuf());
        std::ostream out(&buffer);
        out << "a\xc2" << std::flush << "\x9b"
            << "b";
        out << "\xc2" << std::flush << "\xa9";
    }
    EXPECT_EQ(target.str(), "aM-^[b\xc2\xa9");
}

} // namespace
} // namespace dljob::util
