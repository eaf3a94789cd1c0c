// The `local` site describes the machine dljob runs on (node values of `auto`, filled from a
// MachineProbe when a command loads the profile): a request the machine cannot hold is refused
// naming what was found, with the fix. Machines here are FixedMachine values, so the rules are
// checked whatever machine runs the tests.

#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/config/resolve.hpp>
#include <dljob/config/site_loader.hpp>
#include <dljob/schedulers/scheduler_table.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dljob::config {
namespace {

const std::filesystem::path source_dir{DLJOB_SOURCE_DIR};

// The machine of the issue: 2 cores, 23 GB and no GPU (no NVIDIA driver).
MachineFacts small_machine() {
    MachineFacts machine;
    machine.cores = 2;
    machine.memory = MemorySize::from_mib(23 * 1024);
    machine.gpus = 0;
    machine.cores_found = "2 CPU(s) in dljob's affinity mask";
    machine.memory_found = "MemTotal of /proc/meminfo";
    machine.gpus_found = "no /dev/nvidia[0-9]* device: no NVIDIA driver or GPU";
    return machine;
}

SiteProfile local_site(const MachineFacts& machine) {
    auto site = load_site_profile(source_dir / "site-profiles" / "local.yaml");
    EXPECT_TRUE(site) << site.error().message;
    EXPECT_TRUE(describes_machine(*site));
    describe_machine(*site, machine);
    return *site;
}

Recipe recipe_asking(int gpus, std::optional<int> cores, std::optional<MemorySize> memory) {
    Recipe r;
    r.name = "t";
    r.kind = RecipeKind::train;
    r.resources.gpus = gpus;
    r.resources.cores = cores;
    r.resources.memory = memory;
    r.origins["resources.gpus"] = "r.yaml:4:9";
    r.origins["resources.cores"] = "r.yaml:5:10";
    r.origins["resources.memory"] = "r.yaml:6:11";
    return r;
}

TEST(MachineSite, TheLocalProfileIsTheMachineItRunsOn) {
    const auto site = local_site(small_machine());
    const Partition& local = *site.find_partition("");
    EXPECT_EQ(local.node.cores, 2);
    EXPECT_EQ(local.node.memory.mib(), 23 * 1024);
    EXPECT_EQ(local.node.gpus, 0);
    EXPECT_EQ(
        site.origins.at("partitions.local.node.gpus").rfind("this machine: no /dev/nvidia", 0), 0U)
        << site.origins.at("partitions.local.node.gpus");
    EXPECT_NE(site.origins.at("partitions.local.node.cores").find("(auto, line "),
              std::string::npos)
        << site.origins.at("partitions.local.node.cores");
}

TEST(MachineSite, AGpuRecipeOnAMachineWithoutGpusIsRefusedWithTheFix) {
    const auto site = local_site(small_machine());
    auto refused = resolve_resources(recipe_asking(1, {}, {}), site, *site.find_partition(""));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::config_invalid);
    EXPECT_EQ(refused.error().message,
              "r.yaml:4:9: resources.gpus: 1 GPU(s) requested, but this machine has none (site "
              "local runs its jobs here; no /dev/nvidia[0-9]* device: no NVIDIA driver or GPU)");
    EXPECT_NE(refused.error().hint.find("--set resources.gpus=0"), std::string::npos)
        << refused.error().hint;
    EXPECT_TRUE(resolve_resources(recipe_asking(0, {}, {}), site, *site.find_partition("")));
}

