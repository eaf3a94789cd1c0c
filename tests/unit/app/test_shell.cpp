// `dljob shell`'s session lifecycle with a real SQLite store and the real Slurm adapter, over a
// scripted Slurm (squeue/scancel replies from a small state machine) and a scripted terminal:
// the row, the allocation found by token and released whatever way the session ends.
#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/app/jobs/shell.hpp>
#include <dljob/util/files.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <sstream>

namespace dljob {
namespace {

// Slurm as squeue and scancel show it: one allocation (id 55) once granted.
class ScriptedSlurm final : public ProcessRunner {
public:
    std::string token;
    std::string state; // empty: no allocation
    std::vector<std::vector<std::string>> calls;

    Result<ProcessResult> run(const ProcessRequest& request) override {
        calls.push_back(request.argv);
        const std::string& program = request.argv.at(0);
        if (program == "squeue") {
            std::string out;
            if (!state.empty()) {
                out = "55|" + state + "|None|dljob:" + token + "\n";
            }
            return ProcessResult{0, out, "", false};
        }
        if (program == "scancel") {
            state = "CANCELLED";
            return ProcessResult{0, "", "", false};
        }
        return ProcessResult{1, "", program + ": not scripted", false};
    }
    Result<int> spawn_detached(const DetachedRequest& /*request*/) override {
        return fail(ErrorCode::internal, "not used");
    }
    bool group_alive(int /*pgid*/) override { return false; }
    bool signal_group(int /*pgid*/, int /*signal*/) override { return false; }

    [[nodiscard]] bool cancelled() const {
        return std::any_of(calls.begin(), calls.end(),
                           [](const auto& argv) { return argv.at(0) == "scancel"; });
    }
};

// A terminal whose "user" follows a script: each wait_for call runs the next step.
class ScriptedTerminal final : public app::SessionTerminal {
public:
    std::vector<std::string> argv;
    std::vector<std::function<std::optional<int>()>> steps;
    int hangup = 0;
    std::vector<int> signals;

    Result<int> start(const std::vector<std::string>& command) override {
        argv = command;
        return 777;
    }
    std::optional<int> wait_for(int /*pid*/, std::chrono::milliseconds /*slice*/) override {
        if (m_next < steps.size()) {
            return steps[m_next++]();
        }
        return 0;
    }
    int hangup_signal() override { return hangup; }
    void signal_child(int /*pid*/, int signal) override { signals.push_back(signal); }

    /// <run_dir> from `--rcfile <run_dir>/session.rc`.
    [[nodiscard]] std::filesystem::path run_dir() const {
        for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
            if (argv[i] == "--rcfile") {
                return std::filesystem::path(argv[i + 1]).parent_path();
            }
        }
        return {};
    }
    /// What the session's rc writes when the shell starts on the node.
    void shell_starts() const {
        (void)util::write_file_atomic(run_dir() / "job_identity", "token=x\njob_id=55\n");
    }

private:
    std::size_t m_next = 0;
};

class ShellSession : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = std::filesystem::temp_directory_path() /
                ("dljob-test-shell-" + std::to_string(::getpid()));
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        ::setenv("DLJOB_RUNS_DIR", (m_dir / "runs").c_str(), 1); // NOLINT(concurrency-mt-unsafe)
        ASSERT_EQ(util::write_file_atomic(m_dir / "unit-slurm.yaml", R"(name: unit-slurm
modules:
  system: none
default_partition: gpu
partitions:
  gpu:
    queue: gpu
    scheduler: slurm
    launcher: srun
    node: {cores: 8, memory: 16G, gpus: 4}
    max_nodes: 1
    walltime: {default: "01:00:00", max: "02:00:00"}
)"),
                  "");
        auto store = adapters::SqliteJobStore::open(m_dir / "jobs.db");
        ASSERT_TRUE(store);
        auto runner = std::make_unique<ScriptedSlurm>();
        slurm = runner.get();
        context = std::make_unique<app::JobContext>(std::move(store.value()), std::move(runner));
        options.site = "unit-slurm";
        options.site_files = {m_dir / "unit-slurm.yaml"};
        options.gpus = 2;
    }
    void TearDown() override {
        ::unsetenv("DLJOB_RUNS_DIR"); // NOLINT(concurrency-mt-unsafe)
        std::filesystem::remove_all(m_dir);
    }

    /// Learns the token from the salloc command once it is started.
    std::function<std::optional<int>()> grant(const std::string& state) {
        return [this, state]() -> std::optional<int> {
            for (const auto& arg : terminal.argv) {
                if (arg.rfind("--comment=dljob:", 0) == 0) {
                    slurm->token = arg.substr(16);
                }
            }
            slurm->state = state;
            return std::nullopt;
        };
    }

    Job only_job() {
        auto jobs = context->store().list({});
        EXPECT_TRUE(jobs);
        EXPECT_EQ(jobs->size(), 1U);
        return jobs->empty() ? Job{} : jobs->front();
    }

    std::filesystem::path m_dir;
    ScriptedSlurm* slurm = nullptr;
    std::unique_ptr<app::JobContext> context;
    ScriptedTerminal terminal;
    app::ShellOptions options;
    std::ostringstream err;
};

