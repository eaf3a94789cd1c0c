// The job's environment as rendered: modules purged and unloaded before any is loaded, the
// recipe's variables after the modules (so $EBROOT... of a module can be used), then the venv
// or conda environment; a site without modules refuses unload and purge.

#include "render_support.hpp"

#include <string>

namespace dljob::test {
namespace {

std::string script_of(RenderRequest req) {
    auto templates = builtin_templates();
    auto rendered = render::render_job(req, templates);
    EXPECT_TRUE(rendered) << (rendered ? "" : rendered.error().message);
    return rendered ? rendered->script : std::string();
}

TEST(EnvironmentRender, PurgeAndUnloadComeFirstThenLoadsThenVariablesThenTheVenv) {
    auto req = golden_request("graham", "pytorch-mnist");
    req.recipe.purge = true;
    req.recipe.unload = {"intel", "openmpi"};
    req.recipe.activate = "~/venvs/torch";
    req.recipe.command.environment = {
        {"LD_LIBRARY_PATH", EnvironmentSetting::Mode::prepend, {"$EBROOTX/lib"}}};
    const std::string script = script_of(req);
    const auto purge = script.find("\nmodule purge || dljob_fail $?\n");
    const auto unload = script.find("\nmodule unload openmpi || dljob_fail $?\n");
    const auto load = script.find("\ndljob_module load ");
    const auto variable = script.find(
        "\nexport "
        "LD_LIBRARY_PATH=\"${EBROOTX-}\"'/lib'\"${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}\"\n");
    const auto venv = script.find("\n. \"${HOME-}\"'/venvs/torch/bin/activate' || dljob_fail $?\n");
    ASSERT_NE(purge, std::string::npos) << script;
    ASSERT_NE(unload, std::string::npos) << script;
    ASSERT_NE(load, std::string::npos) << script;
    ASSERT_NE(variable, std::string::npos) << script;
    ASSERT_NE(venv, std::string::npos) << script;
    EXPECT_LT(purge, unload);
    EXPECT_LT(unload, load);
    EXPECT_LT(load, variable);
    EXPECT_LT(variable, venv);
}

TEST(EnvironmentRender, ACondaEnvironmentIsActivatedThroughCondasHook) {
    auto req = golden_request("graham", "pytorch-mnist");
    req.recipe.activate = "torch-2.1";
    EXPECT_NE(
        script_of(req).find(
            "\neval \"$(conda shell.bash hook)\" && conda activate 'torch-2.1' || dljob_fail $?\n"),
        std::string::npos);
}

TEST(EnvironmentRender, ASiteWithoutModulesRefusesUnloadAndPurge) {
    auto req = golden_request("local", "pytorch-mnist");
    req.recipe.unload = {"intel"};
    auto templates = builtin_templates();
    auto rendered = render::render_job(req, templates);
    ASSERT_FALSE(rendered);
    EXPECT_EQ(rendered.error().code, ErrorCode::config_invalid);
    EXPECT_NE(rendered.error().message.find("purges or unloads"), std::string::npos)
        << rendered.error().message;
}

} // namespace
} // namespace dljob::test
