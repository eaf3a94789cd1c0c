// Data-parallel dltrain without MPI: ranks started as local processes with DLTRAIN_RANK,
// DLTRAIN_WORLD_SIZE and DLTRAIN_RENDEZVOUS meet through the Gloo plugin (libdltrain-gloo.so) on
// loopback, through a directory or rank 0's TCP store. Each test skips, saying why, where the
// plugin (libgloo-dev) or Debian's Fashion-MNIST is missing.
//
// What holds (docs/data-parallel.md, "Without MPI: Gloo"): the MPI path's contract. N ranks of
// batch b match one rank of batch N*b to the documented tolerance, and the sum is in rank order,
// so the two rendezvous kinds give the same bits; SIGTERM to every rank stops them at one
// iteration with one checkpoint and exit 75; a rank killed or hung ends the others, named, in
// bounded time; a rendezvous that never completes ends within its timeout naming the missing
// rank; ranks without DLTRAIN_RENDEZVOUS are refused naming it.

#include "engine_test_support.hpp"
#include "parallel/ranks_support.hpp"
#include "support/run_process.hpp"

#include <dl/checkpoint.hpp>
#include <dl/communicator.hpp>
#include <dl/error.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

// One thread per rank on 2 cores; loopback, whatever this host's name resolves to; and bounds
// far above what the tests take, so that a fault fails a test instead of hanging it.
const std::string k_env = "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DLTRAIN_GLOO_IFACE=lo "
                          "DLTRAIN_COLLECTIVE_TIMEOUT=60 DLTRAIN_RENDEZVOUS_TIMEOUT=60 ";

// A port of loopback free a moment ago, for rank 0's store.
int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    // NOLINTNEXTLINE(*-reinterpret-cast): the sockets API takes the generic address
    auto* generic = reinterpret_cast<sockaddr*>(&address);
    const bool bound =
        ::bind(fd, generic, sizeof(address)) == 0 && ::getsockname(fd, generic, &length) == 0;
    ::close(fd);
    return bound ? ntohs(address.sin_port) : 29500;
}

// A shell command starting ranks 0..ranks-1 of `command` as processes of this machine, each
// with DLTRAIN_RANK, DLTRAIN_WORLD_SIZE and `env`, and at most 120 s to live. It waits for all,
// prints each one's output and "rank R exit=CODE", and exits with rank 0's code.
std::string local_ranks(int ranks, const std::string& env, const std::string& command,
                        const fs::path& dir, const std::vector<int>& started = {}) {
    std::string script;
    std::string report;
    for (int r = 0; r < ranks; ++r) {
        if (!started.empty() && std::find(started.begin(), started.end(), r) == started.end()) {
            continue;
        }
        const std::string out = (dir / ("rank" + std::to_string(r) + ".txt")).string();
        script += fmt::format("DLTRAIN_RANK={} DLTRAIN_WORLD_SIZE={} {} timeout 120 {} > {} 2>&1 & "
                              "p{}=$!; ",
                              r, ranks, env, command, out, r);
        report +=
            fmt::format("wait $p{}; e{}=$?; cat {}; echo rank {} exit=$e{}; ", r, r, out, r, r);
    }
    const int first = started.empty() ? 0 : started.front();
    return "sh -c " + dl_test::quoted(script + report + fmt::format("exit $e{}", first));
}

std::string rank_exit(int rank, int code) {
    return fmt::format("rank {} exit={}\n", rank, code);
}

class Gloo : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    void SetUp() override {
        const fs::path plugin = fs::path(DLTRAIN_BINARY).parent_path() / "libdltrain-gloo.so";
        if (!fs::exists(plugin)) {
            GTEST_SKIP() << "dltrain was built without the Gloo plugin (" << plugin
                         << "; apt install libgloo-dev, then reconfigure)";
        }
    }

    static void need_lenet_data() {
        if (const auto why = dl_test::why_no_fashion_mnist(); !why.empty()) {
            GTEST_SKIP() << why;
        }
    }

    [[nodiscard]] fs::path lenet(int batch, int iters, const std::string& name) const {
        return dl_test::lenet_config(m_dir.path(), batch, iters, 0, name);
    }

    [[nodiscard]] std::string directory_rendezvous() const {
        return "DLTRAIN_RENDEZVOUS=" + (m_dir.path() / "meet").string() + " ";
    }

    static std::string tcp_rendezvous() {
        return "DLTRAIN_RENDEZVOUS=tcp://127.0.0.1:" + std::to_string(free_port()) + " ";
    }
};

