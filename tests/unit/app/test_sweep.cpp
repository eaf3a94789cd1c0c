// submit --sweep: the points are the cartesian product of the values, the first --sweep varying
// slowest; malformed sweeps are usage errors naming the argument.

#include <dljob/app/jobs/sweep.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
        {{"a=-9000000000000000000..9000000000000000000"}, "--sweep 1 ('a=-9000000000000000000.."},
    };
    for (const auto& [sweeps, message] : cases) {
        auto points = sweep_points(sweeps);
        ASSERT_FALSE(points) << message;
        EXPECT_EQ(points.error().code, ErrorCode::usage);
        EXPECT_EQ(points.error().message.rfind(message, 0), 0U) << points.error().message;
    }
}

TEST(SweepPoints, TheCommandLineReplacesARecipeKeysValuesInItsPlaceAndAddsItsOwnAfter) {
    const std::vector<SweepAxis> recipe = {{"a", {"1", "2"}, "r.yaml:3:3"},
                                           {"b", {"x", "y"}, "r.yaml:4:3"}};
    auto axes = sweep_axes(recipe, {"c=7..8", "a=5"});
    ASSERT_TRUE(axes) << axes.error().message;
    ASSERT_EQ(axes->size(), 3U);
    EXPECT_EQ((*axes)[0].key, "a");
    EXPECT_EQ((*axes)[0].values, (std::vector<std::string>{"5"}));
    EXPECT_EQ((*axes)[0].origin, "--sweep 2 ('a=5')");
    EXPECT_EQ((*axes)[1].values, (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ((*axes)[2].key, "c");
    auto points = sweep_product(*axes);
    ASSERT_TRUE(points);
    EXPECT_EQ(*points, (Points{{"a=5", "b=x", "c=7"},
                               {"a=5", "b=x", "c=8"},
                               {"a=5", "b=y", "c=7"},
                               {"a=5", "b=y", "c=8"}}));
    // The product's bound counts the recipe's keys too, and names the key that passed it.
    auto big = sweep_product(
        *sweep_axes({{"a", std::vector<std::string>(40, "1"), "r.yaml:3:3"}}, {"b=1..30"}));
    ASSERT_FALSE(big);
    EXPECT_EQ(big.error().message.rfind("--sweep 1 ('b=1..30'): 1200 points", 0), 0U)
        << big.error().message;
}

class RecipeSweepSubmit : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-sweep-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        recipe = dir / "r.yaml";
        std::ofstream(recipe) << "name: t\n"
                                 "command:\n"
                                 "  argv: [true]\n"
                                 "  environment:\n"
                                 "    LR: \"0\"\n"
                                 "sweep:\n"
                                 "  command.environment.LR: [\"0.1\", \"0.2\"]\n"
                                 "  resources.cores: 1..2\n";
    }
    void TearDown() override { std::filesystem::remove_all(dir); }
    std::filesystem::path dir;
    std::filesystem::path recipe;
};

TEST_F(RecipeSweepSubmit, TheRecipesSweepIsSubmittedUnlessSetTurnsItOff) {
    SubmitOptions options;
    options.recipe = recipe;
    const auto submit_axes =
        [&](const std::vector<std::string>& sweeps) -> Result<std::vector<SweepAxis>> {
        auto read = read_submit_recipe(options);
        if (!read) {
            return fail(read.error());
        }
        return submit_sweep_axes(*read, options, sweeps);
    };
    auto axes = submit_axes({"resources.cores=4"});
    ASSERT_TRUE(axes) << axes.error().message;
    auto points = sweep_product(*axes);
    ASSERT_TRUE(points);
    EXPECT_EQ(*points, (Points{{"command.environment.LR=\"0.1\"", "resources.cores=4"},
                               {"command.environment.LR=\"0.2\"", "resources.cores=4"}}));
    options.overrides = {"sweep="};
    auto none = submit_axes({});
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_TRUE(none->empty());
    // --set on a swept key would be replaced by every point's value: refused, saying where.
    options.overrides = {"resources.cores=3"};
    auto clash = submit_axes({});
    ASSERT_FALSE(clash);
    EXPECT_EQ(clash.error().code, ErrorCode::usage);
    EXPECT_EQ(clash.error().message.rfind(
                  fmt::format("--set 1: resources.cores is swept ({}:8:3)", recipe.string()), 0),
              0U)
        << clash.error().message;
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
