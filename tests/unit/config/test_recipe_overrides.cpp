// `--set KEY=VALUE` overrides: applied to the recipe document and validated like the file's own
// values; errors point at `--set:N:COLUMN` and name the key.

#include "support/bounded_child.hpp"

#include <dljob/config/recipe_loader.hpp>
#include <dljob/config/recipe_overrides.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dljob::config {
namespace {

const std::filesystem::path fashion =
    std::filesystem::path(DLJOB_SOURCE_DIR) / "recipes" / "fashion-mnist.yaml";

TEST(RecipeOverrides, SetsTheEnginesMaxIterAndRecordsWhereItCameFrom) {
    auto recipe = load_recipe(fashion, {"train.max_iter=200", "resources.memory=2G"});
    ASSERT_TRUE(recipe) << recipe.error().message;
    ASSERT_TRUE(recipe->train.max_iter.has_value());
    EXPECT_EQ(*recipe->train.max_iter, 200);
    ASSERT_TRUE(recipe->resources.memory.has_value());
    EXPECT_EQ(recipe->resources.memory->mib(), 2048);
    EXPECT_EQ(recipe->origins.at("train.max_iter"), "--set:1:16");
    EXPECT_EQ(recipe->origins.at("resources.memory"), "--set:2:18");
    // Untouched values stay as the file says.
    EXPECT_EQ(recipe->resources.gpus, 1);
    EXPECT_EQ(recipe->name, "lenet-fashion");
    auto plain = load_recipe(fashion);
    ASSERT_TRUE(plain);
    EXPECT_FALSE(plain->train.max_iter.has_value());
}

TEST(RecipeOverrides, UnknownKeyIsAnErrorNamingItAndTheClosestValidOne) {
    auto recipe = load_recipe(fashion, {"train.max_iters=200"});
    ASSERT_FALSE(recipe);
    EXPECT_EQ(recipe.error().code, ErrorCode::config_invalid);
    EXPECT_EQ(recipe.error().message.rfind("--set:1:7: train.max_iters: unknown key", 0), 0U)
        << recipe.error().message;
    EXPECT_EQ(recipe.error().hint, "did you mean 'max_iter'?");
    auto top = load_recipe(fashion, {"resource.gpus=0"});
    ASSERT_FALSE(top);
    EXPECT_EQ(top.error().message.rfind("--set:1:1: resource: unknown key", 0), 0U)
        << top.error().message;
}

TEST(RecipeOverrides, BadValuesAreCheckedLikeTheFilesOwn) {
    auto recipe = load_recipe(fashion, {"train.max_iter=200", "train.max_iter=lots"});
    ASSERT_FALSE(recipe);
    EXPECT_EQ(recipe.error().message,
              "--set:2:16: train.max_iter: expected a whole number from 1 to 1000000000, got "
              "'lots'");
    auto zero = load_recipe(fashion, {"train.max_iter=0"});
    ASSERT_FALSE(zero);
    EXPECT_NE(zero.error().message.find("train.max_iter"), std::string::npos);
    auto memory = load_recipe(fashion, {"resources.memory=lots"});
    ASSERT_FALSE(memory);
    EXPECT_EQ(memory.error().message.rfind("--set:1:18: resources.memory:", 0), 0U)
        << memory.error().message;
    // A recipe-level rule still holds: a train: recipe with command: as well is refused.
    auto both = load_recipe(fashion, {"command.argv=[true]"});
    ASSERT_FALSE(both);
    EXPECT_NE(both.error().message.find("exactly one of train"), std::string::npos);
}

TEST(RecipeOverrides, SolverValuesOverrideTheNetworkConfigInDltrainsOrderAndNames) {
    auto recipe = load_recipe(fashion, {"train.random_seed=3", "train.base_lr=0.01",
                                        "train.lr_policy=multistep", "train.stepvalue=[100, 200]",
                                        "train.solver=Adam", "train.batch_size=32"});
    ASSERT_TRUE(recipe) << recipe.error().message;
    EXPECT_EQ(recipe->train.solver,
              (std::vector<std::pair<std::string, std::string>>{{"type", "Adam"},
                                                                {"base_lr", "0.01"},
                                                                {"lr_policy", "multistep"},
                                                                {"stepvalue", "[100,200]"},
                                                                {"batch_size", "32"},
                                                                {"random_seed", "3"}}));
    EXPECT_EQ(recipe->origins.at("train.base_lr"), "--set:2:15");
    auto plain = load_recipe(fashion);
    ASSERT_TRUE(plain);
    EXPECT_TRUE(plain->train.solver.empty());
}

TEST(RecipeOverrides, BadSolverValuesNameTheArgumentColumnAndKey) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"train.base_lr=-1", "--set:1:15: train.base_lr: expected a number >= 0"},
        {"train.base_lr=fast", "--set:1:15: train.base_lr: expected a number >= 0"},
        {"train.momentum=1.5", "--set:1:16: train.momentum: expected a number >= 0 and < 1"},
        {"train.lr_policy=stepp", "--set:1:17: train.lr_policy: expected one of"},
        {"train.batch_size=0", "--set:1:18: train.batch_size: expected a whole number"},
        {"train.stepvalue=[200, 100]", "--set:1:23: train.stepvalue[1]: expected an iteration "
                                       "above 200"},
        {"train.stepvalue=100", "--set:1:17: train.stepvalue: expected a list"},
    };
    for (const auto& [assignment, message] : cases) {
        auto recipe = load_recipe(fashion, {assignment});
        ASSERT_FALSE(recipe) << assignment;
        EXPECT_EQ(recipe.error().message.rfind(message, 0), 0U) << recipe.error().message;
    }
    auto typo = load_recipe(fashion, {"train.base_rl=0.1"});
    ASSERT_FALSE(typo);
    EXPECT_EQ(typo.error().hint, "did you mean 'base_lr'?");
}

