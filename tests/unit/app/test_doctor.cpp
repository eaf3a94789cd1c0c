// `dljob doctor`'s judgements on scripted command output: a scheduler that does not answer, and
// a GPU node where dltrain sees no GPU, are errors with their fix; a GPU it sees is ok.

#include "../schedulers/fake_process_runner.hpp"

#include <dljob/app/doctor/doctor.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace dljob::app {
namespace {

class Doctor : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-doctor-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir / "bin");
        // Stand-ins the PATH search finds; the fake runner answers for them.
        for (const char* program : {"sbatch", "squeue", "sacct", "scancel", "dltrain"}) {
            const auto path = dir / "bin" / program;
            std::ofstream(path) << "#!/bin/sh\n";
            std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        }
        options.dltrain = dir / "bin" / "dltrain";
        site.name = "t";
        Partition partition;
        partition.name = "gpu";
        partition.scheduler = "slurm";
        partition.node.gpus = 4;
        site.partitions = {partition};
        site.storage = {StorageTier{"scratch", dir.string(), std::nullopt, false, true, 30, 1000}};
        runner.reply("sbatch", 0, "slurm 23.02.6\n");
        runner.reply(options.dltrain.string(), 0, "dltrain 0.1.0 (git x, Release)\n");
    }
    void TearDown() override { std::filesystem::remove_all(dir); }

    std::vector<DoctorFinding> run() {
        const auto path = (dir / "bin").string();
        return run_doctor(runner, site, options, [path](const std::string& name) {
            return name == "PATH" ? std::optional<std::string>(path) : std::nullopt;
        });
    }
    static const DoctorFinding* find(const std::vector<DoctorFinding>& findings,
                                     const std::string& text) {
        for (const auto& f : findings) {
            if (f.what.find(text) != std::string::npos) {
                return &f;
            }
        }
        return nullptr;
    }

    std::filesystem::path dir;
    testing::FakeProcessRunner runner;
    SiteProfile site;
    DoctorOptions options;
};

TEST_F(Doctor, AHealthySiteIsAllOkWithTheSchedulersVersionAndTheTiersPolicy) {
    runner.reply("squeue", 0, "");
    const auto findings = run();
    EXPECT_FALSE(any_error(findings));
    const auto* scheduler = find(findings, "squeue answers (slurm 23.02.6)");
    ASSERT_NE(scheduler, nullptr);
    EXPECT_EQ(scheduler->level, DoctorLevel::ok);
    const auto* scratch = find(findings, "storage.scratch: " + dir.string() + " writable");
    ASSERT_NE(scratch, nullptr);
    EXPECT_NE(scratch->what.find("files unused for 30 days are purged"), std::string::npos);
}

// A cuDNN 5 stack (Helios): GPU training with dltrain cannot run there, whatever else is fine.
TEST_F(Doctor, ACudnnOlderThanDltrainTakesIsAWarningWithWhatWorks) {
    runner.reply("squeue", 0, "");
    EXPECT_EQ(find(run(), "cuDNN"), nullptr);
    site.modules.cudnn_major = 5;
    const auto findings = run();
    const auto* old = find(findings, "give cuDNN 5");
    ASSERT_NE(old, nullptr);
    EXPECT_EQ(old->level, DoctorLevel::warning);
    EXPECT_NE(old->what.find("needs cuDNN 8 or later"), std::string::npos) << old->what;
    EXPECT_NE(old->what.find("resources.gpus: 0"), std::string::npos) << old->what;
}

TEST_F(Doctor, ASchedulerThatDoesNotAnswerIsAnErrorWithItsFix) {
    runner.reply("squeue", 1, "", "slurm_load_jobs error: Unable to contact slurm controller\n");
    const auto findings = run();
    EXPECT_TRUE(any_error(findings));
    const auto* scheduler = find(findings, "does not answer");
    ASSERT_NE(scheduler, nullptr);
    EXPECT_EQ(scheduler->level, DoctorLevel::error);
    EXPECT_NE(scheduler->what.find("Unable to contact slurm controller"), std::string::npos);
    EXPECT_FALSE(scheduler->fix.empty());
}

// A Spark partition: spark-submit where the profile says, and the YARN queue itself, which
// answers even when it is stopped.
TEST_F(Doctor, ASparkPartitionChecksItsSparkSubmitAndItsYarnQueue) {
    const auto submit = dir / "spark" / "bin" / "spark-submit";
    std::filesystem::create_directories(submit.parent_path());
    for (const auto& path : {submit, dir / "bin" / "yarn"}) {
        std::ofstream(path) << "#!/bin/sh\n";
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    }
    Partition& partition = site.partitions.front();
    partition.scheduler = "spark";
    partition.queue = "dl";
    partition.node.gpus = 0;
    partition.scheduler_options = {
        {"master", {"yarn"}}, {"version", {"1.5.2"}}, {"spark_submit", {submit.string()}}};
    const std::string queue = "Queue Information : \nQueue Name : dl\n\tState : RUNNING\n";
    runner.reply(submit.string(), 0, "", "Welcome to Spark version 1.5.2\n");
    runner.reply("yarn", 0, queue);
    auto findings = run();
    EXPECT_FALSE(any_error(findings));
    ASSERT_NE(find(findings, "spark: yarn answers (Welcome to Spark version 1.5.2)"), nullptr);
    EXPECT_NE(std::find(runner.calls.begin(), runner.calls.end(),
                        std::vector<std::string>{"yarn", "queue", "-status", "dl"}),
              runner.calls.end());

    runner.reply(submit.string(), 0, "", "Welcome to Spark version 1.5.2\n");
    runner.reply("yarn", 0, "Queue Information : \nQueue Name : dl\n\tState : STOPPED\n");
    findings = run();
    const auto* stopped = find(findings, "YARN's queue dl is stopped");
    ASSERT_NE(stopped, nullptr);
    EXPECT_EQ(stopped->level, DoctorLevel::error);

    std::filesystem::remove(submit);
    findings = run();
    const auto* missing = find(findings, submit.string() + " is not an executable file");
    ASSERT_NE(missing, nullptr);
    EXPECT_NE(missing->fix.find("partition gpu of site t names it"), std::string::npos);
}

TEST_F(Doctor, OnAGpuNodeDltrainMustSeeTheGpus) {
    options.gpu_node = true;
    runner.reply("squeue", 0, "");
    runner.reply(options.dltrain.string(), 0, "CPU: x\nGPUs: none (no CUDA driver)\n");
    auto findings = run();
    EXPECT_TRUE(any_error(findings));
    const auto* blind =
        find(findings, "this host has a GPU but dltrain sees none (no CUDA driver)");
    ASSERT_NE(blind, nullptr);
    EXPECT_EQ(blind->level, DoctorLevel::error);
    EXPECT_NE(blind->fix.find("libdltrain-cuda.so"), std::string::npos);

    runner.reply("sbatch", 0, "slurm 23.02.6\n");
    runner.reply("squeue", 0, "");
    runner.reply(options.dltrain.string(), 0, "dltrain 0.1.0\n");
    runner.reply(options.dltrain.string(), 0,
                 "GPU 0 (--device cuda:0)\n  Name: H100\nGPU 1 (--device cuda:1)\n");
    findings = run();
    EXPECT_FALSE(any_error(findings));
    EXPECT_NE(find(findings, "the CUDA plugin loads and sees 2 GPU(s)"), nullptr);
}

} // namespace
} // namespace dljob::app