TEST(MachineSite, MoreCoresMemoryOrGpusThanTheMachineHasAreRefused) {
    // What was accepted on a 2-core, 23 GB machine without a GPU: 48 cores, 200G, 8 GPUs.
    const auto site = local_site(small_machine());
    const Partition& local = *site.find_partition("");
    auto cores = resolve_resources(recipe_asking(0, 48, {}), site, local);
    ASSERT_FALSE(cores);
    EXPECT_EQ(cores.error().message,
              "r.yaml:5:10: resources.cores: 48 cores requested, but this machine has 2 (site "
              "local runs its jobs here; 2 CPU(s) in dljob's affinity mask)");
    EXPECT_EQ(cores.error().hint, "ask for at most 2 cores");
    auto memory =
        resolve_resources(recipe_asking(0, {}, MemorySize::parse("200G").value()), site, local);
    ASSERT_FALSE(memory);
    EXPECT_EQ(memory.error().message,
              "r.yaml:6:11: resources.memory: 200G requested, but this machine has 23G (site "
              "local runs its jobs here; MemTotal of /proc/meminfo)");
    EXPECT_EQ(memory.error().hint, "ask for at most 23G (--set resources.memory=23G)");

    MachineFacts workstation = small_machine();
    workstation.gpus = 2;
    workstation.gpus_found = "2 /dev/nvidia[0-9]* device(s)";
    const auto two = local_site(workstation);
    auto gpus = resolve_resources(recipe_asking(8, {}, {}), two, *two.find_partition(""));
    ASSERT_FALSE(gpus);
    EXPECT_EQ(gpus.error().message,
              "r.yaml:4:9: resources.gpus: 8 GPUs requested, but this machine has 2 (site local "
              "runs its jobs here; 2 /dev/nvidia[0-9]* device(s))");
    EXPECT_EQ(gpus.error().hint, "ask for at most 2 (--set resources.gpus=2)");
    auto fits = resolve_resources(recipe_asking(2, {}, MemorySize::parse("8G").value()), two,
                                  *two.find_partition(""));
    ASSERT_TRUE(fits) << fits.error().message;
    EXPECT_EQ(fits->gpus_per_node, 2);
    EXPECT_EQ(fits->cores_per_node, 2); // the machine's 2 cores, one per GPU
}

TEST(MachineSite, AutoIsOnlyForThePartitionsOfTheMachineDljobRunsOn) {
    const auto dir = std::filesystem::temp_directory_path() / "dljob-machine-site";
    std::filesystem::create_directories(dir);
    const auto file = dir / "s.yaml";
    std::ofstream(file) << "name: s\npartitions:\n  gpu:\n    scheduler: slurm\n"
                           "    node: {cores: 8, memory: auto, gpus: 2}\n"
                           "    walltime: {default: \"01:00:00\", max: \"02:00:00\"}\n";
    // The document reads; its family (slurm) refuses it, as the catalog asks every family.
    auto site = load_site_profile(file);
    ASSERT_TRUE(site) << site.error().message;
    const auto accepted = schedulers::check_site(*site);
    ASSERT_FALSE(accepted);
    EXPECT_NE(
        accepted.error().message.find("partitions.gpu.node: auto is the machine dljob runs on"),
        std::string::npos)
        << accepted.error().message;
    std::ofstream(file) << "name: s\npartitions:\n  here:\n    scheduler: local\n"
                           "    node: {cores: auto, memory: 4G}\n"
                           "    walltime: {default: \"01:00:00\", max: \"02:00:00\"}\n";
    auto mixed = load_site_profile(file);
    ASSERT_TRUE(mixed) << mixed.error().message;
    describe_machine(*mixed, small_machine());
    EXPECT_EQ(mixed->partitions.front().node.cores, 2);
    EXPECT_EQ(mixed->partitions.front().node.memory.mib(), 4096) << "its own number stays";
    std::filesystem::remove_all(dir);
}

// What every verb loads: the catalog fills the machine in from the probe it is given.
TEST(MachineSite, TheCatalogDescribesTheMachineItIsGiven) {
    const FixedMachine machine(small_machine());
    auto site = app::SiteCatalog({}, &machine).load("local");
    ASSERT_TRUE(site) << site.error().message;
    EXPECT_EQ(site->find_partition("")->node.cores, 2);
    EXPECT_EQ(site->find_partition("")->node.gpus, 0);
    auto graham = app::SiteCatalog({}, &machine).load("graham");
    ASSERT_TRUE(graham) << graham.error().message;
    EXPECT_GT(graham->find_partition("")->node.gpus, 0) << "a cluster's nodes are its own";
}

} // namespace
} // namespace dljob::config
