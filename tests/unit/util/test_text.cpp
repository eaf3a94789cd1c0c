// util/text: the helpers dljob parses command output and names with.

#include <dljob/util/text.hpp>

#include <gtest/gtest.h>

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

} // namespace
} // namespace dljob::util
