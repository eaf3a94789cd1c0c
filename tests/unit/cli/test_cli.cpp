#include "support/run_process.hpp"

#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/cli/cli.hpp>

#include <dljob_build_info.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dljob::cli {
namespace {

struct CliRun {
    int exit_code;
    std::string out;
    std::string err;
};

CliRun run_cli(const std::vector<std::string>& args) {
    std::ostringstream out;
    std::ostringstream err;
    const int code = run(args, out, err);
    return {code, out.str(), err.str()};
}

TEST(Cli, HelpPrintsUsageAndExitsZero) {
    auto r = run_cli({"--help"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("Usage: dljob"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Exit codes:"), std::string::npos);
}

TEST(Cli, VersionNamesTheBuildsGitRevision) {
    auto r = run_cli({"--version"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, std::string("dljob ") + build_info::version + " (git " +
                         build_info::git_revision + ")\n");
}

TEST(Cli, UnknownVerbIsAUsageError) {
    auto r = run_cli({"frobnicate"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("dljob --help"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
}

TEST(Cli, UnknownFlagIsAUsageError) {
    auto r = run_cli({"--no-such-flag"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

TEST(Cli, NoVerbPrintsUsageToStderrAndExitsTwo) {
    auto r = run_cli({});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("Usage: dljob"), std::string::npos) << r.err;
}

// The same contract through the real executable: exit codes are what scripts see.
TEST(CliBinary, ExitCodesOfTheRealExecutable) {
    EXPECT_EQ(test::run_shell(std::string(DLJOB_BINARY) + " --version").exit_code, 0);
    EXPECT_EQ(test::run_shell(std::string(DLJOB_BINARY) + " --help").exit_code, 0);
    auto bad = test::run_shell(std::string(DLJOB_BINARY) + " --bogus");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.output.find("--bogus"), std::string::npos) << bad.output;
}

// dljob runs in every job's prologue and epilogue and in watch loops: libcurl and its ~30
// libraries (and OpenSSL's libcrypto) are for fetch-data only and must not load at start-up
// (adapters/http_curl.cpp opens libcurl on first use).
TEST(CliBinary, StartingLoadsNeitherLibcurlNorLibcrypto) {
    auto run = test::run_shell("LD_DEBUG=files " + std::string(DLJOB_BINARY) + " --version");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    ASSERT_NE(run.output.find("file=libc.so"), std::string::npos)
        << "LD_DEBUG printed nothing: the check below would prove nothing\n"
        << run.output;
    for (const char* library : {"file=libcurl", "file=libcrypto", "file=libssl"}) {
        EXPECT_EQ(run.output.find(library), std::string::npos) << library << " was loaded";
    }
}

// `render --set` shows exactly what `submit --set` would submit, and rejects what it would reject.
TEST(CliBinary, RenderAppliesSetOverridesAndRejectsBadOnes) {
    const std::string render = "XDG_CONFIG_HOME=/nonexistent-dljob-test " +
                               std::string(DLJOB_BINARY) + " render " + DLJOB_SOURCE_DIR +
                               "/recipes/fashion-mnist.yaml --site local --set resources.gpus=0";
    auto plain = test::run_shell(render);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_EQ(plain.output.find("--max-iter 123"), std::string::npos) << plain.output;

    auto set = test::run_shell(render + " --set train.max_iter=123");
    ASSERT_EQ(set.exit_code, 0) << set.output;
    EXPECT_NE(set.output.find("--max-iter 123"), std::string::npos) << set.output;

    auto bad = test::run_shell(render + " --set train.max_iters=123");
    EXPECT_EQ(bad.exit_code, 3) << bad.output;
    // The second --set: the first is the render's resources.gpus=0.
    EXPECT_NE(bad.output.find("--set:2:7: train.max_iters: unknown key"), std::string::npos)
        << bad.output;
    EXPECT_EQ(bad.output.find("#!/"), std::string::npos) << "no script on error: " << bad.output;
}

// A network whose ip1 has 10^7 outputs needs about 128 GB for its weights alone, more than the
// recipe's 8G. dltrain check refused it only by failing to allocate (exit 1, "std::bad_alloc"),
// which validate took for "not checked here" and passed. Now check works the bytes out from the
// shapes (against --max-memory, the recipe's resources.memory) and exits 3 naming the layer;
// validate fails with its message. Under a 2 GB address-space limit, so nothing here can take
// the machine's memory.
TEST(CliBinary, ValidateRefusesANetworkTooLargeForTheRecipesMemory) {
    const std::string dir = "/tmp/dljob-cli-mem-" + std::to_string(::getpid());
    const std::string setup =
        "rm -rf " + dir + " && mkdir -p " + dir +
        " && sed 's/num_output: 500$/num_output: 10000000/' " + DLJOB_SOURCE_DIR +
        "/recipes/networks/lenet.yaml > " + dir + "/net.yaml && grep -q 10000000 " + dir +
        "/net.yaml && sed 's|config: networks/lenet.yaml|config: " + dir + "/net.yaml|' " +
        DLJOB_SOURCE_DIR + "/recipes/fashion-mnist.yaml > " + dir + "/recipe.yaml && grep -q '" +
        "memory: 8G' " + dir + "/recipe.yaml";
    ASSERT_EQ(test::run_shell(setup).exit_code, 0);
    const std::string env = "ulimit -v 2000000; XDG_CONFIG_HOME=/nonexistent-dljob-test "
                            "DLJOB_STORE=" +
                            dir + "/jobs.db DLJOB_RUNS_DIR=" + dir + "/runs ";
    auto bad = test::run_shell(env + DLJOB_BINARY + " validate " + dir + "/recipe.yaml");
    EXPECT_EQ(bad.exit_code, 3) << bad.output;
    EXPECT_NE(bad.output.find(dir + "/net.yaml:61: layer 'ip1' (InnerProduct): needs"),
              std::string::npos)
        << bad.output;
    EXPECT_NE(bad.output.find("(8589934592 bytes, --max-memory 8192M)"), std::string::npos)
        << bad.output;
    EXPECT_EQ(bad.output.find("not checked here"), std::string::npos) << bad.output;
    test::run_shell("rm -rf " + dir);
}

// --sweep-limit N runs at most N points at once: 0 or less would run none (or mean nothing),
// so it is refused before anything is recorded or submitted.
TEST(CliBinary, ASweepLimitBelowOneIsRefusedAndSubmitsNothing) {
    const std::string dir = "/tmp/dljob-cli-limit-" + std::to_string(::getpid());
    const std::string env = "XDG_CONFIG_HOME=/nonexistent-dljob-test DLJOB_STORE=" + dir +
                            "/jobs.db DLJOB_RUNS_DIR=" + dir + "/runs ";
    for (const char* limit : {"0", "-3", "-1"}) {
        auto refused = test::run_shell(env + DLJOB_BINARY + " submit " + DLJOB_SOURCE_DIR +
                                       "/recipes/fashion-mnist.yaml --site local --sweep "
                                       "train.max_iter=10,20 --sweep-limit=" +
                                       limit);
        EXPECT_EQ(refused.exit_code, 2) << refused.output;
        EXPECT_NE(
            refused.output.find(std::string("--sweep-limit ") + limit + ": expected 1 or more"),
            std::string::npos)
            << refused.output;
    }
    // Given, the values that mean nothing are refused too, never taken as left out.
    auto alone = test::run_shell(env + DLJOB_BINARY + " submit " + DLJOB_SOURCE_DIR +
                                 "/recipes/fashion-mnist.yaml --site local --sweep-limit 2");
    EXPECT_EQ(alone.exit_code, 2) << alone.output;
    EXPECT_NE(alone.output.find("--sweep-limit 2: this submit is one job, not a sweep"),
              std::string::npos)
        << alone.output;
    auto no_after = test::run_shell(env + DLJOB_BINARY + " submit " + DLJOB_SOURCE_DIR +
                                    "/recipes/fashion-mnist.yaml --site local --after ''");
    EXPECT_EQ(no_after.exit_code, 2) << no_after.output;
    EXPECT_NE(no_after.output.find("--after '': expected a dljob job id"), std::string::npos)
        << no_after.output;
    auto no_sweep = test::run_shell(env + DLJOB_BINARY + " sweep ''");
    EXPECT_EQ(no_sweep.exit_code, 2) << no_sweep.output;
    EXPECT_NE(no_sweep.output.find("expected a sweep id"), std::string::npos) << no_sweep.output;
    EXPECT_EQ(test::run_shell("test -e " + dir + "/runs").exit_code, 1) << "a run directory";
    EXPECT_EQ(test::run_shell("test -e " + dir + "/jobs.db").exit_code, 1) << "a job store";
    test::run_shell("rm -rf " + dir);
}

TEST(CliBinary, ValidateAndSubmitRefuseANetworkConfigDltrainWouldRefuse) {
    // A recipe whose network has a 50x50 kernel over 28x28 images: dltrain would exit 3 when
    // the job starts; validate and submit say so now, naming the network file and line.
    const std::string dir = "/tmp/dljob-cli-net-" + std::to_string(::getpid());
    const std::string setup =
        "rm -rf " + dir + " && mkdir -p " + dir + " && sed 's/kernel_size: 5$/kernel_size: 50/' " +
        DLJOB_SOURCE_DIR + "/recipes/networks/lenet.yaml > " + dir +
        "/net.yaml && sed 's|config: " + "networks/lenet.yaml|config: " + dir + "/net.yaml|' " +
        DLJOB_SOURCE_DIR + "/recipes/fashion-mnist.yaml > " + dir + "/recipe.yaml && grep -q " +
        dir + "/net.yaml " + dir + "/recipe.yaml";
    ASSERT_EQ(test::run_shell(setup).exit_code, 0);
    const std::string env = "XDG_CONFIG_HOME=/nonexistent-dljob-test DLJOB_STORE=" + dir +
                            "/jobs.db DLJOB_RUNS_DIR=" + dir + "/runs ";

    auto good = test::run_shell(env + DLJOB_BINARY + " validate " + DLJOB_SOURCE_DIR +
                                "/recipes/fashion-mnist.yaml");
    EXPECT_EQ(good.exit_code, 0) << good.output;
    EXPECT_NE(good.output.find("ok (recipe)"), std::string::npos) << good.output;

    auto bad = test::run_shell(env + DLJOB_BINARY + " validate " + dir + "/recipe.yaml");
    EXPECT_EQ(bad.exit_code, 3) << bad.output;
    EXPECT_NE(bad.output.find(dir + "/net.yaml:"), std::string::npos) << bad.output;
    EXPECT_NE(bad.output.find("kernel_size 50 does not fit the 28x28 input"), std::string::npos)
        << bad.output;

    auto submit = test::run_shell(env + DLJOB_BINARY + " submit " + dir +
                                  "/recipe.yaml --site local --set resources.gpus=0");
    EXPECT_EQ(submit.exit_code, 3) << submit.output;
    EXPECT_NE(submit.output.find("kernel_size 50"), std::string::npos) << submit.output;
    EXPECT_EQ(test::run_shell("test -e " + dir + "/runs").exit_code, 1) << "a run directory";
    auto rows = test::run_shell(env + DLJOB_BINARY + " status --all --json");
    EXPECT_EQ(rows.output.find("lenet"), std::string::npos) << rows.output;
    test::run_shell("rm -rf " + dir);
}

TEST(CliBinary, ASubmitThatRecordsNothingCreatesNoJobStore) {
    const std::string dir = "/tmp/dljob-cli-store-" + std::to_string(::getpid());
    ASSERT_EQ(test::run_shell("rm -rf " + dir + " && mkdir -p " + dir).exit_code, 0);
    const std::string env = "XDG_CONFIG_HOME=/nonexistent-dljob-test DLJOB_STORE=" + dir +
                            "/store/jobs.db DLJOB_RUNS_DIR=" + dir + "/runs ";
    const std::string submit = env + DLJOB_BINARY + " submit " + DLJOB_SOURCE_DIR +
                               "/recipes/mnist.yaml --site local --set resources.gpus=0";

    auto refused = test::run_shell(submit + " --set resources.gpus=-1");
    EXPECT_EQ(refused.exit_code, 3) << refused.output;
    auto dry = test::run_shell(submit + " --dry-run");
    EXPECT_EQ(dry.exit_code, 0) << dry.output;
    EXPECT_NE(dry.output.find("#!/"), std::string::npos) << dry.output;
    EXPECT_EQ(test::run_shell("ls -A " + dir).output, "") << "a store or run directory";

    // A store that cannot be opened refuses the submit before its run directory exists.
    auto no_store = test::run_shell("touch " + dir + "/file && XDG_CONFIG_HOME=/nonexistent " +
                                    "DLJOB_STORE=" + dir + "/file/jobs.db DLJOB_RUNS_DIR=" + dir +
                                    "/runs " + DLJOB_BINARY + " submit " + DLJOB_SOURCE_DIR +
                                    "/recipes/mnist.yaml --site local --set resources.gpus=0");
    EXPECT_EQ(no_store.exit_code, 6) << no_store.output;
    EXPECT_NE(no_store.output.find("job store"), std::string::npos) << no_store.output;
    EXPECT_EQ(test::run_shell("ls -A " + dir).output, "file\n") << "a run directory";
    test::run_shell("rm -rf " + dir);
}

TEST(CliBinary, EveryJobVerbNamesAJobThatIsNotInTheStore) {
    const std::string dir = "/tmp/dljob-cli-nojob-" + std::to_string(::getpid());
    ASSERT_EQ(test::run_shell("rm -rf " + dir + " && mkdir -p " + dir).exit_code, 0);
    const std::string dljob = "XDG_CONFIG_HOME=/nonexistent-dljob-test DLJOB_STORE=" + dir +
                              "/jobs.db DLJOB_RUNS_DIR=" + dir + "/runs " + DLJOB_BINARY;
    for (const std::string verb : {"status", "show", "logs", "cancel"}) {
        auto missing = test::run_shell(dljob + " " + verb + " 99999");
        EXPECT_EQ(missing.exit_code, 7) << verb << ": " << missing.output;
        EXPECT_NE(missing.output.find("no job 99999 in the job store"), std::string::npos)
            << verb << ": " << missing.output;
    }
    auto empty = test::run_shell(dljob + " status --all");
    EXPECT_EQ(empty.exit_code, 0) << empty.output;
    EXPECT_NE(empty.output.find("no jobs"), std::string::npos) << empty.output;
    test::run_shell("rm -rf " + dir);
}

// A `local` job in DIR/jobs.db, submitted, with its run directory DIR/run and script
// DIR/run/job.sh; COMPLETED when `ended`. Its id, or 0 after a failed assertion.
std::int64_t record_local_job(const std::filesystem::path& dir, const std::string& token,
                              const std::string& name, bool ended) {
    auto store = adapters::SqliteJobStore::open(dir / "jobs.db");
    EXPECT_TRUE(store) << store.error().message;
    if (!store) {
        return 0;
    }
    Job job;
    job.token = token;
    job.name = name;
    job.site = "local";
    job.scheduler = "local";
    job.run_dir = (dir / "run").string();
    job.script_path = (dir / "run" / "job.sh").string();
    auto created = (*store)->create(job);
    EXPECT_TRUE(created) << created.error().message;
    if (!created) {
        return 0;
    }
    EXPECT_TRUE((*store)->mark_submitted(created->id, "4242", "", 1'700'000'000));
    if (ended) {
        SchedulerStatus status;
        status.state = JobState::completed;
        EXPECT_TRUE((*store)->update_state(created->id, status, 1'700'000'100));
    }
    return created->id;
}

// status --watch through the real binary: --frames 1 prints one frame, with the job's loss
// sparkline under its row, and returns (so a script or test never waits on it).
TEST(CliBinary, StatusWatchPrintsFramesWithTheLossSparklineAndStopsAfterFrames) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("dljob-cli-watch-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "run");
    std::ofstream(dir / "run" / "metrics.jsonl")
        << R"({"type":"train","iter":0,"max_iter":20,"loss":2.0})"
        << "\n"
        << R"({"type":"train","iter":10,"max_iter":20,"loss":1.0})"
        << "\n"
        << R"({"type":"train","iter":20,"max_iter":20,"loss":0.5})"
        << "\n";
    const std::int64_t id = record_local_job(dir, "watchtok", "watched", true);
    ASSERT_GT(id, 0);
    const std::string dljob =
        "XDG_CONFIG_HOME=/nonexistent-dljob-test DLJOB_STORE=" + (dir / "jobs.db").string() +
        " DLJOB_RUNS_DIR=" + (dir / "runs").string() + " timeout 60 " + DLJOB_BINARY;
    auto watched = test::run_shell(dljob + " status --watch --frames 1 " + std::to_string(id));
    EXPECT_EQ(watched.exit_code, 0) << watched.output;
    EXPECT_NE(watched.output.find("watched"), std::string::npos) << watched.output;
    EXPECT_NE(watched.output.find("█"), std::string::npos) << watched.output;
    EXPECT_NE(watched.output.find("training loss, iter 0..20, last 0.5"), std::string::npos)
        << watched.output;
    // Without --watch there is no sparkline, and --frames alone is a usage error.
    auto plain = test::run_shell(dljob + " status " + std::to_string(id));
    EXPECT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_EQ(plain.output.find("training loss"), std::string::npos) << plain.output;
    auto frames_alone = test::run_shell(dljob + " status --frames 1");
    EXPECT_EQ(frames_alone.exit_code, 2) << frames_alone.output;
    // JSON lines stay JSON lines over several frames: one object a line, no blank between.
    auto json = test::run_shell(dljob + " status --json --watch --frames 2 " + std::to_string(id) +
                                " 2>/dev/null");
    EXPECT_EQ(json.exit_code, 0) << json.output;
    std::istringstream lines(json.output);
    int objects = 0;
    for (std::string line; std::getline(lines, line);) {
        EXPECT_FALSE(line.empty()) << json.output;
        if (!line.empty()) {
            EXPECT_EQ(nlohmann::json::parse(line, nullptr, false).is_discarded(), false) << line;
            ++objects;
        }
    }
    EXPECT_EQ(objects, 2) << json.output;
    std::filesystem::remove_all(dir);
}

// Run-directory files that are not files: status, show and logs neither wait on a FIFO nor read
// /dev/zero without end (each under a timeout here, so a hang fails instead of stalling ctest).
TEST(CliBinary, RunDirectoryFifosAndDevicesAreNeitherWaitedOnNorReadWithoutEnd) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("dljob-cli-fifo-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "run");
    ASSERT_EQ(::mkfifo((dir / "run" / "metrics.jsonl").c_str(), 0600), 0);
    ASSERT_EQ(::mkfifo((dir / "run" / "job.log").c_str(), 0600), 0);
    std::filesystem::create_symlink("/dev/zero", dir / "run" / "recipe.yaml");
    std::filesystem::create_symlink("/dev/zero", dir / "run" / "job.sh");
    const std::int64_t id = record_local_job(dir, "fifotok", "hostile", false);
    ASSERT_GT(id, 0);
    const std::string dljob =
        "XDG_CONFIG_HOME=/nonexistent-dljob-test DLJOB_STORE=" + (dir / "jobs.db").string() +
        " DLJOB_RUNS_DIR=" + (dir / "runs").string() + " timeout 30 " + DLJOB_BINARY;
    auto status = test::run_shell(dljob + " status --all");
    EXPECT_NE(status.exit_code, 124) << "status waited on the FIFO\n" << status.output;
    EXPECT_NE(status.output.find("hostile"), std::string::npos) << status.output;
    auto show = test::run_shell(dljob + " show " + std::to_string(id));
    EXPECT_NE(show.exit_code, 124) << "show read /dev/zero without end";
    EXPECT_EQ(show.exit_code, 0) << show.output.substr(0, 2000);
    EXPECT_NE(show.output.find("not shown: a character device, not a file"), std::string::npos)
        << show.output.substr(0, 2000);
    auto logs = test::run_shell(dljob + " logs " + std::to_string(id));
    EXPECT_NE(logs.exit_code, 124) << "logs waited on the FIFO";
    EXPECT_NE(logs.exit_code, 0) << logs.output;
    EXPECT_NE(logs.output.find("is a FIFO (named pipe), not a file"), std::string::npos)
        << logs.output;
    std::filesystem::remove_all(dir);
}

// A job's log holding escape sequences (the job's own, or whoever can write its run directory):
// on a terminal (script(1) gives the command one) `logs` and `show` show them as ^[ instead of
// letting the terminal obey them; piped, the bytes are the file's.
TEST(CliBinary, EscapeSequencesFromRunFilesReachATerminalVisibleNotObeyed) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("dljob-cli-escape-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "run");
    // OSC 52 writes the terminal's clipboard; ESC [ 2 J clears the screen.
    const std::string hostile = "epoch 1\x1b]52;c;ZWNobw==\x07 done\x1b[2J\n";
    std::ofstream(dir / "run" / "job.log", std::ios::binary) << hostile;
    std::ofstream(dir / "run" / "job.sh", std::ios::binary) << "#!/bin/sh\n# \x1b[8m hidden\n";
    const std::int64_t id = record_local_job(dir, "escapetok", "escaped", true);
    ASSERT_GT(id, 0);
    const std::string env =
        "XDG_CONFIG_HOME=/nonexistent-dljob-test DLJOB_STORE=" + (dir / "jobs.db").string() +
        " DLJOB_RUNS_DIR=" + (dir / "runs").string();
    const std::string logs = std::string(DLJOB_BINARY) + " logs " + std::to_string(id);
    const std::string show = std::string(DLJOB_BINARY) + " show " + std::to_string(id);
    auto on_terminal = test::run_shell(env + " timeout 60 script -qec '" + logs + "' /dev/null");
    EXPECT_EQ(on_terminal.exit_code, 0) << on_terminal.output;
    EXPECT_EQ(on_terminal.output.find('\x1b'), std::string::npos) << on_terminal.output;
    EXPECT_NE(on_terminal.output.find("epoch 1^[]52;c;ZWNobw==^G done^[[2J"), std::string::npos)
        << on_terminal.output;
    auto shown = test::run_shell(env + " timeout 60 script -qec '" + show + "' /dev/null");
    EXPECT_EQ(shown.exit_code, 0) << shown.output;
    EXPECT_EQ(shown.output.find('\x1b'), std::string::npos) << shown.output;
    EXPECT_NE(shown.output.find("# ^[[8m hidden"), std::string::npos) << shown.output;
    auto piped = test::run_shell(env + " timeout 60 " + logs);
    EXPECT_EQ(piped.exit_code, 0) << piped.output;
    EXPECT_EQ(piped.output, hostile);
    std::filesystem::remove_all(dir);
}

// Run under a 1 GiB address-space limit, so that input whose bound is missing fails the test
// (dljob dies of it) instead of taking the machine's memory. The sanitizers reserve terabytes of
// shadow memory up front, so under them the limit is left off.
std::string within_memory_limit() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return "";
#else
    return "prlimit --as=1073741824 -- ";
#endif
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

// Hostile YAML through the real binary: each is refused with exit 3 and where and which limit,
// where before it grew to gigabytes (exit 70 under a memory limit) or waited forever.
TEST(CliBinary, HostileYamlIsRefusedWithExitThreeNamingPositionAndLimit) {
    const std::string dir = "/tmp/dljob-cli-hostile-" + std::to_string(::getpid());
    ASSERT_EQ(test::run_shell("rm -rf " + dir + " && mkdir -p " + dir).exit_code, 0);
    const std::string dljob = "XDG_CONFIG_HOME=/nonexistent-dljob-test timeout 60 " +
                              within_memory_limit() + DLJOB_BINARY;

    // Billion laughs: nine lines of ten aliases each to the line before, 10^9 nodes in 400 bytes.
    std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    std::string flow_laughs = "[&a0 [x,x,x,x,x,x,x,x,x,x]";
    for (int level = 1; level <= 8; ++level) {
        std::string items = fmt::format("*a{}", level - 1);
        for (int i = 1; i < 10; ++i) {
            items += fmt::format(",*a{}", level - 1);
        }
        laughs += fmt::format("a{}: &a{} [{}]\n", level, level, items);
        flow_laughs += fmt::format(",&a{} [{}]", level, items);
    }
    flow_laughs += "]";
    write_text(dir + "/laughs.yaml", laughs);
    auto bomb = test::run_shell(dljob + " validate " + dir + "/laughs.yaml");
    EXPECT_EQ(bomb.exit_code, 3) << bomb.output;
    EXPECT_NE(bomb.output.find(dir + "/laughs.yaml:5:"), std::string::npos) << bomb.output;
    EXPECT_NE(bomb.output.find("more than 100000 nodes"), std::string::npos) << bomb.output;

    // The same in a 400-byte --set value, pointed at in the argument.
    auto set = test::run_shell(
        dljob + " render " + DLJOB_SOURCE_DIR +
        "/recipes/fashion-mnist.yaml --site local --set 'train.max_iter=" + flow_laughs + "'");
    EXPECT_EQ(set.exit_code, 3) << set.output;
    EXPECT_NE(set.output.find("dljob: error: --set:1:"), std::string::npos) << set.output;
    EXPECT_NE(set.output.find("more than 100000 nodes"), std::string::npos) << set.output;

    std::string deep(100'000, '[');
    write_text(dir + "/deep.yaml", deep + std::string(100'000, ']'));
    auto nested = test::run_shell(dljob + " validate " + dir + "/deep.yaml");
    EXPECT_EQ(nested.exit_code, 3) << nested.output;
    EXPECT_NE(nested.output.find(dir + "/deep.yaml:1:66: nested deeper than 64 levels"),
              std::string::npos)
        << nested.output;

    auto zero = test::run_shell(dljob + " validate /dev/zero");
    EXPECT_EQ(zero.exit_code, 3) << zero.output;
    EXPECT_NE(zero.output.find("/dev/zero: is a character device, not a YAML file"),
              std::string::npos)
        << zero.output;

    ASSERT_EQ(test::run_shell("truncate -s 10G " + dir + "/sparse.yaml").exit_code, 0);
    auto sparse = test::run_shell(dljob + " validate " + dir + "/sparse.yaml");
    EXPECT_EQ(sparse.exit_code, 3) << sparse.output;
    EXPECT_NE(sparse.output.find("sparse.yaml: 10737418240 bytes, more than 1048576 bytes"),
              std::string::npos)
        << sparse.output;

    // A FIFO as a recipe and as a site profile: refused at once, no writer awaited (the timeout
    // above turns a wait into exit 124).
    ASSERT_EQ(test::run_shell("mkfifo " + dir + "/fifo.yaml").exit_code, 0);
    auto fifo = test::run_shell(dljob + " validate " + dir + "/fifo.yaml");
    EXPECT_EQ(fifo.exit_code, 3) << fifo.output;
    EXPECT_NE(fifo.output.find("fifo.yaml: is a FIFO (named pipe), not a YAML file"),
              std::string::npos)
        << fifo.output;
    auto fifo_site = test::run_shell(dljob + " render " + DLJOB_SOURCE_DIR +
                                     "/recipes/fashion-mnist.yaml --site-file " + dir +
                                     "/fifo.yaml --site local");
    EXPECT_EQ(fifo_site.exit_code, 3) << fifo_site.output;
    EXPECT_NE(fifo_site.output.find("fifo.yaml: is a FIFO (named pipe)"), std::string::npos)
        << fifo_site.output;
    test::run_shell("rm -rf " + dir);
}

// A --site-file that does not load is reported with its own error, whether or not the site
// named is the one it meant to define; before, the name was looked up without it and the answer
// was "no site profile named ..." (exit 7) with the file's mistake hidden.
TEST(CliBinary, RenderReportsTheSiteFilesOwnErrorNotAMissingSite) {
    const std::string dir = "/tmp/dljob-cli-sitefile-" + std::to_string(::getpid());
    ASSERT_EQ(test::run_shell("rm -rf " + dir + " && mkdir -p " + dir).exit_code, 0);
    write_text(dir + "/bad.yaml", "name: mysite\npartitions:\n  gpu:\n    scheduler: slurmm\n"
                                  "    node: {cores: 8, memory: 32G}\n"
                                  "    walltime: {default: \"01:00:00\", max: \"02:00:00\"}\n");
    const std::string render = "XDG_CONFIG_HOME=/nonexistent-dljob-test " +
                               std::string(DLJOB_BINARY) + " render " + DLJOB_SOURCE_DIR +
                               "/recipes/fashion-mnist.yaml --site-file " + dir + "/bad.yaml";
    for (const char* site : {"mysite", "local"}) {
        auto bad = test::run_shell(render + " --site " + site);
        EXPECT_EQ(bad.exit_code, 3) << site << ": " << bad.output;
        EXPECT_NE(
            bad.output.find(
                "dljob: error: " + dir +
                "/bad.yaml:4:16: partitions.gpu.scheduler: 'slurmm' is not a scheduler family"),
            std::string::npos)
            << site << ": " << bad.output;
        EXPECT_EQ(bad.output.find("no site profile named"), std::string::npos) << bad.output;
        EXPECT_EQ(bad.output.find("#!/"), std::string::npos) << "no script on error";
    }
    write_text(dir + "/good.yaml", "name: mysite\npartitions:\n  gpu:\n    scheduler: local\n"
                                   "    node: {cores: 8, memory: 32G, gpus: 2}\n"
                                   "    walltime: {default: \"01:00:00\", max: \"02:00:00\"}\n");
    auto good =
        test::run_shell(render.substr(0, render.rfind(' ') + 1) + dir + "/good.yaml --site mysite");
    EXPECT_EQ(good.exit_code, 0) << good.output;
    auto missing = test::run_shell(render.substr(0, render.rfind(' ') + 1) + dir +
                                   "/good.yaml --site nosuchsite");
    EXPECT_EQ(missing.exit_code, 7) << missing.output;
    EXPECT_NE(missing.output.find("no site profile named 'nosuchsite'"), std::string::npos)
        << missing.output;
    test::run_shell("rm -rf " + dir);
}

} // namespace
} // namespace dljob::cli