// The equivalence test of the MPI path (DataParallel.RanksMatchOneRankOfTheGlobalBatch...), on
// Gloo: 2 ranks of 32 against 1 rank of 64. The sum is in rank order, so the run through rank
// 0's TCP store repeats the run through a directory to the bit, and so does Open MPI's.
TEST_F(Gloo, TwoRanksMatchOneRankOfTheGlobalBatchThroughEitherRendezvous) {
    need_lenet_data();
    const int steps = 5;
    const auto one = lenet(64, steps, "one");
    const auto per2 = lenet(32, steps, "two");
    const fs::path ref = m_dir.path() / "ref";
    const auto single = run_shell(k_env + dl_test::lenet_train(one, ref));
    ASSERT_EQ(single.exit_code, 0) << single.output;

    const fs::path a = m_dir.path() / "a";
    const auto two = run_shell(local_ranks(2, k_env + directory_rendezvous(),
                                           dl_test::lenet_train(per2, a), m_dir.path()));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    EXPECT_NE(two.output.find(rank_exit(1, 0)), std::string::npos) << two.output;
    const auto lines = dl_test::metrics(a);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                            [](const auto& l) { return l["type"] == "start"; }),
              1);
    EXPECT_EQ(lines.front()["ranks"], 2);
    EXPECT_EQ(lines.front()["global_batch_size"], 64);
    EXPECT_NE(lines.front()["communicator"].get<std::string>().find("gloo ("), std::string::npos)
        << lines.front().dump();
    EXPECT_EQ(lines.back()["status"], "completed");
    dl_test::expect_equivalent(dl_test::weights(per2, dl_test::checkpoint(a, steps)),
                               dl_test::weights(one, dl_test::checkpoint(ref, steps)),
                               "2 ranks x 32 (Gloo)");
    const auto one_rank = dl_test::losses(dl_test::metrics(ref));
    const auto two_ranks = dl_test::losses(lines);
    ASSERT_EQ(one_rank.size(), static_cast<std::size_t>(steps));
    ASSERT_EQ(two_ranks.size(), one_rank.size());
    for (std::size_t i = 0; i < one_rank.size(); ++i) {
        EXPECT_NEAR(two_ranks[i], one_rank[i], 1e-5 * one_rank[i]) << "step " << i;
    }
    // Each rank removed its key files once every rank was connected: the directory serves the
    // next run as it is.
    EXPECT_TRUE(fs::is_empty(m_dir.path() / "meet"));

    const fs::path b = m_dir.path() / "b";
    const auto tcp = run_shell(
        local_ranks(2, k_env + tcp_rendezvous(), dl_test::lenet_train(per2, b), m_dir.path()));
    ASSERT_EQ(tcp.exit_code, 0) << tcp.output;
    EXPECT_NE(dl_test::metrics(b).front()["communicator"].get<std::string>().find("tcp rendezvous"),
              std::string::npos)
        << dl_test::metrics(b).front().dump();
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(a, steps)) ==
                dl_test::read_file(dl_test::checkpoint(b, steps)))
        << "the 2-rank runs through a directory and through the TCP store differ";

    const fs::path plugin = fs::path(DLTRAIN_BINARY).parent_path() / "libdltrain-mpi-openmpi.so";
    if (run_shell("command -v mpirun.openmpi").exit_code != 0 || !fs::exists(plugin)) {
        return;
    }
    const fs::path c = m_dir.path() / "c";
    const auto mpi = run_shell(
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
        "OMPI_MCA_btl_vader_single_copy_mechanism=none MPIEXEC_TIMEOUT=120 " +
        dl_test::ompi_session_env() + k_env +
        "mpirun.openmpi --oversubscribe --bind-to none -n 2 " + dl_test::lenet_train(per2, c));
    ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(a, steps)) ==
                dl_test::read_file(dl_test::checkpoint(c, steps)))
        << "2 ranks through Gloo and through Open MPI differ";
}

