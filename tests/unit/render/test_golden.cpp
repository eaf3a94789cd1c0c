// Golden files: every built-in site x every built-in recipe, byte for byte. Review changes to
// tests/golden/ like code. Regenerate after an intended change with:
//   DLJOB_UPDATE_GOLDEN=1 build-config/tests/dljob_unit_tests --gtest_filter='GoldenScripts*'
// (any build directory works), then `git diff tests/golden`.

#include "render_support.hpp"

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

} // namespace
} // namespace dljob::test
