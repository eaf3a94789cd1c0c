// Golden files: every built-in site x every built-in recipe, byte for byte. Review changes to
// tests/golden/ like code. Regenerate after an intended change with:
//   DLJOB_UPDATE_GOLDEN=1 build-config/tests/dljob_unit_tests --gtest_filter='GoldenScripts*'
// (any build directory works), then `git diff tests/golden`.

#include "render_support.hpp"

#include <algorithm>
#include <cstdlib>

namespace dljob::test {
namespace {

class GoldenScripts : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(GoldenScripts, MatchTheCommittedScript) {
    const auto& [site, recipe] = GetParam();
    auto templates = builtin_templates();
    auto rendered = render::render_job(golden_request(site, recipe), templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    const auto golden = source_dir / "tests" / "golden" / site / (recipe + ".sh");
    const char* update = std::getenv("DLJOB_UPDATE_GOLDEN"); // NOLINT(concurrency-mt-unsafe)
    if (update != nullptr && std::string(update) == "1") {
        write_text(golden, rendered->script);
    }
    ASSERT_TRUE(std::filesystem::exists(golden))
        << golden << " is missing; regenerate with DLJOB_UPDATE_GOLDEN=1";
    EXPECT_EQ(rendered->script, read_text(golden))
        << "rendered script differs from " << golden
        << "; if the change is intended, regenerate with DLJOB_UPDATE_GOLDEN=1 and review the diff";
}

std::string golden_name(const ::testing::TestParamInfo<GoldenScripts::ParamType>& info) {
    std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
    for (char& c : name) {
        if (c == '-') {
            c = '_';
        }
    }
    return name;
}

INSTANTIATE_TEST_SUITE_P(EverySiteAndRecipe, GoldenScripts,
                         ::testing::Combine(::testing::ValuesIn(builtin_sites()),
                                            ::testing::ValuesIn(builtin_recipes())),
                         golden_name);

// submit --after: each family's own dependency on the submit command (shown in the script's
// header), before the script (sqsub: before the command it runs); local has none (its wrapper
// waits).
class DependencyForms : public ::testing::TestWithParam<std::string> {};

TEST_P(DependencyForms, RenderEachFamilysOwnDependency) {
    for (const bool ok : {true, false}) {
        RenderRequest req = golden_request(GetParam(), "mnist");
        req.after = JobDependency{7, "4242", "/scratch/dljob/runs/first", ok};
        auto templates = builtin_templates();
        auto rendered = render::render_job(req, templates);
        ASSERT_TRUE(rendered) << rendered.error().message;
        const std::string condition = ok ? "afterok" : "afterany";
        std::vector<std::string> expected;
        const std::string& family = rendered->scheduler;
        if (family == "slurm") {
            expected = {"--dependency=" + condition + ":4242"};
        } else if (family == "pbs" || family == "moab") {
            expected = {"-W", "depend=" + condition + ":4242"};
        } else if (family == "sqsub") {
            expected = {"-w", "4242"};
        } else {
            EXPECT_EQ(family, "local");
        }
        EXPECT_EQ(rendered->dependency_options, expected);
        const auto& argv = rendered->submit_argv;
        if (!expected.empty()) {
            const auto at = std::search(argv.begin(), argv.end(), expected.begin(), expected.end());
            ASSERT_NE(at, argv.end()) << render::command_line(argv);
            const auto next = at + static_cast<std::ptrdiff_t>(expected.size());
            ASSERT_NE(next, argv.end());
            EXPECT_EQ(*next, rendered->scheduler == "sqsub"
                                 ? std::string("--nompirun")
                                 : (req.run_dir / rendered->script_name).string());
            EXPECT_NE(rendered->script.find(render::command_line(argv)), std::string::npos);
        }
        EXPECT_NE(rendered->script.find("starts after job 7"), std::string::npos);
        // Without --after, nothing of it.
        RenderRequest plain = golden_request(GetParam(), "mnist");
        auto without = render::render_job(plain, templates);
        ASSERT_TRUE(without);
        EXPECT_TRUE(without->dependency_options.empty());
        EXPECT_EQ(without->submit_argv.size() + expected.size(), argv.size());
    }
}

INSTANTIATE_TEST_SUITE_P(EverySite, DependencyForms, ::testing::ValuesIn(builtin_sites()),
                         [](const auto& param) { return param.param; });

} // namespace
} // namespace dljob::test