TEST_F(ShellSession, ExitEndsTheRowAndReleasesAnAllocationStillListed) {
    terminal.steps = {grant("RUNNING"),
                      [this]() -> std::optional<int> {
                          terminal.shell_starts();
                          return std::nullopt;
                      },
                      [] { return std::optional<int>(0); }};
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_TRUE(outcome) << outcome.error().message;
    EXPECT_EQ(terminal.argv.front(), "salloc");
    EXPECT_EQ(outcome->exit, 0);
    EXPECT_TRUE(slurm->cancelled()) << "salloc left the allocation RUNNING: dljob cancels it";
    const Job job = only_job();
    EXPECT_EQ(job.name, "interactive");
    EXPECT_EQ(job.state, JobState::completed);
    EXPECT_EQ(job.scheduler_id, "55");
    EXPECT_EQ(job.phase, SubmitPhase::submitted);
    for (const char* file : {"session.rc", "session.sh", "job.sh"}) {
        EXPECT_TRUE(std::filesystem::exists(terminal.run_dir() / file)) << file;
    }
}

TEST_F(ShellSession, ANormalEndNeedsNoCancel) {
    terminal.steps = {grant("RUNNING"), [this]() -> std::optional<int> {
                          terminal.shell_starts();
                          slurm->state = "COMPLETED"; // salloc relinquished the allocation
                          return 4;
                      }};
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_TRUE(outcome) << outcome.error().message;
    EXPECT_EQ(outcome->exit, 4) << "dljob shell exits with the shell's status";
    EXPECT_FALSE(slurm->cancelled());
    EXPECT_EQ(only_job().state, JobState::completed);
}

TEST_F(ShellSession, ARefusedAllocationFailsTheRowAndLeavesNothing) {
    terminal.steps = {[] { return std::optional<int>(1); }}; // salloc: error: ... exit 1
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::scheduler_rejected);
    EXPECT_NE(outcome.error().message.find("before the shell started"), std::string::npos);
    EXPECT_FALSE(slurm->cancelled());
    const Job job = only_job();
    EXPECT_EQ(job.state, JobState::failed);
    EXPECT_EQ(job.phase, SubmitPhase::submitted) << "not left for reconciliation forever";
}

TEST_F(ShellSession, AnAllocationLeftPendingIsFoundByTokenAndCancelled) {
    // Interrupted while queued: salloc ended, but the scheduler still lists the request.
    terminal.steps = {grant("PENDING"), [] { return std::optional<int>(1); }};
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_FALSE(outcome);
    EXPECT_TRUE(slurm->cancelled());
    const Job job = only_job();
    EXPECT_EQ(job.state, JobState::failed);
    EXPECT_EQ(job.scheduler_id, "55");
}

TEST_F(ShellSession, ACtrlCWhileQueuedIsRecordedCancelled) {
    // salloc revoked its own pending request on SIGINT: the scheduler lists it CANCELLED.
    terminal.steps = {grant("PENDING"), [this]() -> std::optional<int> {
                          slurm->state = "CANCELLED";
                          return 1;
                      }};
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::interrupted);
    EXPECT_FALSE(slurm->cancelled());
    EXPECT_EQ(only_job().state, JobState::cancelled);
}