// Three ranks, and four buckets in flight at once (DLTRAIN_BUCKET_MB=0.01: ip2 | ip1 | conv2 |
// conv1), each started during the backward pass and finished in wait_all.
TEST_F(Gloo, ThreeRanksWithFourBucketsMatchOneRankOfTheGlobalBatch) {
    need_lenet_data();
    const int steps = 3;
    const auto one = lenet(96, steps, "one");
    const auto per3 = lenet(32, steps, "three");
    const fs::path ref = m_dir.path() / "ref";
    ASSERT_EQ(run_shell(k_env + dl_test::lenet_train(one, ref)).exit_code, 0);
    const fs::path run = m_dir.path() / "run";
    const auto three =
        run_shell(local_ranks(3, k_env + "DLTRAIN_BUCKET_MB=0.01 " + tcp_rendezvous(),
                              dl_test::lenet_train(per3, run), m_dir.path()));
    ASSERT_EQ(three.exit_code, 0) << three.output;
    EXPECT_NE(three.output.find(rank_exit(2, 0)), std::string::npos) << three.output;
    const auto start = dl_test::metrics(run).front();
    EXPECT_EQ(start["ranks"], 3) << start.dump();
    EXPECT_EQ(start["buckets"], 4) << start.dump();
    dl_test::expect_equivalent(dl_test::weights(per3, dl_test::checkpoint(run, steps)),
                               dl_test::weights(one, dl_test::checkpoint(ref, steps)),
                               "3 ranks x 32 (Gloo)");
}

// The scheduler's way: every rank gets the signal, each at its own point of a step.
TEST_F(Gloo, SigtermToEveryRankStopsThemAtOneIterationWithExit75) {
    need_lenet_data();
    const auto per2 = lenet(32, 1000000, "two");
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(dl_test::around_a_run(
        local_ranks(2, k_env + directory_rendezvous(),
                    dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)),
                    m_dir.path()),
        m_dir.path(), run, "kill -TERM $r0 $r1"));
    EXPECT_NE(result.output.find(rank_exit(0, 75)), std::string::npos) << result.output;
    EXPECT_NE(result.output.find(rank_exit(1, 75)), std::string::npos) << result.output;
    const auto lines = dl_test::metrics(run);
    ASSERT_FALSE(lines.empty()) << result.output;
    EXPECT_EQ(lines.back()["status"], "checkpointed") << result.output;
    const int iter = lines.back()["iter"].get<int>();
    const auto found = dl::find_latest_checkpoint(run / "checkpoints", [](const std::string&) {});
    ASSERT_TRUE(found) << result.output;
    EXPECT_EQ(*found, dl_test::checkpoint(run, iter));
    EXPECT_FALSE(dl::checkpoint_problem(*found));
    for (const char* rank : {"rank 0 of 2", "rank 1 of 2"}) {
        EXPECT_NE(result.output.find(std::string(rank) + ": stopped at iteration " +
                                     std::to_string(iter)),
                  std::string::npos)
            << rank << "\n"
            << result.output;
    }
}

// Two buckets (DLTRAIN_BUCKET_MB=1): sums in flight during the backward pass when the peer goes.
TEST_F(Gloo, ARankKilledEndsTheOthersNamingItInBoundedTime) {
    need_lenet_data();
    const auto per2 = lenet(32, 1000000, "two");
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(dl_test::around_a_run(
        local_ranks(
            2, k_env + "DLTRAIN_COLLECTIVE_TIMEOUT=5 DLTRAIN_BUCKET_MB=1 " + tcp_rendezvous(),
            dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)), m_dir.path()),
        m_dir.path(), run, "kill -KILL $r1"));
    EXPECT_EQ(result.output.find(rank_exit(0, 0)), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("rank 0 of 2: the gradient sum of iteration"), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("the exchange with rank 1 failed"), std::string::npos)
        << result.output;
    // Not a speed claim: a dead peer's closed connection is seen at once, well within the 5 s
    // collective timeout, and far below the 120 s each rank may live.
    EXPECT_LT(dl_test::seconds_after(result.output), 30) << result.output;
}

