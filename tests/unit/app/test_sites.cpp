// `dljob sites show NAME`: every value of a site profile with the line it came from, so a user
// sees what a job there will be given and where to change it.

#include <dljob/app/sites/sites_service.hpp>

#include <gtest/gtest.h>

#include <string>

namespace dljob::app {
namespace {

TEST(SitesShow, EveryValueNamesTheLineItCameFromOrDefault) {
    auto text = describe_site(SiteCatalog(), "graham");
    ASSERT_TRUE(text) << text.error().message;
    const std::string& out = *text;
    EXPECT_NE(out.find("# from "), std::string::npos) << out;
    EXPECT_NE(out.find("site-profiles/graham.yaml"), std::string::npos) << out;
    // A value from the file names its line; one the profile leaves out says "default".
    EXPECT_NE(out.find("name: graham  # line 4:"), std::string::npos) << out;
    EXPECT_NE(out.find("modules:\n  system: lmod  # line "), std::string::npos) << out;
    EXPECT_NE(out.find("  gpu:\n    queue: "), std::string::npos) << out;
    EXPECT_NE(out.find("    scheduler: slurm  # line "), std::string::npos) << out;
    EXPECT_NE(out.find("    launcher: srun  # line "), std::string::npos) << out;
    // The partition's MPI settings (several ranks), from its mpi: block.
    EXPECT_NE(out.find("    mpi.module: openmpi  # line 25:"), std::string::npos) << out;
    EXPECT_NE(out.find("storage:\n"), std::string::npos) << out;
    EXPECT_NE(out.find("# default"), std::string::npos) << out;
}

// `local` is the machine dljob runs on: its node values are found there, and say how.
TEST(SitesShow, TheLocalSiteShowsThisMachineAndHowItWasFound) {
    MachineFacts facts;
    facts.cores = 2;
    facts.memory = MemorySize::from_mib(23 * 1024);
    facts.gpus = 0;
    facts.cores_found = "2 CPU(s) in dljob's affinity mask";
    facts.memory_found = "MemTotal of /proc/meminfo";
    facts.gpus_found = "no /dev/nvidia[0-9]* device: no NVIDIA driver or GPU";
    const FixedMachine machine(facts);
    auto text = describe_site(SiteCatalog({}, &machine), "local");
    ASSERT_TRUE(text) << text.error().message;
    const std::string& out = *text;
    EXPECT_NE(out.find("    node.cores: 2  # this machine: 2 CPU(s) in dljob's affinity mask "
                       "(auto, line "),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("    node.memory: 23G  # this machine: MemTotal of /proc/meminfo"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("    node.gpus: 0  # this machine: no /dev/nvidia[0-9]* device"),
              std::string::npos)
        << out;
}

TEST(SitesShow, AnUnknownSiteListsTheKnownOnes) {
    auto text = describe_site(SiteCatalog(), "no-such-site");
    ASSERT_FALSE(text);
    EXPECT_EQ(text.error().code, ErrorCode::not_found);
    EXPECT_NE(text.error().hint.find("graham"), std::string::npos) << text.error().hint;
}

} // namespace
} // namespace dljob::app
