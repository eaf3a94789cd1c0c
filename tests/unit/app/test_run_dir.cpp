#include "support/env_of.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/jobs/run_dir.hpp>
#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/util/paths.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace dljob::app {
namespace {

using test::env_of;

SiteProfile site_named(const std::string& name) {
    auto site = SiteCatalog().load(name);
    EXPECT_TRUE(site) << site.error().message;
    return *site;
}

// Run directories went to ~/.local/share/dljob/runs on every site: the small, quota-limited
// home file system, even where the profile names a scratch tier.
TEST(RunsRoot, GoesOnTheSitesWorkTier) {
    const auto env = env_of({{"SCRATCH", "/scratch/ann"}, {"USER", "ann"}, {"HOME", "/home/ann"}});
    const RunsRoot graham = default_runs_root(site_named("graham"), env);
    EXPECT_EQ(graham.path, "/scratch/ann/dljob/runs");
    EXPECT_NE(graham.origin.find("site graham's scratch tier ($SCRATCH)"), std::string::npos)
        << graham.origin;
    EXPECT_EQ(default_runs_root(site_named("bigred2"), env).path, "/N/dc2/scratch/ann/dljob/runs");
    // Set by the user: that wins everywhere.
    const auto chosen = env_of({{"SCRATCH", "/scratch/ann"}, {"DLJOB_RUNS_DIR", "/mine"}});
    EXPECT_EQ(default_runs_root(site_named("graham"), chosen).path, "/mine");
}

TEST(RunsRoot, ATierThatDoesNotExpandHereIsSkippedAndSaid) {
    // No $SCRATCH on this host: the next work tier, here $PROJECT.
    const auto project = default_runs_root(site_named("graham"), env_of({{"PROJECT", "/p/x"}}));
    EXPECT_EQ(project.path, "/p/x/dljob/runs");
    const auto neither = default_runs_root(site_named("graham"), env_of({}));
    EXPECT_EQ(neither.path, util::data_home() / "dljob" / "runs");
    EXPECT_NE(neither.origin.find("scratch tier ($SCRATCH) does not expand here"),
              std::string::npos)
        << neither.origin;
}

TEST(RunsRoot, TheLocalSiteKeepsTheDataHomeDefault) {
    // A laptop: home is all there is, and the XDG data home is where such files belong.
    const RunsRoot local = default_runs_root(site_named("local"), env_of({{"HOME", "/home/ann"}}));
    EXPECT_EQ(local.path, util::data_home() / "dljob" / "runs");
}

TEST(RunDirNotes, NameTheTierAndWarnWhenItPurgesBeforeTheWalltimeAndMargin) {
    SiteProfile site;
    site.name = "fast-purge";
    site.storage.push_back({"home", "$HOME", std::nullopt, false, true, {}, {}});
    site.storage.push_back({"scratch", "$HOME/scratch", std::nullopt, false, true, 10, {}});
    const auto env = env_of({{"HOME", "/home/ann"}});
    constexpr std::int64_t day = 86400;

    const auto on_home = run_dir_notes("/home/ann/runs/x", site, day, env);
    ASSERT_EQ(on_home.size(), 1U);
    EXPECT_NE(on_home[0].find("site fast-purge's home tier"), std::string::npos) << on_home[0];

    // The longest matching tier: scratch lies inside home here.
    const auto safe = run_dir_notes("/home/ann/scratch/dljob/runs/x", site, 2 * day, env);
    ASSERT_EQ(safe.size(), 1U) << "10 days > 2 + 7";
    EXPECT_NE(safe[0].find("site fast-purge's scratch tier"), std::string::npos) << safe[0];

    const auto purged = run_dir_notes("/home/ann/scratch/dljob/runs/x", site, 4 * day, env);
    ASSERT_EQ(purged.size(), 2U) << "10 days < 4 + 7";
    EXPECT_NE(purged[1].find("warning: site fast-purge's scratch tier purges files after 10 days"),
              std::string::npos)
        << purged[1];

    const auto elsewhere = run_dir_notes("/home/annex/runs/x", site, 4 * day, env);
    ASSERT_EQ(elsewhere.size(), 1U);
    EXPECT_EQ(elsewhere[0], "run directory /home/annex/runs/x");
}

TEST(RunDirNotes, RenderSaysWhereTheRunDirectoryIs) {
    test::ScratchDir dir;
    ::setenv("SCRATCH", (dir / "scratch").c_str(), 1);        // NOLINT(concurrency-mt-unsafe)
    const char* had_runs_dir = std::getenv("DLJOB_RUNS_DIR"); // NOLINT(concurrency-mt-unsafe)
    const std::string saved = had_runs_dir != nullptr ? had_runs_dir : "";
    ::unsetenv("DLJOB_RUNS_DIR"); // NOLINT(concurrency-mt-unsafe)
    RenderOptions options;
    options.recipe = std::filesystem::path(DLJOB_SOURCE_DIR) / "recipes" / "mnist.yaml";
    options.site = "graham";
    options.account = "def-ann";
    auto rendered = render_recipe(options);
    if (!saved.empty()) {
        ::setenv("DLJOB_RUNS_DIR", saved.c_str(), 1); // NOLINT(concurrency-mt-unsafe)
    }
    ::unsetenv("SCRATCH"); // NOLINT(concurrency-mt-unsafe)
    ASSERT_TRUE(rendered) << rendered.error().message;
    const std::string expected = "run directory " + (dir / "scratch/dljob/runs/");
    bool said = false;
    for (const auto& note : rendered->notes) {
        said = said || (note.rfind(expected, 0) == 0 &&
                        note.find("site graham's scratch tier") != std::string::npos);
    }
    EXPECT_TRUE(said) << "no note starts with " << expected;
    EXPECT_NE(rendered->script.find(dir / "scratch/dljob/runs/"), std::string::npos);
}

} // namespace
} // namespace dljob::app