// A rank that hangs (stopped, an I/O stall) closes nothing: only the collective timeout ends
// the others, naming it. The stopped rank is killed once rank 0 is gone.
TEST_F(Gloo, ARankThatHangsIsNamedAfterTheCollectiveTimeout) {
    need_lenet_data();
    const auto per2 = lenet(32, 1000000, "two");
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(dl_test::around_a_run(
        local_ranks(2, k_env + "DLTRAIN_COLLECTIVE_TIMEOUT=3 " + directory_rendezvous(),
                    dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)),
                    m_dir.path()),
        m_dir.path(), run,
        "kill -STOP $r1; while kill -0 $r0 2>/dev/null; do sleep 0.1; done; kill -KILL $r1"));
    EXPECT_NE(result.output.find(rank_exit(0, 1)), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("no answer from rank 1 within 3 s (DLTRAIN_COLLECTIVE_TIMEOUT)"),
              std::string::npos)
        << result.output;
    EXPECT_LT(dl_test::seconds_after(result.output), 30) << result.output;
}

// World size 2 and one rank started: each kind of rendezvous ends within its timeout, naming
// what it waited for, before anything is written.
TEST_F(Gloo, ARendezvousThatNeverCompletesEndsInBoundedTimeNamingTheMissingRank) {
    const auto config = dl_test::make_tiny_workspace(m_dir.path(), 3);
    const std::string env = k_env + "DLTRAIN_RENDEZVOUS_TIMEOUT=1.5 ";
    const auto alone = [&](const std::string& rendezvous, int rank, const std::string& run) {
        const auto started = std::chrono::steady_clock::now();
        const auto result = run_shell(local_ranks(
            2, env + rendezvous,
            dl_test::train_command(config, m_dir.path() / run, "--device cpu --threads 1"),
            m_dir.path(), {rank}));
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        EXPECT_EQ(result.exit_code, 1) << result.output;
        EXPECT_LT(seconds, 20.0) << result.output;
        EXPECT_NE(result.output.find("did not complete within 1.5 s (DLTRAIN_RENDEZVOUS_TIMEOUT)"),
                  std::string::npos)
            << result.output;
        EXPECT_FALSE(fs::exists(m_dir.path() / run / "metrics.jsonl")) << result.output;
        return result.output;
    };
    const auto directory = alone(directory_rendezvous(), 0, "a");
    EXPECT_NE(directory.find("rank 0 of 2: the rendezvous through directory "), std::string::npos)
        << directory;
    EXPECT_NE(directory.find("no word from rank 1"), std::string::npos) << directory;
    // Rank 0 removed its own key files: the next run meets there.
    EXPECT_TRUE(fs::is_empty(m_dir.path() / "meet")) << directory;
    const auto served = alone(tcp_rendezvous(), 0, "b");
    EXPECT_NE(served.find("no word from rank 1"), std::string::npos) << served;
    const auto unserved = alone(tcp_rendezvous(), 1, "c");
    EXPECT_NE(unserved.find("rank 1 of 2: the rendezvous through tcp://127.0.0.1:"),
              std::string::npos)
        << unserved;
    EXPECT_NE(unserved.find("no answer from rank 0's store"), std::string::npos) << unserved;
}

// Refused before anything is written, and without the plugin: these need no libgloo.
TEST(GlooUsage, RanksWithoutARendezvousAreRefusedNamingTheVariable) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 3);
    const auto train = dl_test::train_command(config, dir.path() / "run", "--device cpu");
    const auto local = run_shell("DLTRAIN_RANK=0 DLTRAIN_WORLD_SIZE=2 " + train);
    EXPECT_EQ(local.exit_code, 2) << local.output;
    EXPECT_NE(local.output.find("2 ranks (DLTRAIN_RANK=0 DLTRAIN_WORLD_SIZE=2) meet through "
                                "Gloo, which needs DLTRAIN_RENDEZVOUS"),
              std::string::npos)
        << local.output;
    // Under an MPI launcher (its variables, no mpirun needed to refuse), DLTRAIN_COMM=gloo takes
    // the rank and the size from the launcher and still needs the rendezvous.
    const auto mpi =
        run_shell("DLTRAIN_COMM=gloo OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 " + train);
    EXPECT_EQ(mpi.exit_code, 2) << mpi.output;
    EXPECT_NE(mpi.output.find("(OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2) meet through Gloo, "
                              "which needs DLTRAIN_RENDEZVOUS"),
              std::string::npos)
        << mpi.output;
    const auto bad = run_shell("DLTRAIN_RANK=0 DLTRAIN_WORLD_SIZE=2 "
                               "DLTRAIN_RENDEZVOUS=tcp://node1 " +
                               train);
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find("DLTRAIN_RENDEZVOUS='tcp://node1': expected tcp://HOST:PORT"),
              std::string::npos)
        << bad.output;
    const auto no_size = run_shell("DLTRAIN_RANK=1 " + train);
    EXPECT_EQ(no_size.exit_code, 2) << no_size.output;
    EXPECT_NE(no_size.output.find("DLTRAIN_RANK=1 without DLTRAIN_WORLD_SIZE"), std::string::npos)
        << no_size.output;
    EXPECT_FALSE(fs::exists(dir.path() / "run"));
}

