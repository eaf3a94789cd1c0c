#include <dljob/domain/resources.hpp>
#include <dljob/domain/walltime.hpp>

#include <gtest/gtest.h>

namespace dljob {
namespace {

class WalltimeParsing : public ::testing::Test {};

TEST_F(WalltimeParsing, AcceptsSlurmSpellings) {
    EXPECT_EQ(Walltime::parse("90")->seconds(), 90 * 60);
    EXPECT_EQ(Walltime::parse("10:30")->seconds(), 10 * 60 + 30);
    EXPECT_EQ(Walltime::parse("02:00:00")->seconds(), 7200);
    EXPECT_EQ(Walltime::parse("36:00:00")->seconds(), 36 * 3600);
    EXPECT_EQ(Walltime::parse("1-12")->seconds(), 36 * 3600);
    EXPECT_EQ(Walltime::parse("1-12:30")->seconds(), 36 * 3600 + 1800);
    EXPECT_EQ(Walltime::parse("7-00:00:00")->seconds(), 7 * 86400);
}

TEST_F(WalltimeParsing, RejectsMalformedAndOutOfRange) {
    for (const char* bad : {"", "0", "00:00:00", "-5", "1:60:00", "1:00:60", "1-24:00:00", "abc",
                            "1:2:3:4", "2h", "1-", " 10"}) {
        auto parsed = Walltime::parse(bad);
        EXPECT_FALSE(parsed) << bad;
        if (!parsed) {
            EXPECT_EQ(parsed.error().code, ErrorCode::config_invalid);
            EXPECT_NE(parsed.error().hint.find("HH:MM:SS"), std::string::npos);
        }
    }
}

// A number with more digits than a field holds is too large, in every form, not "not a whole
// number"; the message says what the limit is.
TEST_F(WalltimeParsing, FieldsPastTheLimitAreTooLargeInEveryForm) {
    for (const char* big :
         {"2147483647", "1000000000", "99999999999999999999999999", "2147483647:00", "1:2147483647",
          "2147483647:00:00", "0:2147483647:00", "0:0:2147483647", "2147483647-00", "1-2147483647",
          "1-00:2147483647", "1-00:00:2147483647", "9223372036854775808-00:00:00"}) {
        auto parsed = Walltime::parse(big);
        ASSERT_FALSE(parsed) << big;
        EXPECT_EQ(parsed.error().code, ErrorCode::config_invalid);
        EXPECT_NE(parsed.error().message.find("is too large: each field may be at most 999999999"),
                  std::string::npos)
            << big << ": " << parsed.error().message;
    }
    // The limit itself, and leading zeros that do not make a number larger.
    EXPECT_EQ(Walltime::parse("999999999")->seconds(), 999'999'999LL * 60);
    EXPECT_EQ(Walltime::parse("999999999-23:59:59")->seconds(), 999'999'999LL * 86400 + 86399);
    EXPECT_EQ(Walltime::parse("0000000000000090")->seconds(), 90 * 60);
    EXPECT_EQ(Walltime::parse("00000000001-00")->seconds(), 86400);
}

TEST_F(WalltimeParsing, FormatsAsHoursOrDaysAndCountsMinutesUp) {
    const auto w = Walltime::parse("1-02:03:04").value();
    EXPECT_EQ(w.hms(), "26:03:04"); // PBS: never D:HH:MM:SS (the Slurm wrappers reject it)
    EXPECT_EQ(w.days_hms(), "1-02:03:04");
    EXPECT_EQ(w.minutes_ceil(), 1564); // sqsub's -r: minutes, rounded up
    EXPECT_EQ(Walltime::parse("02:00:00")->days_hms(), "02:00:00");
}

class MemorySizeParsing : public ::testing::Test {};

TEST_F(MemorySizeParsing, ParsesBinaryUnitsAndFormatsPerScheduler) {
    EXPECT_EQ(MemorySize::parse("16G")->mib(), 16 * 1024);
    EXPECT_EQ(MemorySize::parse("512M")->mib(), 512);
    EXPECT_EQ(MemorySize::parse("1.5g")->mib(), 1536);
    EXPECT_EQ(MemorySize::parse("16G")->text(), "16G");
    EXPECT_EQ(MemorySize::parse("16G")->with_units("gb", "mb"), "16gb");
    EXPECT_EQ(MemorySize::parse("1500M")->with_units("g", "m"), "1500m");
    for (const char* bad : {"", "16", "G", "16Q", "-1G", "0M"}) {
        EXPECT_FALSE(MemorySize::parse(bad)) << bad;
    }
}

TEST_F(MemorySizeParsing, ANumberPastADoublesRangeIsOutOfRangeNotMalformed) {
    for (const std::string& big :
         {"1" + std::string(400, '0') + "G", "0." + std::string(400, '0') + "1M"}) {
        auto parsed = MemorySize::parse(big);
        ASSERT_FALSE(parsed) << big;
        EXPECT_NE(parsed.error().message.find("it must be between 1M and about 1000 PB"),
                  std::string::npos)
            << parsed.error().message;
    }
}

} // namespace
} // namespace dljob
