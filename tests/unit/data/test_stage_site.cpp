#include "unit/data/data_test_support.hpp"

#include <dljob/app/data/pack.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/domain/site_profile.hpp>

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
    request.where.site = "fastnode";
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

    // The same site from --site-file, outside the catalog's folders, as submit takes it.
    request.where.site_files = {dir / "sites/fastnode.yaml"};
    auto from_file = stage_dataset(request,
                                   [&](const std::string& name) -> std::optional<std::string> {
                                       const auto it = env.find(name);
                                       return it == env.end()
                                                  ? std::nullopt
                                                  : std::optional<std::string>(it->second);
                                   },
                                   {});
    ASSERT_TRUE(from_file) << from_file.error().message;
    EXPECT_EQ(from_file->path.rfind(dir / "fast", 0), 0U) << from_file->path;

    request.where.site_files.clear();
    request.where.site = "no-such-site";
    auto unknown = stage_dataset(request, [](const std::string&) { return std::nullopt; }, {});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
}

GetEnv environment(std::map<std::string, std::string> values) {
    return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
        const auto it = values.find(name);
        return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

// --to ramdisk on a site whose profile names no RAM disk used /dev/shm without a word.
TEST(StageDataSite, RamdiskWithoutTheSitesRamdiskTierWarnsNamingTheSite) {
    SiteProfile site;
    site.name = "nodisk";
    site.storage.push_back({"node-local", "/local", std::nullopt, true, false, {}, {}});
    for (const auto& env : {std::map<std::string, std::string>{},
                            std::map<std::string, std::string>{{"RAMDISK", "/ram"}}}) {
        auto target = resolve_stage_target("ramdisk", environment(env), &site);
        ASSERT_TRUE(target);
        EXPECT_EQ(target->directory, env.empty() ? "/dev/shm" : "/ram");
        EXPECT_NE(target->warning.find("site nodisk has no ramdisk storage tier"),
                  std::string::npos)
            << target->warning;
        EXPECT_NE(target->warning.find("uses " + target->directory), std::string::npos)
            << target->warning;
    }
    // Its tier exists but names a variable this node does not set: the same fallback, said.
    site.storage.push_back({"ramdisk", "$SITE_RAM", std::nullopt, true, false, {}, {}});
    auto unset = resolve_stage_target("ramdisk", environment({}), &site);
    ASSERT_TRUE(unset);
    EXPECT_EQ(unset->directory, "/dev/shm");
    EXPECT_NE(unset->warning.find("site nodisk's ramdisk tier ($SITE_RAM)"), std::string::npos)
        << unset->warning;
    // The site's own tier, no site at all, or another tier: nothing to say.
    auto own = resolve_stage_target("ramdisk", environment({{"SITE_RAM", "/r"}}), &site);
    ASSERT_TRUE(own);
    EXPECT_EQ(own->directory, "/r");
    EXPECT_TRUE(own->warning.empty()) << own->warning;
    auto no_site = resolve_stage_target("ramdisk", environment({}), nullptr);
    ASSERT_TRUE(no_site);
    EXPECT_TRUE(no_site->warning.empty()) << no_site->warning;
    site.storage.clear();
    auto tmp = resolve_stage_target("tmp", environment({}), &site);
    ASSERT_TRUE(tmp);
    EXPECT_TRUE(tmp->warning.empty()) << tmp->warning;
}

TEST(StageDataSite, StageDataSaysWhenRamdiskIsNotTheSitesTier) {
    ScratchDir dir;
    test::write_file(dir.path() / "src/a.txt", "alpha");
    ASSERT_TRUE(pack_dataset({dir / "src", dir / "a.dlpack", ""}, {}));
    std::filesystem::create_directories(dir.path() / "ram");
    StageRequest request;
    request.dataset = dir / "a.dlpack";
    request.to = "ramdisk";
    request.where.site = "local"; // the shipped profile: no ramdisk tier
    request.reserve = 0;
    std::vector<std::string> notices;
    auto staged = stage_dataset(request, environment({{"RAMDISK", dir / "ram"}}),
                                [&](const std::string& line) { notices.push_back(line); });
    ASSERT_TRUE(staged) << staged.error().message;
    ASSERT_FALSE(notices.empty());
    EXPECT_NE(notices.front().find("site local has no ramdisk storage tier"), std::string::npos)
        << notices.front();
}

} // namespace
} // namespace dljob::app