dl::RankEnv rank_env_of(const std::map<std::string, std::string>& vars) {
    return dl::detect_rank_env([&vars](const char* name) -> const char* {
        const auto found = vars.find(name);
        return found == vars.end() ? nullptr : found->second.c_str();
    });
}

TEST(GlooRankEnv, DltrainsOwnVariablesWinOverAnOuterLaunchers) {
    // A Spark task on a worker that srun started: the task's rank, not the worker step's.
    const auto env = rank_env_of({{"DLTRAIN_RANK", "2"},
                                  {"DLTRAIN_WORLD_SIZE", "3"},
                                  {"SLURM_PROCID", "0"},
                                  {"SLURM_STEP_NUM_TASKS", "1"}});
    EXPECT_EQ(env.launcher, "dltrain");
    EXPECT_EQ(env.rank, 2);
    EXPECT_EQ(env.size.value_or(-1), 3);
    EXPECT_TRUE(env.distributed());
    // Ranks on one machine pick a GPU each unless told otherwise.
    EXPECT_EQ(env.local_rank, 2);
    const auto told = rank_env_of(
        {{"DLTRAIN_RANK", "2"}, {"DLTRAIN_WORLD_SIZE", "3"}, {"DLTRAIN_LOCAL_RANK", "0"}});
    EXPECT_EQ(told.local_rank, 0);
}

TEST(GlooRankEnv, ARankWithoutASizeOrOutsideItIsAnError) {
    try {
        rank_env_of({{"DLTRAIN_RANK", "0"}});
        FAIL() << "expected an error";
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::usage);
        EXPECT_NE(std::string(e.what()).find("without DLTRAIN_WORLD_SIZE"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(rank_env_of({{"DLTRAIN_RANK", "2"}, {"DLTRAIN_WORLD_SIZE", "2"}}), dl::Error);
    EXPECT_THROW(rank_env_of({{"DLTRAIN_RANK", "x"}, {"DLTRAIN_WORLD_SIZE", "2"}}), dl::Error);
}

// DLTRAIN_COMM=gloo under a working mpirun: the launcher's variables give the ranks, Gloo joins
// them (a cluster whose MPI library is broken still trains data-parallel).
TEST_F(Gloo, UnderMpirunDltrainCommGlooTrainsThroughGloo) {
    if (run_shell("command -v mpirun.openmpi").exit_code != 0) {
        GTEST_SKIP() << "mpirun.openmpi not installed";
    }
    const auto config = dl_test::make_tiny_workspace(m_dir.path(), 3);
    const fs::path run = m_dir.path() / "run";
    const auto result =
        run_shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MPIEXEC_TIMEOUT=120 " +
                  dl_test::ompi_session_env() + k_env + "DLTRAIN_COMM=gloo " +
                  directory_rendezvous() + "mpirun.openmpi --oversubscribe --bind-to none -n 2 " +
                  dl_test::train_command(config, run, "--device cpu --threads 1"));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto start = dl_test::metrics(run).front();
    EXPECT_EQ(start["ranks"], 2) << start.dump();
    EXPECT_EQ(start["launcher"], "openmpi") << start.dump();
    EXPECT_NE(start["communicator"].get<std::string>().find("gloo ("), std::string::npos)
        << start.dump();
}

} // namespace