TEST_F(ShellSession, AHangupEndsTheSessionReleasesAndRecordsCancelled) {
    terminal.steps = {grant("RUNNING"),
                      [this]() -> std::optional<int> {
                          terminal.shell_starts();
                          terminal.hangup = SIGHUP;
                          return std::nullopt;
                      },
                      [] { return std::optional<int>(129); }};
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::interrupted);
    EXPECT_EQ(terminal.signals, std::vector<int>{SIGHUP});
    EXPECT_TRUE(slurm->cancelled());
    EXPECT_EQ(only_job().state, JobState::cancelled);
}

TEST_F(ShellSession, OverTheLimitsIsRefusedBeforeAnything) {
    options.gpus = 8;
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::config_invalid);
    EXPECT_TRUE(terminal.argv.empty());
    EXPECT_TRUE(slurm->calls.empty());
    EXPECT_TRUE(context->store().list({})->empty());
    EXPECT_FALSE(std::filesystem::exists(m_dir / "runs"));
}

TEST_F(ShellSession, DryRunPlansAndChangesNothing) {
    options.dry_run = true;
    options.cores = 4;
    options.memory = "4G";
    options.time = "30:00";
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_TRUE(outcome) << outcome.error().message;
    const auto& argv = outcome->argv;
    ASSERT_FALSE(argv.empty());
    EXPECT_EQ(argv.front(), "salloc");
    for (const char* option : {"--gpus-per-node=2", "--cpus-per-task=4", "--mem=4G",
                               "--time=00:30:00", "--partition=gpu"}) {
        EXPECT_NE(std::find(argv.begin(), argv.end(), option), argv.end()) << option;
    }
    EXPECT_TRUE(terminal.argv.empty());
    EXPECT_TRUE(slurm->calls.empty());
    EXPECT_TRUE(context->store().list({})->empty());
    EXPECT_FALSE(std::filesystem::exists(m_dir / "runs"));
}

// Big Red II's shape: one GPU per node. --gpus 4 is four nodes (as `qsub -l nodes=4` asks),
// not a refusal that says to ask for nodes: 4; --nodes is there as on recipes.
TEST_F(ShellSession, GpusSpreadOverNodesOfOneGpuEach) {
    ASSERT_EQ(util::write_file_atomic(m_dir / "one-gpu.yaml", R"(name: one-gpu
modules:
  system: none
default_partition: gpu
partitions:
  gpu:
    queue: gpu
    scheduler: slurm
    launcher: srun
    node: {cores: 16, memory: 32G, gpus: 1}
    max_nodes: 8
    walltime: {default: "01:00:00", max: "02:00:00"}
)"),
              "");
    options.site = "one-gpu";
    options.site_files = {m_dir / "one-gpu.yaml"};
    options.dry_run = true;
    options.gpus = 4;
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_TRUE(outcome) << outcome.error().message;
    const auto has = [&](const std::string& option) {
        return std::find(outcome->argv.begin(), outcome->argv.end(), option) != outcome->argv.end();
    };
    EXPECT_TRUE(has("--nodes=4")) << outcome->command_line;
    EXPECT_TRUE(has("--gpus-per-node=1")) << outcome->command_line;
    EXPECT_NE(std::find(outcome->notes.begin(), outcome->notes.end(),
                        "4 GPUs on nodes of 1 GPU(s) each: 4 nodes"),
              outcome->notes.end());

    options.gpus = 2;
    options.nodes = 2;
    outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_TRUE(outcome) << outcome.error().message;
    EXPECT_TRUE(has("--nodes=2")) << outcome->command_line;

    options.nodes = 0;
    outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::usage);
    EXPECT_TRUE(terminal.argv.empty());
    EXPECT_TRUE(slurm->calls.empty());
    EXPECT_FALSE(std::filesystem::exists(m_dir / "runs"));
}

// Where the GPUs do not divide over whole nodes, the refusal says what to ask for: here the
// one whole node the partition gives a job (max_nodes 1).
TEST_F(ShellSession, AnUnevenGpuCountIsRefusedWithItsHint) {
    options.gpus = 6; // nodes of 4 GPUs
    options.dry_run = true;
    auto outcome = app::open_shell(*context, options, terminal, err);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::config_invalid);
    EXPECT_NE(outcome.error().hint.find("ask for gpus: 4"), std::string::npos)
        << outcome.error().hint;
    EXPECT_NE(outcome.error().hint.find("at most 1 node"), std::string::npos)
        << outcome.error().hint;
}

} // namespace
} // namespace dljob
