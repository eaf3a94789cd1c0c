// The same contract for every scheduler family: what a rendered script does when it runs
// (docs/run-directory.md). Each family is represented by a built-in site; the script runs with
// stand-in launcher and module commands (script_sandbox.hpp).

#include "script_sandbox.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

namespace dljob::test {
namespace {

class ScriptContract : public ::testing::TestWithParam<std::string> {
protected:
    RenderRequest request(const std::string& recipe = "mnist") {
        RenderRequest req = golden_request(GetParam(), recipe);
        m_sandbox.adopt(req);
        return req;
    }
    RenderedJob render(const RenderRequest& req) {
        auto templates = builtin_templates();
        auto rendered = render::render_job(req, templates);
        EXPECT_TRUE(rendered) << (rendered ? "" : rendered.error().message);
        return rendered ? *rendered : RenderedJob{};
    }
    std::string run_file(const RenderRequest& req, const char* name) {
        return trimmed(read_text(req.run_dir / name));
    }
    ScriptSandbox m_sandbox;
};

TEST_P(ScriptContract, WritesTrainingExitStatusAsExitCode) {
    for (const int status : {0, 3, 75}) {
        auto req = request();
        const auto job = render(req);
        const auto result = m_sandbox.run(req, job, fmt::format("FAKE_TRAIN_RC={}", status));
        EXPECT_EQ(result.exit_code, status) << result.output;
        EXPECT_EQ(run_file(req, "exit_code"), std::to_string(status)) << result.output;
        if (status == 3) {
            EXPECT_NE(run_file(req, "failed_command").find("train"), std::string::npos);
        } else {
            EXPECT_FALSE(std::filesystem::exists(req.run_dir / "failed_command")) << status;
        }
    }
    EXPECT_FALSE(std::filesystem::exists(m_sandbox.root / "scheduler-called"));
}

TEST_P(ScriptContract, RecordsJobIdentityInRunDirectory) {
    auto req = request();
    const auto result = m_sandbox.run(req, render(req));
    const std::string identity = read_text(req.run_dir / "job_identity");
    EXPECT_NE(identity.find("token=golden-token\n"), std::string::npos) << identity;
    EXPECT_NE(identity.find(fmt::format("scheduler={}\n", req.site.find_partition("")->scheduler)),
              std::string::npos)
        << identity;
    EXPECT_NE(identity.find("started="), std::string::npos);
}

TEST_P(ScriptContract, RunsDltrainWithConfigRunDirDataDirAndResume) {
    for (const bool keep : {false, true}) {
        auto req = request();
        req.recipe.data.keep_staged = keep;
        const auto result = m_sandbox.run(req, render(req));
        ASSERT_EQ(result.exit_code, 0) << result.output;
        const auto argv = read_nul_separated(req.run_dir / "train.argv");
        ASSERT_GE(argv.size(), 11U);
        EXPECT_EQ(argv[0], "train");
        EXPECT_EQ(argv[1], "--config");
        EXPECT_EQ(argv[2], "/opt/dljob/recipes/networks/lenet.yaml");
        EXPECT_EQ(argv[3], "--run-dir");
        EXPECT_EQ(argv[4], req.run_dir.string());
        EXPECT_EQ(argv[5], "--data-dir");
        // Staged where the site has node-local storage, else read in place; the data is there
        // while training runs.
        EXPECT_NE(read_text(req.run_dir / "train.data").find("train-images-idx3-ubyte"),
                  std::string::npos)
            << argv[6];
        EXPECT_EQ(argv[7], "--device"); // mnist asks for a GPU
        EXPECT_EQ(argv[8], "cuda");
        EXPECT_EQ(argv[9], "--resume");
        EXPECT_EQ(argv[10], "auto");
        // A tree (not a pack) copied to the job's own dljob-<token> directory goes at the end
        // like a staged pack, unless kept: it stayed, and on a RAM disk it was node memory.
        const std::filesystem::path data_dir = argv[6];
        if (data_dir.filename().string().rfind("dljob-", 0) == 0) {
            EXPECT_EQ(std::filesystem::exists(data_dir), keep) << data_dir;
            std::error_code ec;
            std::filesystem::remove_all(data_dir, ec);
        } else {
            EXPECT_TRUE(std::filesystem::exists(data_dir / "train-images-idx3-ubyte")) << data_dir;
        }
    }
}

// A tar archive as data.source (the Helios seed's way: tar the small files once, untar them on
// the node) is extracted into the job's own directory on the node, which the program gets as its
// data directory and which goes at the end; where the site has no such storage, render refuses
// it (a program would get one file where it expects a tree).
TEST_P(ScriptContract, ATarSourceIsExtractedOnTheNodeOrRefused) {
    const auto data = m_sandbox.home / "data";
    const auto made =
        run_shell("tar -czf " + ScriptSandbox::quote((data / "mnist.tar.gz").string()) + " -C " +
                  ScriptSandbox::quote((data / "mnist").string()) + " .");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    auto req = request();
    req.recipe.data.source = "$HOME/data/mnist.tar.gz";
    req.recipe.data.stage_to = "node-local";
    auto templates = builtin_templates();
    auto job = render::render_job(req, templates);
    if (req.site.find_storage("node-local") == nullptr) {
        ASSERT_FALSE(job);
        EXPECT_EQ(job.error().code, ErrorCode::config_invalid);
        EXPECT_NE(job.error().message.find("data.source"), std::string::npos)
            << job.error().message;
        EXPECT_NE(job.error().message.find("tar archive"), std::string::npos)
            << job.error().message;
        return;
    }
    ASSERT_TRUE(job) << job.error().message;
    const auto result = m_sandbox.run(req, *job);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto argv = read_nul_separated(req.run_dir / "train.argv");
    ASSERT_GE(argv.size(), 7U);
    EXPECT_EQ(argv[5], "--data-dir");
    EXPECT_EQ(std::filesystem::path(argv[6]).filename(), "dljob-golden-token");
    // The tree as the program saw it (not the archive, not a folder inside it), gone afterwards.
    EXPECT_EQ(trimmed(read_text(req.run_dir / "train.data")), "train-images-idx3-ubyte");
    EXPECT_FALSE(std::filesystem::exists(argv[6])) << argv[6];
    // A damaged archive fails the staging step, naming it, and leaves nothing on the node.
    std::ofstream(data / "mnist.tar.gz", std::ios::trunc) << "not a tar";
    std::filesystem::remove(req.run_dir / "train.argv");
    const auto damaged = m_sandbox.run(req, *job);
    EXPECT_NE(damaged.exit_code, 0) << damaged.output;
    EXPECT_EQ(run_file(req, "failed_command"), "stage data") << damaged.output;
    EXPECT_FALSE(std::filesystem::exists(req.run_dir / "train.argv")) << "the training ran";
    EXPECT_FALSE(std::filesystem::exists(argv[6])) << argv[6];
}

// A job that asks for GPUs trains on one or does not start: left to its default, dltrain falls
// back to the CPU where the GPU cannot be used (no driver, cuDNN not loaded) and trains for
// hours on a GPU allocation at CPU speed; with --device cuda it refuses, naming what is missing.
// A job that asks for none stays off a GPU it was not given.
TEST_P(ScriptContract, TheDeviceDltrainUsesIsTheOneTheJobAskedFor) {
    for (const int gpus : {1, 0}) {
        auto req = request();
        req.recipe.resources.gpus = gpus;
        const auto job = render(req);
        const std::string device = gpus > 0 ? "cuda" : "cpu";
        EXPECT_NE(job.script.find(" --device " + device + " "), std::string::npos) << job.script;
        EXPECT_EQ(job.script.find(gpus > 0 ? "--device cpu" : "--device cuda"), std::string::npos)
            << job.script;
        const auto result = m_sandbox.run(req, job);
        ASSERT_EQ(result.exit_code, 0) << result.output;
        const auto argv = read_nul_separated(req.run_dir / "train.argv");
        const auto at = std::find(argv.begin(), argv.end(), "--device");
        ASSERT_NE(at, argv.end()) << gpus << " GPU(s)";
        ASSERT_NE(at + 1, argv.end());
        EXPECT_EQ(*(at + 1), device) << gpus << " GPU(s)";
        EXPECT_EQ(std::count(argv.begin(), argv.end(), "--device"), 1);
    }
}

TEST_P(ScriptContract, FineTuneWeightsReachDltrainExpandedByTheJob) {
    auto req = request();
    req.recipe.train.weights = "$DLJOB_RUN_DIR/pre trained's.ckpt";
    const auto result = m_sandbox.run(req, render(req));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto argv = read_nul_separated(req.run_dir / "train.argv");
    const auto at = std::find(argv.begin(), argv.end(), "--weights");
    ASSERT_NE(at, argv.end());
    ASSERT_NE(at + 1, argv.end());
    EXPECT_EQ(*(at + 1), req.run_dir.string() + "/pre trained's.ckpt");
}

TEST_P(ScriptContract, RecipeSolverValuesReachDltrainAsSolverOverrides) {
    auto req = request();
    req.recipe.train.solver = {{"base_lr", "0.01"}, {"stepvalue", "[100,200]"}};
    const auto result = m_sandbox.run(req, render(req));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto argv = read_nul_separated(req.run_dir / "train.argv");
    std::vector<std::string> solver;
    for (auto at = argv.begin(); at != argv.end(); ++at) {
        if (*at == "--solver" && at + 1 != argv.end()) {
            solver.push_back(*(at + 1));
        }
    }
    EXPECT_EQ(solver, (std::vector<std::string>{"base_lr=0.01", "stepvalue=[100,200]"}));
}

// train.weights: "@ID" with --after ID: the newest completed checkpoint of that run when the
// job starts (only one with its .done marker counts).
TEST_P(ScriptContract, WeightsOfTheJobWaitedForAreItsNewestCompletedCheckpoint) {
    auto req = request();
    const auto other = m_sandbox.root / "first run";
    std::filesystem::create_directories(other / "checkpoints");
    for (const char* name : {"iter_00000100.ckpt", "iter_00000100.done", "iter_00000900.ckpt",
                             "iter_00000900.done", "iter_00001000.ckpt"}) {
        std::ofstream(other / "checkpoints" / name) << "x";
    }
    req.recipe.train.weights_from_run = other;
    const auto result = m_sandbox.run(req, render(req));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto argv = read_nul_separated(req.run_dir / "train.argv");
    const auto at = std::find(argv.begin(), argv.end(), "--weights");
    ASSERT_NE(at, argv.end());
    ASSERT_NE(at + 1, argv.end());
    EXPECT_EQ(*(at + 1), (other / "checkpoints" / "iter_00000900.ckpt").string());
}

TEST_P(ScriptContract, MissingModuleFailsLoudlyBeforeTraining) {
    auto req = request();
    if (req.site.modules.flavor == ModuleFlavor::none) {
        // No module system: the renderer refuses extra modules instead of ignoring them.
        req.recipe.modules = {"missing-module"};
        auto templates = builtin_templates();
        auto rendered = render::render_job(req, templates);
        ASSERT_FALSE(rendered);
        EXPECT_EQ(rendered.error().code, ErrorCode::config_invalid);
        EXPECT_NE(rendered.error().message.find("missing-module"), std::string::npos);
        return;
    }
    req.recipe.modules = {"missing-module/1.0"};
    const auto result = m_sandbox.run(req, render(req));
    EXPECT_NE(result.exit_code, 0);
    EXPECT_NE(run_file(req, "exit_code"), "0");
    EXPECT_EQ(run_file(req, "failed_command"), "module load missing-module/1.0");
    EXPECT_NE(result.output.find("missing-module/1.0 is not loaded"), std::string::npos)
        << result.output;
    EXPECT_FALSE(std::filesystem::exists(req.run_dir / "train.argv"));
}

TEST_P(ScriptContract, WarningSignalReachesTrainingThroughTheTrap) {
    auto req = request();
    const auto job = render(req);
    std::filesystem::create_directories(req.run_dir);
    const auto started = req.run_dir / "train.started";
    // Start the job, wait until the trainer runs, send USR2 to the batch shell (what Slurm's
    // --signal=B: or dljob's timer does), and collect the exit status.
    const auto script = req.run_dir / job.script_name;
    write_text(script, job.script, true);
    const std::string command = fmt::format(
        "cd {0} && env -i SANDBOX={0} HOME={1} USER=tester PATH={2}:/usr/bin:/bin "
        "SLURM_TMPDIR={0}/local LSCRATCH={0}/local RAMDISK={0}/local TMPDIR={0}/local "
        "FAKE_TRAIN_WAIT=1 /bin/bash {3} & pid=$!; "
        "for _ in $(seq 1 400); do [ -e {4} ] && break; sleep 0.05; done; "
        "kill -USR2 $pid; wait $pid",
        ScriptSandbox::quote(m_sandbox.root.string()),
        ScriptSandbox::quote(m_sandbox.home.string()), ScriptSandbox::quote(m_sandbox.bin.string()),
        ScriptSandbox::quote(script.string()), ScriptSandbox::quote(started.string()));
    const auto result = run_shell(command);
    EXPECT_EQ(result.exit_code, 75) << result.output;
    EXPECT_EQ(run_file(req, "train.signal"), "USR2");
    EXPECT_EQ(run_file(req, "exit_code"), "75");
    EXPECT_FALSE(std::filesystem::exists(req.run_dir / "failed_command"));
}

TEST_P(ScriptContract, CommandRecipeGetsItsArgvAndEnvironmentVerbatim) {
    auto req = request("pytorch-mnist");
    req.recipe.command.argv = {(m_sandbox.bin / "fake-train").string(), "--epochs", "14",
                               "it's a \"test\" $(x) `y`", "~/not-home"};
    using Mode = EnvironmentSetting::Mode;
    req.recipe.command.environment = {
        {"OMP_NUM_THREADS", Mode::set, {"4"}},
        {"ODD", Mode::set, {"a'b $(c)"}},
        // $NAME, ${NAME} and a leading ~ are the job's; nothing else is.
        {"FROM_HOME", Mode::set, {"$HOME/x:${HOME}/y"}},
        // A path list as Lmod's prepend_path: unset before, so no empty entry after it.
        {"MY_TEST_LIST", Mode::prepend, {"~/bin", "/opt/a b"}},
        {"PATH", Mode::append, {"/opt/tail"}}};
    const auto result = m_sandbox.run(req, render(req));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto argv = read_nul_separated(req.run_dir / "train.argv");
    // `~/` is the one expansion argv gets (docs/recipes.md); $(...) and backticks stay literal.
    const std::vector<std::string> expected{"--epochs", "14", "it's a \"test\" $(x) `y`",
                                            (m_sandbox.home / "not-home").string()};
    EXPECT_EQ(argv, expected);
    const std::string env = read_text(req.run_dir / "train.env");
    EXPECT_NE(env.find("OMP_NUM_THREADS=4\n"), std::string::npos);
    EXPECT_NE(env.find("ODD=a'b $(c)\n"), std::string::npos);
    const std::string home = m_sandbox.home.string();
    EXPECT_NE(env.find("FROM_HOME=" + home + "/x:" + home + "/y\n"), std::string::npos) << env;
    EXPECT_NE(env.find("\nMY_TEST_LIST=" + home + "/bin:/opt/a b\n"), std::string::npos) << env;
    // Appended to what PATH held, not in place of it.
    const auto path = env.find("\nPATH=");
    ASSERT_NE(path, std::string::npos) << env;
    const std::string value = env.substr(path + 6, env.find('\n', path + 1) - path - 6);
    EXPECT_GT(value.size(), std::string(":/opt/tail").size()) << value;
    EXPECT_EQ(value.substr(value.size() - 10), ":/opt/tail") << value;
    EXPECT_NE(env.find("DLJOB_RUN_DIR=" + req.run_dir.string() + "\n"), std::string::npos);
}

// Issue 25: a batch job that exits 75 after the walltime warning continues itself through
// `dljob continue-job` (a stand-in here that records its arguments); each attempt knows its own
// token and number from the continuation records, though the script has the first one's baked
// in; a continued attempt writes no exit_code (it would read as the next attempt's end).
TEST_P(ScriptContract, ACheckpointedBatchJobContinuesItselfAsItsOwnAttempt) {
    const bool local = GetParam() == "local";
    for (const int dljob_rc : {0, 1}) {
        auto req = request();
        const auto job = render(req);
        std::filesystem::create_directories(req.run_dir);
        // Attempt 1 (golden-token) was continued as tok2: this run is attempt 2.
        write_text(req.run_dir / "continuation.golden-token", "exit_code=75\nnext_token=tok2\n");
        write_text(m_sandbox.bin / "dljob",
                   "#!/bin/bash\nprintf '%s\\n' \"$*\" >\"$SANDBOX/dljob.args\"\nexit "
                   "\"$FAKE_DLJOB_RC\"\n",
                   true);
        const auto result =
            m_sandbox.run(req, job, fmt::format("FAKE_TRAIN_RC=75 FAKE_DLJOB_RC={}", dljob_rc));
        EXPECT_EQ(result.exit_code, 75) << result.output;
        EXPECT_NE(read_text(req.run_dir / "job_identity").find("token=tok2\n"), std::string::npos);
        if (local) { // the local wrapper continues it, not the script
            EXPECT_FALSE(std::filesystem::exists(m_sandbox.root / "dljob.args"));
            EXPECT_EQ(run_file(req, "exit_code"), "75");
            continue;
        }
        const std::string identity = read_text(req.run_dir / "job_identity");
        const auto at = identity.find("started=") + 8;
        const std::string started = identity.substr(at, identity.find('\n', at) - at);
        EXPECT_EQ(trimmed(read_text(m_sandbox.root / "dljob.args")),
                  fmt::format("continue-job {} --token tok2 --attempt 2 --previous golden-token "
                              "--started {}",
                              req.run_dir.string(), started));
        // Continued (status 0): no exit_code; not continued (1): this attempt's end as always.
        EXPECT_EQ(std::filesystem::exists(req.run_dir / "exit_code"), dljob_rc != 0);
        std::filesystem::remove(m_sandbox.root / "dljob.args");
    }
    EXPECT_FALSE(std::filesystem::exists(m_sandbox.root / "scheduler-called"));
}

// Cancelled (scancel, qdel: TERM to the batch shell) while it checkpointed: it exits 75 too,
// but must not continue itself.
TEST_P(ScriptContract, ACancelledJobDoesNotContinueItself) {
    auto req = request();
    const auto job = render(req);
    std::filesystem::create_directories(req.run_dir);
    write_text(m_sandbox.bin / "dljob", "#!/bin/bash\n: >\"$SANDBOX/dljob.called\"\n", true);
    const auto started = req.run_dir / "train.started";
    const auto script = req.run_dir / job.script_name;
    write_text(script, job.script, true);
    const std::string command = fmt::format(
        "cd {0} && env -i SANDBOX={0} HOME={1} USER=tester PATH={2}:/usr/bin:/bin "
        "SLURM_TMPDIR={0}/local LSCRATCH={0}/local RAMDISK={0}/local TMPDIR={0}/local "
        "FAKE_TRAIN_WAIT=1 /bin/bash {3} & pid=$!; "
        "for _ in $(seq 1 400); do [ -e {4} ] && break; sleep 0.05; done; "
        "kill -TERM $pid; wait $pid",
        ScriptSandbox::quote(m_sandbox.root.string()),
        ScriptSandbox::quote(m_sandbox.home.string()), ScriptSandbox::quote(m_sandbox.bin.string()),
        ScriptSandbox::quote(script.string()), ScriptSandbox::quote(started.string()));
    const auto result = run_shell(command);
    EXPECT_EQ(result.exit_code, 75) << result.output;
    EXPECT_EQ(run_file(req, "train.signal"), "TERM");
    EXPECT_EQ(run_file(req, "exit_code"), "75");
    EXPECT_FALSE(std::filesystem::exists(m_sandbox.root / "dljob.called"));
}

INSTANTIATE_TEST_SUITE_P(EverySchedulerFamily, ScriptContract,
                         ::testing::Values("local", "graham", "bigred2", "helios", "sharcnet"),
                         [](const auto& param_info) { return param_info.param; });

} // namespace
} // namespace dljob::test
