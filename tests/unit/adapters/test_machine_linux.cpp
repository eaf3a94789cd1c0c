// The machine the `local` site offers its jobs (adapters/machine_linux): read from a tree that
// stands for /proc, /sys and /dev, so each rule is checked whatever machine runs the tests.

#include <dljob/adapters/machine_linux.hpp>
#include <dljob/util/cpus.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace dljob::adapters {
namespace {

namespace fs = std::filesystem;

class LinuxMachineTest : public ::testing::Test {
protected:
    LinuxMachineTest()
        : m_root(fs::temp_directory_path() /
                 ("dljob-machine-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
        fs::remove_all(m_root);
        fs::create_directories(m_root / "dev");
        write("proc/meminfo", "MemTotal:       24683620 kB\nMemFree:         1000000 kB\n");
    }
    ~LinuxMachineTest() override { fs::remove_all(m_root); }
    LinuxMachineTest(const LinuxMachineTest&) = delete;
    LinuxMachineTest& operator=(const LinuxMachineTest&) = delete;
    LinuxMachineTest(LinuxMachineTest&&) = delete;
    LinuxMachineTest& operator=(LinuxMachineTest&&) = delete;

    void write(const std::string& relative, const std::string& text) const {
        const fs::path path = m_root / relative;
        fs::create_directories(path.parent_path());
        std::ofstream(path) << text;
    }
    [[nodiscard]] MachineFacts describe(std::map<std::string, std::string> env = {}) const {
        const LinuxMachine machine(m_root, [env](const std::string& name) {
            const auto it = env.find(name);
            return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
        });
        return machine.describe();
    }

    fs::path m_root;
};

TEST_F(LinuxMachineTest, AMachineWithoutTheNvidiaDriverHasNoGpuWhateverTheEnvironmentSays) {
    // A scheduler's CUDA_VISIBLE_DEVICES=0 on a node without the driver names a GPU nobody can
    // use: a gpus: 1 recipe accepted there trained on the CPU.
    for (const auto& env : {std::map<std::string, std::string>{},
                            std::map<std::string, std::string>{{"CUDA_VISIBLE_DEVICES", "0"}}}) {
        const auto facts = describe(env);
        EXPECT_EQ(facts.gpus, 0);
        EXPECT_NE(facts.gpus_found.find("no /dev/nvidia[0-9]* device"), std::string::npos)
            << facts.gpus_found;
    }
}

TEST_F(LinuxMachineTest, GpusAreTheDeviceFilesCudaVisibleDevicesLeaves) {
    for (const char* name : {"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm",
                             "nvidia-uvm-tools", "nvidia-modeset"}) {
        write(std::string("dev/") + name, "");
    }
    fs::create_directories(m_root / "dev/nvidia-caps");
    EXPECT_EQ(count_gpu_device_files(m_root / "dev"), 4);
    EXPECT_EQ(describe().gpus, 4);
    EXPECT_EQ(describe({{"CUDA_VISIBLE_DEVICES", "2"}}).gpus, 1);
    EXPECT_EQ(describe({{"CUDA_VISIBLE_DEVICES", "0,1"}}).gpus, 2);
    const auto facts = describe({{"CUDA_VISIBLE_DEVICES", "1,3"}});
    EXPECT_NE(facts.gpus_found.find("CUDA_VISIBLE_DEVICES='1,3'"), std::string::npos)
        << facts.gpus_found;
}

// CUDA reads the list up to its first entry that names no GPU; the empty list, -1 and Torque's
// NoDevFiles hide them all.
TEST(VisibleGpus, FollowCudasRulesForCudaVisibleDevices) {
    EXPECT_EQ(visible_gpus(4, std::nullopt).count, 4);
    EXPECT_EQ(visible_gpus(4, std::string("")).count, 0);
    EXPECT_EQ(visible_gpus(4, std::string("-1")).count, 0);
    EXPECT_EQ(visible_gpus(4, std::string("NoDevFiles")).count, 0);
    EXPECT_EQ(visible_gpus(4, std::string("0,2")).count, 2);
    EXPECT_EQ(visible_gpus(4, std::string(" 1 , 3 ")).count, 2);
    EXPECT_EQ(visible_gpus(4, std::string("1,7,2")).count, 1) << "7 is past the GPUs: stops";
    EXPECT_EQ(visible_gpus(4, std::string("0,-1,1")).count, 1);
    EXPECT_EQ(visible_gpus(2, std::string("GPU-8f3c-aa,GPU-1234")).count, 2);
    EXPECT_EQ(visible_gpus(1, std::string("MIG-4a9e-77")).count, 1);
    EXPECT_EQ(visible_gpus(1, std::string("0,1,2,3")).count, 1) << "never more than the devices";
    EXPECT_EQ(visible_gpus(0, std::string("0")).count, 0);
}

TEST_F(LinuxMachineTest, MemoryIsMemTotalOrTheCgroupsLimitWhereLower) {
    EXPECT_EQ(describe().memory.mib(), 24683620 / 1024);
    EXPECT_EQ(describe().memory_found, "MemTotal of /proc/meminfo");
    // cgroup v2: the process's own cgroup and every one above it may limit it; the lowest wins.
    write("proc/self/cgroup", "0::/user.slice/job.scope\n");
    write("sys/fs/cgroup/user.slice/job.scope/memory.max", "max\n");
    write("sys/fs/cgroup/user.slice/memory.max", std::to_string(4LL << 30) + "\n");
    const auto facts = describe();
    EXPECT_EQ(facts.memory.mib(), 4096);
    EXPECT_NE(facts.memory_found.find("memory.max of cgroup /user.slice"), std::string::npos)
        << facts.memory_found;
    // A limit above the machine's memory says nothing.
    write("sys/fs/cgroup/user.slice/memory.max", std::to_string(1LL << 50) + "\n");
    EXPECT_EQ(describe().memory.mib(), 24683620 / 1024);
}

TEST_F(LinuxMachineTest, CoresAreTheAffinityMaskOrTheCgroupsCpuQuotaWhereLower) {
    const auto usable = static_cast<int>(util::usable_cpus());
    EXPECT_EQ(describe().cores, usable);
    EXPECT_NE(describe().cores_found.find("affinity mask"), std::string::npos);
    write("proc/self/cgroup", "0::/docker/abc\n");
    write("sys/fs/cgroup/docker/abc/cpu.max", "max 100000\n");
    EXPECT_EQ(describe().cores, usable);
    if (usable > 1) {
        // 0.5 CPU of quota still runs one thread.
        write("sys/fs/cgroup/docker/abc/cpu.max", "50000 100000\n");
        EXPECT_EQ(describe().cores, 1);
        EXPECT_NE(describe().cores_found.find("cpu.max of cgroup /docker/abc"), std::string::npos)
            << describe().cores_found;
    }
}

TEST(ProcFiles, MemTotalAndTheCgroupV2PathAreRead) {
    EXPECT_EQ(meminfo_total_kib("MemTotal:  1024 kB\n"), 1024);
    EXPECT_EQ(meminfo_total_kib("MemFree: 1 kB\n"), std::nullopt);
    EXPECT_EQ(meminfo_total_kib("MemTotal: lots\n"), std::nullopt);
    // cgroup v1 lines (N:controllers:/path) are not the unified hierarchy's.
    EXPECT_EQ(cgroup_v2_path("4:memory:/a\n0::/user.slice/x.scope\n"), "/user.slice/x.scope");
    EXPECT_EQ(cgroup_v2_path("4:memory:/a\n"), std::nullopt);
}

// The real machine: cheap enough to describe for every command that needs the local site.
TEST(ThisMachine, IsDescribedWithoutRunningAnything) {
    const auto facts = LinuxMachine().describe();
    EXPECT_GE(facts.cores, 1);
    EXPECT_GT(facts.memory.mib(), 0);
    EXPECT_GE(facts.gpus, 0);
    EXPECT_FALSE(facts.gpus_found.empty());
}

} // namespace
} // namespace dljob::adapters
