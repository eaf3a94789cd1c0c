#include "unit/data/data_test_support.hpp"

#include <dljob/app/pack.hpp>
#include <dljob/app/stage.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>

namespace dljob::app {
namespace {

using test::ScratchDir;

TEST(StageDataSite, TheSitesNodeLocalTierComesFirst) {
    ScratchDir dir;
    test::write_file(dir.path() / "src/a.txt", "alpha");
    PackRequest pack;
    pack.source = dir / "src";
    pack.output = dir / "a.dlpack";
    ASSERT_TRUE(pack_dataset(pack, {}));

    std::string profile =
        test::read_file(std::string(DLJOB_SOURCE_DIR) + "/site-profiles/local.yaml");
    profile.replace(profile.find("name: local"), 11, "name: fastnode");
    profile += "  node-local: {path: $FAST_TMP, per_node: true, network: false}\n";
    test::write_file(dir.path() / "sites/fastnode.yaml", profile);
    ::setenv("DLJOB_SITE_PROFILES_DIR", (dir / "sites").c_str(),
             1); // NOLINT(concurrency-mt-unsafe)
    std::filesystem::create_directories(dir.path() / "fast");

    StageRequest request;
    request.dataset = dir / "a.dlpack";
    request.to = "tmp";
    request.site = "fastnode";
    const std::map<std::string, std::string> env{{"FAST_TMP", dir / "fast"}};
    auto staged = stage_dataset(request,
                                [&](const std::string& name) -> std::optional<std::string> {
                                    const auto it = env.find(name);
                                    return it == env.end() ? std::nullopt
                                                           : std::optional<std::string>(it->second);
                                },
                                {});
    ::unsetenv("DLJOB_SITE_PROFILES_DIR"); // NOLINT(concurrency-mt-unsafe)
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_EQ(staged->path.rfind(dir / "fast", 0), 0U) << staged->path;
    EXPECT_NE(staged->target_note.find("fastnode"), std::string::npos) << staged->target_note;

    request.site = "no-such-site";
    auto unknown = stage_dataset(request, [](const std::string&) { return std::nullopt; }, {});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
}

} // namespace
} // namespace dljob::app
