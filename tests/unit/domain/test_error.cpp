#include <dljob/domain/error.hpp>
#include <dljob/domain/result.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace dljob {
namespace {

Result<int> parse_positive(int value) {
    if (value <= 0) {
        return fail(ErrorCode::config_invalid, "value must be positive", "use 1 or more");
    }
    return value;
}

Result<int> doubled(int value) {
    DLJOB_TRY(parse_positive(value));
    return value * 2;
}

TEST(Result, CarriesValue) {
    auto result = parse_positive(3);
    ASSERT_TRUE(result);
    EXPECT_EQ(*result, 3);
}

TEST(Result, CarriesErrorWithHint) {
    auto result = parse_positive(-1);
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::config_invalid);
    EXPECT_EQ(result.error().message, "value must be positive");
    EXPECT_EQ(result.error().hint, "use 1 or more");
}

TEST(Result, ValueOfErrorThrowsFailureWithTheSameError) {
    auto result = parse_positive(0);
    try {
        (void)result.value();
        FAIL() << "value() of an error must throw";
    } catch (const Failure& failure) {
        EXPECT_EQ(failure.error().code, ErrorCode::config_invalid);
        EXPECT_STREQ(failure.what(), "value must be positive");
    }
}

TEST(Result, TryPropagatesTheFirstError) {
    EXPECT_EQ(*doubled(4), 8);
    auto result = doubled(-4);
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::config_invalid);
}

TEST(Result, VoidResult) {
    Result<void> ok;
    EXPECT_TRUE(ok);
    Result<void> bad = fail(ErrorCode::io, "disk full");
    EXPECT_FALSE(bad);
    EXPECT_THROW(bad.value(), Failure);
}

TEST(ErrorCodes, ExitCodesAreDistinctAndUsageIsTwo) {
    const ErrorCode all[] = {ErrorCode::usage,
                             ErrorCode::config_invalid,
                             ErrorCode::not_found,
                             ErrorCode::scheduler_rejected,
                             ErrorCode::scheduler_unreachable,
                             ErrorCode::timeout,
                             ErrorCode::store,
                             ErrorCode::io,
                             ErrorCode::interrupted,
                             ErrorCode::internal};
    std::set<int> codes;
    std::set<std::string> names;
    for (ErrorCode code : all) {
        const int exit_code = exit_code_for(code);
        EXPECT_NE(exit_code, 0) << to_string(code);
        EXPECT_NE(exit_code, 1) << "1 is left to failed jobs under --wait: " << to_string(code);
        codes.insert(exit_code);
        names.insert(to_string(code));
    }
    EXPECT_EQ(codes.size(), std::size(all));
    EXPECT_EQ(names.size(), std::size(all));
    EXPECT_EQ(exit_code_for(ErrorCode::usage), 2);
}

} // namespace
} // namespace dljob
