// What a recipe says of the job's environment: command.environment values, prepended and
// appended path lists, modules unloaded or purged first, a venv or conda environment.

#include <dljob/config/recipe_loader.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dljob::config {
namespace {

Result<Recipe> load(const std::string& text) {
    auto doc = parse_yaml(text, "r.yaml");
    if (!doc) {
        return fail(doc.error());
    }
    return recipe_from_yaml(*doc, "/recipes");
}

const std::string command = "name: t\ncommand:\n  argv: [python3, train.py]\n";

TEST(RecipeEnvironment, ValuesPrependAndAppend) {
    auto recipe = load(command + "  environment:\n"
                                 "    OMP_NUM_THREADS: \"4\"\n"
                                 "    LD_LIBRARY_PATH: {prepend: [/opt/x/lib, ~/lib]}\n"
                                 "    PATH: {append: $HOME/bin}\n");
    ASSERT_TRUE(recipe) << recipe.error().message;
    const auto& env = recipe->command.environment;
    ASSERT_EQ(env.size(), 3U);
    EXPECT_EQ(env[0].name, "OMP_NUM_THREADS");
    EXPECT_EQ(env[0].mode, EnvironmentSetting::Mode::set);
    EXPECT_EQ(env[0].values, std::vector<std::string>{"4"});
    EXPECT_EQ(env[1].name, "LD_LIBRARY_PATH");
    EXPECT_EQ(env[1].mode, EnvironmentSetting::Mode::prepend);
    EXPECT_EQ(env[1].values, (std::vector<std::string>{"/opt/x/lib", "~/lib"}));
    EXPECT_EQ(env[2].mode, EnvironmentSetting::Mode::append);
    EXPECT_EQ(env[2].values, std::vector<std::string>{"$HOME/bin"});
}

TEST(RecipeEnvironment, APathListEntryWithAColonOrTwoModesAreRefusedWithTheirPlace) {
    auto colon = load(command + "  environment:\n    PATH: {prepend: \"/a:/b\"}\n");
    ASSERT_FALSE(colon);
    EXPECT_EQ(colon.error().message.rfind("r.yaml:5:", 0), 0U) << colon.error().message;
    EXPECT_NE(colon.error().message.find("command.environment.PATH.prepend"), std::string::npos)
        << colon.error().message;
    auto both = load(command + "  environment:\n    PATH: {prepend: /a, append: /b}\n");
    ASSERT_FALSE(both);
    EXPECT_NE(both.error().message.find("expected one of prepend: or append:"), std::string::npos)
        << both.error().message;
    auto other = load(command + "  environment:\n    PATH: {replace: /a}\n");
    ASSERT_FALSE(other);
    EXPECT_NE(other.error().message.find("unknown key"), std::string::npos)
        << other.error().message;
    auto list = load(command + "  environment:\n    PATH: [/a, /b]\n");
    ASSERT_FALSE(list);
    EXPECT_NE(list.error().message.find("{prepend: ...}"), std::string::npos)
        << list.error().message;
}

TEST(RecipeEnvironment, UnloadPurgeAndActivate) {
    auto recipe = load(command + "environment:\n  purge: true\n  unload: [intel, mkl, openmpi]\n"
                                 "  modules: [gcc]\n  activate: ~/venvs/torch\n");
    ASSERT_TRUE(recipe) << recipe.error().message;
    EXPECT_TRUE(recipe->purge);
    EXPECT_EQ(recipe->unload, (std::vector<std::string>{"intel", "mkl", "openmpi"}));
    EXPECT_EQ(recipe->activate, "~/venvs/torch");
    auto conda = load(command + "environment:\n  activate: pytorch-2.1\n");
    ASSERT_TRUE(conda) << conda.error().message;
    EXPECT_EQ(conda->activate, "pytorch-2.1");
    auto bad = load(command + "environment:\n  activate: \"my env; rm -rf ~\"\n");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("environment.activate"), std::string::npos)
        << bad.error().message;
}

} // namespace
} // namespace dljob::config