TEST(RecipeOverrides, WeightsOfAnotherJobAreKeptForSubmitAndMustNameAJobId) {
    auto recipe = load_recipe(fashion, {"train.weights=\"@12\""});
    ASSERT_TRUE(recipe) << recipe.error().message;
    EXPECT_EQ(recipe->train.weights, "@12"); // resolved by submit --after 12, not as a path
    for (const std::string bad : {"@", "@x", "@0", "@12/iter_1.ckpt"}) {
        auto refused = load_recipe(fashion, {"train.weights=\"" + bad + "\""});
        ASSERT_FALSE(refused) << bad;
        EXPECT_NE(refused.error().message.find("expected @ and a dljob job id"), std::string::npos)
            << refused.error().message;
    }
}

TEST(RecipeOverrides, MalformedAssignmentsAreRefused) {
    for (const std::string bad : {"train.max_iter", "=3", "train..max_iter=3", ".x=1", "a b=1"}) {
        auto recipe = load_recipe(fashion, {bad});
        ASSERT_FALSE(recipe) << bad;
        EXPECT_NE(recipe.error().message.find("expected KEY=VALUE"), std::string::npos)
            << recipe.error().message;
    }
    auto scalar = load_recipe(fashion, {"name.first=x"});
    ASSERT_FALSE(scalar);
    EXPECT_EQ(scalar.error().message,
              "--set:1:1: name: is a single value, not a mapping: cannot set name.first");
}

TEST(RecipeOverrides, ValuesAreYamlAndALaterAssignmentWins) {
    auto recipe =
        load_recipe(fashion, {"environment.needs=[cuda]", "train.threads=2", "train.threads=3",
                              "mail.address=me@example.org", "mail.on=[end]"});
    ASSERT_TRUE(recipe) << recipe.error().message;
    EXPECT_EQ(recipe->needs, std::vector<std::string>{"cuda"});
    EXPECT_EQ(recipe->train.threads, 3);
    EXPECT_EQ(recipe->mail.address, "me@example.org"); // mail: did not exist in the file
    EXPECT_TRUE(recipe->mail.on_end);
    auto quoted = load_recipe(fashion, {"resources.gpus=\"1\""});
    ASSERT_FALSE(quoted); // quoted: a string, as in the file
    EXPECT_NE(quoted.error().message.find("resources.gpus"), std::string::npos);
    auto empty = load_recipe(fashion, {"data.source="});
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().message.rfind("--set:1:13: data.source:", 0), 0U)
        << empty.error().message;
}

// A value is a YAML document of its own, under the same limits as a file; its syntax and limit
// errors point into the N-th argument like every other --set error.
TEST(RecipeOverrides, ValuesAreBoundedLikeFilesAndTheirErrorsPointIntoTheArgument) {
    std::string laughs = "[&a0 [x,x,x,x,x,x,x,x,x,x]";
    for (int level = 1; level <= 8; ++level) {
        laughs += fmt::format(",&a{} [*a{}", level, level - 1);
        for (int i = 1; i < 10; ++i) {
            laughs += fmt::format(",*a{}", level - 1);
        }
        laughs += "]";
    }
    laughs += "]";
    ASSERT_LT(laughs.size(), 403U);
    const auto outcome = test::run_bounded([&] {
        auto recipe = load_recipe(fashion, {"train.threads=2", "train.max_iter=" + laughs});
        return recipe ? std::string("accepted") : recipe.error().message;
    });
    ASSERT_TRUE(outcome.returned) << outcome.output;
    // "train.max_iter=" is 15 characters, so the value's column C is the argument's C + 15.
    EXPECT_EQ(outcome.output.rfind("--set:2:", 0), 0U) << outcome.output;
    EXPECT_NE(outcome.output.find(": the document reaches more than 100000 nodes here"),
              std::string::npos)
        << outcome.output;
    const int value_column = std::stoi(outcome.output.substr(8));
    EXPECT_GT(value_column, 15) << outcome.output;
    EXPECT_EQ(laughs.substr(static_cast<std::size_t>(value_column) - 16, 4), "*a3,")
        << "the column points at the alias that passes the limit: " << outcome.output;

    // yaml-cpp reads each unclosed '[' as a list that may be a mapping's key: two levels each,
    // so the 33rd '[' (value column 33, argument column 48) is 65 levels deep.
    auto deep = load_recipe(fashion, {"train.max_iter=" + std::string(1000, '[')});
    ASSERT_FALSE(deep);
    EXPECT_EQ(deep.error().message.rfind("--set:1:48: nested deeper than 64 levels", 0), 0U)
        << deep.error().message;
    auto syntax = load_recipe(fashion, {"train.threads=2", "train.max_iter=[1, 2"});
    ASSERT_FALSE(syntax);
    EXPECT_EQ(syntax.error().message.rfind("--set:2:", 0), 0U) << syntax.error().message;
}

TEST(RecipeOverrides, RenderedTrainingGetsMaxIter) {
    YamlNode root;
    auto doc = parse_yaml("name: t\ndata: {source: /d}\ntrain: {config: n.yaml}\n", "r.yaml");
    ASSERT_TRUE(doc);
    root = *doc;
    ASSERT_TRUE(apply_recipe_overrides(root, {"train.max_iter=7"}));
    auto recipe = recipe_from_yaml(root, "/r");
    ASSERT_TRUE(recipe) << recipe.error().message;
    EXPECT_EQ(recipe->train.max_iter, 7);
}

} // namespace
} // namespace dljob::config
