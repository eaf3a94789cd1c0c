// submit --sweep: the points are the cartesian product of the values, the first --sweep varying
// slowest; malformed sweeps are usage errors naming the argument.

#include <dljob/app/jobs/sweep.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

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

TEST(SweepStatus, ASweepIsOneLineWithCountsPerStateUnlessExpanded) {
    std::vector<JobView> views;
    for (const auto& [id, state] : std::vector<std::pair<int, JobState>>{
             {4, JobState::pending}, {3, JobState::running}, {2, JobState::running}}) {
        Job job;
        job.id = id;
        job.name = "lenet";
        job.site = "local";
        job.sweep = "sw-abcdef";
        job.state = state;
        job.phase = SubmitPhase::submitted;
        views.push_back(JobView{job, std::nullopt});
    }
    Job plain;
    plain.id = 1;
    plain.name = "other";
    plain.phase = SubmitPhase::submitted;
    views.push_back(JobView{plain, std::nullopt});
    std::ostringstream folded;
    print_status_table(folded, views, 1000, true);
    const std::string text = folded.str();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text; // header, sweep, plain
    EXPECT_NE(text.find("SWEEP 3: 1 PENDING 2 RUNNING"), std::string::npos) << text;
    EXPECT_NE(text.find("dljob sweep sw-abcdef"), std::string::npos) << text;
    EXPECT_NE(text.find("other"), std::string::npos) << text;
    std::ostringstream expanded;
    print_status_table(expanded, views, 1000, false);
    const std::string all = expanded.str();
    EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 5) << all;
    EXPECT_EQ(all.find("SWEEP"), std::string::npos) << all;
}

} // namespace
} // namespace dljob::app
