// util/text: the helpers dljob parses command output and names with.

#include <dljob/util/text.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace dljob::util {
namespace {

TEST(Text, AsciiLowerLowersOnlyAsciiLettersWhateverTheLocale) {
    EXPECT_EQ(ascii_lower("Fashion_MNIST"), "fashion_mnist");
    EXPECT_EQ(ascii_lower("HTTPS://Example.ORG/A.tar"), "https://example.org/a.tar");
    // UTF-8 bytes (high bit set, negative as char) pass through untouched: std::tolower on a
    // negative char is undefined behaviour, which the copies this replaced risked.
    EXPECT_EQ(ascii_lower("Qu\xc3\x89"
                          "BEC"),
              "qu\xc3\x89"
              "bec");
    EXPECT_EQ(ascii_lower(""), "");
}

TEST(Text, SplitLinesTrimAndParseInt) {
    const auto lines = split_lines("a\nb\n\nc\n");
    ASSERT_EQ(lines.size(), 4U);
    EXPECT_EQ(lines[2], "");
    EXPECT_EQ(trim("  x y \t"), "x y");
    EXPECT_EQ(parse_int(" 42 "), 42);
    EXPECT_FALSE(parse_int("42x"));
    EXPECT_FALSE(parse_int("99999999999"));
}

// The release's GCC 10 has no std::from_chars for doubles; its stand-in must read the same
// numbers, stop at the same byte and fail the same way as the real one (GCC 12 here).
TEST(Text, FromCharsDoubleByStrtodAgreesWithStdFromChars) {
    for (const std::string text : {"0",
                                   "1",
                                   "-1",
                                   "0.5",
                                   ".5",
                                   "1e3",
                                   "1E-3",
                                   "-2.5e+10",
                                   "123abc",
                                   "1.5.2",
                                   "1e",
                                   "1e+",
                                   "inf",
                                   "-inf",
                                   "INF",
                                   "infinity",
                                   "nan",
                                   "NaN",
                                   "0x10",
                                   "-0x1p3",
                                   "1e400",
                                   "-1e400",
                                   "",
                                   "-",
                                   "+1",
                                   " 1",
                                   "abc",
                                   "e5",
                                   ".",
                                   "1_000",
                                   "3.14159265358979323846264338327950288",
                                   "0.0000000000000000000000000000001",
                                   "00012",
                                   "1e-5x"}) {
        double expected = 42.0;
        double got = 42.0;
        const char* first = text.data();
        const char* last = text.data() + text.size();
        const auto want = std::from_chars(first, last, expected);
        const auto have = from_chars_double_by_strtod(first, last, got);
        EXPECT_EQ(have.ec, want.ec) << "'" << text << "'";
        EXPECT_EQ(have.ptr - first, want.ptr - first) << "'" << text << "'";
        if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(got)) << "'" << text << "'";
        } else {
            EXPECT_EQ(got, expected) << "'" << text << "'";
        }
    }
}

} // namespace
} // namespace dljob::util
