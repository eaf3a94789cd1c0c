// Issue 21's keys: a recipe's resources.ranks and a partition's mpi: block, each refused with
// file, line, column and key when wrong.

#include <dljob/config/recipe_loader.hpp>
#include <dljob/config/site_loader.hpp>

#include <gtest/gtest.h>

#include <string>

namespace dljob::config {
namespace {

Result<SiteProfile> load_site(const std::string& extra) {
    auto doc = parse_yaml(
        "name: s\npartitions:\n  gpu:\n    scheduler: slurm\n    node: {cores: 8, memory: 32G, "
        "gpus: 2}\n    walltime: {default: \"01:00:00\", max: \"02:00:00\"}\n" +
            extra,
        "s.yaml");
    if (!doc) {
        return fail(doc.error());
    }
    return site_profile_from_yaml(*doc);
}

Result<Recipe> load_recipe(const std::string& resources) {
    auto doc = parse_yaml("name: t\ndata:\n  source: /d\ntrain:\n  config: net.yaml\nresources:\n" +
                              resources,
                          "r.yaml");
    if (!doc) {
        return fail(doc.error());
    }
    return recipe_from_yaml(*doc, "/recipes");
}

TEST(MpiSpec, IsReadFromThePartition) {
    auto site = load_site(
        "    mpi: {module: openmpi/4.1, launcher: mpirun.openmpi, flags: [--bind-to, none]}\n");
    ASSERT_TRUE(site) << site.error().message;
    const auto& mpi = site->partitions.front().mpi;
    EXPECT_EQ(mpi.module, "openmpi/4.1");
    EXPECT_EQ(mpi.launcher, "mpirun.openmpi");
    EXPECT_EQ(mpi.flags, (std::vector<std::string>{"--bind-to", "none"}));
}

// The flavor decides the launcher's tagging and placement options: named, or read from the
// names Debian and module trees give it.
TEST(MpiSpec, FlavorIsNamedOrReadFromTheLauncherOrModule) {
    const auto flavor = [](const std::string& mpi) {
        auto site = load_site("    mpi: " + mpi + "\n");
        EXPECT_TRUE(site) << site.error().message;
        return site ? site->partitions.front().mpi.flavor : MpiFlavor::unknown;
    };
    EXPECT_EQ(flavor("{launcher: mpirun.openmpi}"), MpiFlavor::openmpi);
    EXPECT_EQ(flavor("{launcher: /usr/bin/mpiexec.mpich}"), MpiFlavor::mpich);
    EXPECT_EQ(flavor("{module: openmpi/4.1.5, launcher: mpiexec}"), MpiFlavor::openmpi);
    EXPECT_EQ(flavor("{module: mpich/3.4}"), MpiFlavor::mpich);
    EXPECT_EQ(flavor("{module: intelmpi, launcher: mpiexec}"), MpiFlavor::unknown);
    EXPECT_EQ(flavor("{module: openmpi, flavor: mpich}"), MpiFlavor::mpich);
    auto bad = load_site("    mpi: {flavor: lam}\n");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("partitions.gpu.mpi.flavor"), std::string::npos)
        << bad.error().message;
    EXPECT_NE(bad.error().message.find("openmpi"), std::string::npos) << bad.error().message;
}

TEST(MpiSpec, RefusesWhatAShellWouldRead) {
    auto launcher = load_site("    mpi: {launcher: \"mpirun; rm -rf ~\"}\n");
    ASSERT_FALSE(launcher);
    EXPECT_NE(launcher.error().message.find("s.yaml:7:"), std::string::npos)
        << launcher.error().message;
    EXPECT_NE(launcher.error().message.find("partitions.gpu.mpi.launcher"), std::string::npos)
        << launcher.error().message;
    auto flag = load_site("    mpi: {flags: [\"--x=$(reboot)\"]}\n");
    ASSERT_FALSE(flag);
    EXPECT_NE(flag.error().message.find("partitions.gpu.mpi.flags[0]"), std::string::npos)
        << flag.error().message;
    auto key = load_site("    mpi: {modules: openmpi}\n");
    ASSERT_FALSE(key);
    EXPECT_NE(key.error().message.find("partitions.gpu.mpi.modules"), std::string::npos)
        << key.error().message;
}

TEST(Ranks, IsReadAndRefusedWithGpus) {
    auto recipe = load_recipe("  ranks: 4\n");
    ASSERT_TRUE(recipe) << recipe.error().message;
    EXPECT_EQ(recipe->resources.ranks, 4);
    auto with_gpus = load_recipe("  gpus: 2\n  ranks: 2\n");
    ASSERT_FALSE(with_gpus);
    EXPECT_NE(with_gpus.error().message.find("r.yaml:8:"), std::string::npos)
        << with_gpus.error().message;
    EXPECT_NE(with_gpus.error().message.find("resources.ranks"), std::string::npos);
    auto zero = load_recipe("  ranks: 0\n");
    ASSERT_FALSE(zero);
    EXPECT_NE(zero.error().message.find("resources.ranks"), std::string::npos);
}

} // namespace
} // namespace dljob::config
