// submit --sweep: the points are the cartesian product of the values, the first --sweep varying
// slowest; malformed sweeps are usage errors naming the argument.

#include <dljob/app/jobs/sweep.hpp>

#include <gtest/gtest.h>

namespace dljob::app {
namespace {

using Points = std::vector<std::vector<std::string>>;

TEST(SweepPoints, AreTheCartesianProductOfListsAndRanges) {
    auto points = sweep_points({"train.base_lr=0.1,0.01", "train.random_seed=1..3"});
    ASSERT_TRUE(points) << points.error().message;
    EXPECT_EQ(*points, (Points{{"train.base_lr=0.1", "train.random_seed=1"},
                               {"train.base_lr=0.1", "train.random_seed=2"},
                               {"train.base_lr=0.1", "train.random_seed=3"},
                               {"train.base_lr=0.01", "train.random_seed=1"},
                               {"train.base_lr=0.01", "train.random_seed=2"},
                               {"train.base_lr=0.01", "train.random_seed=3"}}));
    auto negative = sweep_points({"a=-1..1"});
    ASSERT_TRUE(negative);
    EXPECT_EQ(*negative, (Points{{"a=-1"}, {"a=0"}, {"a=1"}}));
}

TEST(SweepPoints, MalformedSweepsNameTheArgument) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"train.base_lr"}, "--sweep 1 ('train.base_lr'): expected KEY=V1,V2"},
        {{"a=1", "b=3..1"}, "--sweep 2 ('b=3..1'): a range is A..B"},
        {{"a=1..x"}, "--sweep 1 ('a=1..x'): a range is A..B"},
        {{"a=1,,2"}, "--sweep 1 ('a=1,,2'): an empty value"},
        {{"a=1,2", "a=3"}, "--sweep 2 ('a=3'): a is swept twice"},
        {{"a=1..40", "b=1..40"}, "--sweep 2 ('b=1..40'): 1600 points, more than the 1000"},
    };
    for (const auto& [sweeps, message] : cases) {
        auto points = sweep_points(sweeps);
        ASSERT_FALSE(points) << message;
        EXPECT_EQ(points.error().code, ErrorCode::usage);
        EXPECT_EQ(points.error().message.rfind(message, 0), 0U) << points.error().message;
    }
}

} // namespace
} // namespace dljob::app
