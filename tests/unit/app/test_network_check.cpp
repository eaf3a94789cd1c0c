// `dljob validate` and `submit` check a train: recipe's network with `dltrain check`: a check
// that crashes or never ends refuses the recipe (training would do the same on the job's
// allocation); exit 3 is dltrain's own refusal, passed on with the recipe's line.

#include "../schedulers/fake_process_runner.hpp"

#include <dljob/app/jobs/network_check.hpp>

#include <gtest/gtest.h>

namespace dljob::app {
namespace {

// Any file that exists stands for dltrain: the fake runner answers for it.
const std::filesystem::path dltrain = "/bin/sh";

Recipe train_recipe() {
    Recipe recipe;
    recipe.kind = RecipeKind::train;
    recipe.train.config = "/recipes/networks/lenet.yaml";
    recipe.origins["train.config"] = "/recipes/r.yaml:7:11";
    return recipe;
}

TEST(NetworkCheck, ACrashedCheckRefusesTheRecipeNamingTheSignal) {
    testing::FakeProcessRunner runner;
    runner.reply(dltrain.string(), 128 + 11, "", "");
    auto checked = check_network(runner, train_recipe(), dltrain);
    ASSERT_FALSE(checked);
    EXPECT_EQ(checked.error().code, ErrorCode::config_invalid);
    EXPECT_NE(checked.error().message.find("/recipes/r.yaml:7:11: train.config "
                                           "/recipes/networks/lenet.yaml: `dltrain check` crashed "
                                           "(SIGSEGV)"),
              std::string::npos)
        << checked.error().message;
}

TEST(NetworkCheck, AHangingCheckRefusesTheRecipe) {
    testing::FakeProcessRunner runner;
    runner.reply_timeout(dltrain.string());
    auto checked = check_network(runner, train_recipe(), dltrain);
    ASSERT_FALSE(checked);
    EXPECT_EQ(checked.error().code, ErrorCode::config_invalid);
    EXPECT_NE(checked.error().message.find("did not finish in 60 s"), std::string::npos)
        << checked.error().message;
}

TEST(NetworkCheck, AnOkCheckPassesItsNotesAndAnotherExitIsANote) {
    testing::FakeProcessRunner runner;
    runner.reply(dltrain.string(), 0, "dltrain: not checked: the data's shape\n");
    auto checked = check_network(runner, train_recipe(), dltrain);
    ASSERT_TRUE(checked) << checked.error().message;
    ASSERT_EQ(checked->size(), 1U);
    EXPECT_EQ(checked->front(), "the data's shape");
    runner.reply(dltrain.string(), 2, "", "unknown option --max-memory\n");
    auto old = check_network(runner, train_recipe(), dltrain);
    ASSERT_TRUE(old) << old.error().message;
    ASSERT_EQ(old->size(), 1U);
    EXPECT_NE(old->front().find("not checked here"), std::string::npos) << old->front();
}

} // namespace
} // namespace dljob::app
