// Data-parallel dltrain under real MPI launchers (Open MPI's mpirun.openmpi and MPICH's
// mpiexec.mpich, called by those names: Debian's slurm-wlm-torque owns plain mpirun), on CPU
// ranks, with LeNet on real Fashion-MNIST (Debian's dataset-fashion-mnist). Each test skips,
// saying why, where the launcher, the plugin or the data is missing.
//
// What holds (docs/data-parallel.md): N ranks of batch b match one rank of batch N*b to the
// documented tolerance; two runs with the same N are bit-identical; a resumed run across ranks
// is bit-identical to an unbroken one; SIGTERM to one rank stops every rank at one iteration
// with one checkpoint and exit 75; a rank that dies or hangs ends the job, named, in bounded
// time; a run directory is trained by one set of ranks at a time.

#include "engine_test_support.hpp"
#include "parallel/ranks_support.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

// Open MPI in a container as root, on 2 cores: the variables docs/data-parallel.md lists.
const std::string k_mpi_env =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
    "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 "
    "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MPIEXEC_TIMEOUT=120 ";

std::string launcher(const std::string& flavour, int ranks) {
    if (flavour == "openmpi") {
        return k_mpi_env + dl_test::ompi_session_env() +
               "mpirun.openmpi --oversubscribe --bind-to none -n " + std::to_string(ranks) + " ";
    }
    return k_mpi_env + "mpiexec.mpich -n " + std::to_string(ranks) + " ";
}

class DataParallel : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    void SetUp() override {
        if (const auto why = dl_test::why_no_fashion_mnist(); !why.empty()) {
            GTEST_SKIP() << why;
        }
        const fs::path dltrain = fs::path(DLTRAIN_BINARY);
        // The build's plugins sit next to the real binary (a bundle's wrapper: next to .bin).
        for (const auto& dir : {dltrain.parent_path()}) {
            if (fs::exists(dir / "libdltrain-mpi-openmpi.so") ||
                fs::exists(dir / "libdltrain-mpi-mpich.so")) {
                return;
            }
        }
        GTEST_SKIP() << "dltrain was built without MPI plugins (apt install libopenmpi-dev "
                        "libmpich-dev, then reconfigure)";
    }

    static void need(const std::string& flavour) {
        const std::string tool = flavour == "openmpi" ? "mpirun.openmpi" : "mpiexec.mpich";
        if (run_shell("command -v " + tool).exit_code != 0) {
            GTEST_SKIP() << tool << " not installed";
        }
        const fs::path plugin =
            fs::path(DLTRAIN_BINARY).parent_path() / ("libdltrain-mpi-" + flavour + ".so");
        if (!fs::exists(plugin)) {
            GTEST_SKIP() << plugin << " not built";
        }
    }

    fs::path config(int batch, int iters, int snapshot = 0, const std::string& name = "lenet") {
        return dl_test::lenet_config(m_dir.path(), batch, iters, snapshot, name);
    }
};

TEST_F(DataParallel, RanksMatchOneRankOfTheGlobalBatchAndRepeatBitForBit) {
    need("openmpi");
    const int steps = 5;
    const auto one = config(64, steps, 0, "one");
    const auto per2 = config(32, steps, 0, "two");
    const auto per4 = config(16, steps, 0, "four");
    const fs::path ref = m_dir.path() / "ref";
    const auto single = run_shell(dl_test::lenet_train(one, ref));
    ASSERT_EQ(single.exit_code, 0) << single.output;
    const auto reference = dl_test::weights(one, dl_test::checkpoint(ref, steps));

    const fs::path a = m_dir.path() / "a";
    const auto two = run_shell(launcher("openmpi", 2) + dl_test::lenet_train(per2, a));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    // One writer: one start line, one final line, metrics of the global batch.
    const auto lines = dl_test::metrics(a);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                            [](const auto& l) { return l["type"] == "start"; }),
              1);
    EXPECT_EQ(lines.front()["ranks"], 2);
    EXPECT_EQ(lines.front()["global_batch_size"], 64);
    const auto train_line = std::find_if(lines.begin(), lines.end(),
                                         [](const auto& l) { return l["type"] == "train"; });
    ASSERT_NE(train_line, lines.end());
    EXPECT_TRUE(train_line->contains("allreduce_ms")) << train_line->dump();
    EXPECT_EQ(lines.back()["status"], "completed");
    dl_test::expect_equivalent(dl_test::weights(per2, dl_test::checkpoint(a, steps)), reference,
                               "2 ranks x 32 (Open MPI)");
    // The loss reported is the global batch's (the ranks' mean), the one rank of 64 reports.
    const auto one_rank = dl_test::losses(dl_test::metrics(ref));
    const auto two_ranks = dl_test::losses(lines);
    ASSERT_EQ(one_rank.size(), static_cast<std::size_t>(steps));
    ASSERT_EQ(two_ranks.size(), one_rank.size());
    for (std::size_t i = 0; i < one_rank.size(); ++i) {
        EXPECT_NEAR(two_ranks[i], one_rank[i], 1e-5 * one_rank[i]) << "step " << i;
    }

    const fs::path b = m_dir.path() / "b";
    ASSERT_EQ(run_shell(launcher("openmpi", 2) + dl_test::lenet_train(per2, b)).exit_code, 0);
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(a, steps)) ==
                dl_test::read_file(dl_test::checkpoint(b, steps)))
        << "two 2-rank runs differ";

    const fs::path c = m_dir.path() / "c";
    const auto four = run_shell(launcher("openmpi", 4) + dl_test::lenet_train(per4, c));
    ASSERT_EQ(four.exit_code, 0) << four.output;
    dl_test::expect_equivalent(dl_test::weights(per4, dl_test::checkpoint(c, steps)), reference,
                               "4 ranks x 16 (Open MPI)");
}

// The sum overlaps the backward pass in buckets (DLTRAIN_BUCKET_MB): cut by layer order alone,
// and summed element by element in rank order, so the cut changes when sums start, never a bit
// of the result. 10 KiB cuts LeNet into 4 buckets (ip2 | ip1 | conv2 | conv1); 0 is one.
TEST_F(DataParallel, SeveralBucketsGiveTheOneBucketWeightsBitForBit) {
    need("openmpi");
    const int steps = 4;
    const auto per2 = config(32, steps, 0, "two");
    const fs::path one = m_dir.path() / "one_bucket";
    const auto whole = run_shell("DLTRAIN_BUCKET_MB=0 " + launcher("openmpi", 2) +
                                 dl_test::lenet_train(per2, one));
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    EXPECT_EQ(dl_test::metrics(one).front()["buckets"], 1);
    const fs::path a = m_dir.path() / "a";
    const auto cut = run_shell("DLTRAIN_BUCKET_MB=0.01 " + launcher("openmpi", 2) +
                               dl_test::lenet_train(per2, a));
    ASSERT_EQ(cut.exit_code, 0) << cut.output;
    const auto lines = dl_test::metrics(a);
    EXPECT_EQ(lines.front()["buckets"], 4) << lines.front().dump();
    const auto train_line = std::find_if(lines.begin(), lines.end(),
                                         [](const auto& l) { return l["type"] == "train"; });
    ASSERT_NE(train_line, lines.end());
    EXPECT_TRUE(train_line->contains("allreduce_wait_ms")) << train_line->dump();
    EXPECT_TRUE(lines.back().contains("allreduce_wait_s")) << lines.back().dump();
    EXPECT_LE(lines.back()["allreduce_wait_s"].get<double>(),
              lines.back()["allreduce_s"].get<double>() + 1e-6)
        << lines.back().dump();
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(one, steps)) ==
                dl_test::read_file(dl_test::checkpoint(a, steps)))
        << "4 buckets and 1 bucket give different weights";
    const fs::path b = m_dir.path() / "b";
    ASSERT_EQ(run_shell("DLTRAIN_BUCKET_MB=0.01 " + launcher("openmpi", 2) +
                        dl_test::lenet_train(per2, b))
                  .exit_code,
              0);
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(a, steps)) ==
                dl_test::read_file(dl_test::checkpoint(b, steps)))
        << "two 4-bucket runs differ";
    // A progress thread moves the sums during the layers: when they complete changes, their
    // bits do not, under Open MPI or MPICH.
    for (const std::string flavour : {"openmpi", "mpich"}) {
        if (run_shell("command -v " +
                      std::string(flavour == "openmpi" ? "mpirun.openmpi" : "mpiexec.mpich"))
                .exit_code != 0) {
            continue;
        }
        const fs::path threaded = m_dir.path() / ("thread_" + flavour);
        const auto run = run_shell("DLTRAIN_MPI_PROGRESS=thread DLTRAIN_BUCKET_MB=0.01 " +
                                   launcher(flavour, 2) + dl_test::lenet_train(per2, threaded));
        ASSERT_EQ(run.exit_code, 0) << run.output;
        EXPECT_EQ(run.output.find("warning"), std::string::npos) << run.output;
        EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(one, steps)) ==
                    dl_test::read_file(dl_test::checkpoint(threaded, steps)))
            << "4 buckets with a progress thread (" << flavour << ") differ from 1 bucket";
    }
    // The library's own sum, bucket by bucket, still trains (not to the bit: its algorithm).
    const fs::path lib = m_dir.path() / "library";
    const auto library = run_shell("DLTRAIN_ALLREDUCE=library DLTRAIN_BUCKET_MB=0.01 " +
                                   launcher("openmpi", 2) + dl_test::lenet_train(per2, lib));
    ASSERT_EQ(library.exit_code, 0) << library.output;
    dl_test::expect_equivalent(dl_test::weights(per2, dl_test::checkpoint(lib, steps)),
                               dl_test::weights(per2, dl_test::checkpoint(a, steps)),
                               "4 buckets through MPI_Iallreduce", false);
}

TEST_F(DataParallel, ABadBucketSizeIsRefusedBeforeAnythingIsWritten) {
    const auto per2 = config(32, 2);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell("DLTRAIN_BUCKET_MB=big " + dl_test::lenet_train(per2, run));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("DLTRAIN_BUCKET_MB='big'"), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(run)) << result.output;
}

// A set whose every sample is one image with one label (tests/engine's tiny net, 8x8): ranks
// that drew the same dropout masks would compute the same gradients, and two ranks would then
// train exactly as one.
fs::path constant_workspace(const fs::path& dir, int max_iter) {
    fs::create_directories(dir);
    for (const auto& prefix : {std::string("train"), std::string("test")}) {
        std::string images;
        std::string labels;
        const std::uint32_t count = 32;
        dl_test::put_be32(images, 0x00000803);
        dl_test::put_be32(images, count);
        dl_test::put_be32(images, 8);
        dl_test::put_be32(images, 8);
        dl_test::put_be32(labels, 0x00000801);
        dl_test::put_be32(labels, count);
        for (std::uint32_t i = 0; i < count; ++i) {
            labels.push_back(1);
            for (int p = 0; p < 64; ++p) {
                images.push_back(static_cast<char>(p * 3));
            }
        }
        std::ofstream(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary) << images;
        std::ofstream(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary) << labels;
    }
    fs::path config = dir / "tiny.yaml";
    std::ofstream(config) << dl_test::tiny_net_yaml(max_iter);
    return config;
}

std::string tiny_train(const fs::path& config, const fs::path& run, const std::string& extra = "") {
    return std::string(DLTRAIN_BINARY) + " train --device cpu --threads 1 --deadline none " +
           "--config " + config.string() + " --run-dir " + run.string() + " --data-dir " +
           config.parent_path().string() + " " + extra;
}

// Each rank draws its own dropout masks (a stream of (seed, rank, iteration)): on a set of one
// repeated sample, 2 ranks of batch 8 must not train exactly as 1 rank of batch 8, which they
// did when every rank drew rank 0's masks. Two 2-rank runs, and a resumed one, stay identical.
TEST_F(DataParallel, RanksDrawTheirOwnDropoutMasksAndStillRepeatAndResume) {
    need("openmpi");
    const int steps = 4;
    const auto tiny = constant_workspace(m_dir.path() / "data", steps);
    const fs::path one = m_dir.path() / "one";
    const auto single = run_shell(tiny_train(tiny, one));
    ASSERT_EQ(single.exit_code, 0) << single.output;
    const fs::path a = m_dir.path() / "a";
    const auto two = run_shell(launcher("openmpi", 2) + tiny_train(tiny, a));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    const auto read = [&](const fs::path& run) {
        dl::NetConfig net_config = dl::load_config(tiny);
        for (auto& layer : net_config.layers) {
            if (layer.type == "Data") {
                layer.shape = {1, 8, 8};
            }
        }
        auto backend = dl::make_backend("cpu", 1);
        dl::Net net(net_config, dl::Phase::train, *backend, net_config.solver.random_seed);
        dl::read_checkpoint(dl_test::checkpoint(run, steps), net, nullptr);
        std::vector<float> all;
        for (const auto& param : net.params()) {
            const auto values = param.tensor->read_data();
            all.insert(all.end(), values.begin(), values.end());
        }
        return all;
    };
    const auto by_one = read(one);
    const auto by_two = read(a);
    ASSERT_EQ(by_one.size(), by_two.size());
    EXPECT_NE(by_one, by_two) << "2 ranks on one repeated sample trained exactly as 1 rank: "
                                 "both ranks drew the same dropout masks";
    EXPECT_TRUE(
        std::all_of(by_two.begin(), by_two.end(), [](float v) { return std::isfinite(v); }));

    const fs::path b = m_dir.path() / "b";
    ASSERT_EQ(run_shell(launcher("openmpi", 2) + tiny_train(tiny, b)).exit_code, 0);
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(a, steps)) ==
                dl_test::read_file(dl_test::checkpoint(b, steps)))
        << "two 2-rank runs with dropout differ";

    const fs::path broken = m_dir.path() / "broken";
    ASSERT_EQ(
        run_shell(launcher("openmpi", 2) + tiny_train(tiny, broken, "--max-iter 2")).exit_code, 0);
    const auto resumed =
        run_shell(launcher("openmpi", 2) + tiny_train(tiny, broken, "--resume auto"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(a, steps)) ==
                dl_test::read_file(dl_test::checkpoint(broken, steps)))
        << "the resumed 2-rank run with dropout differs from the unbroken one";
}

// One rank draws its masks as it always did: from the net's own generator, continued from the
// fillers' draws, one draw per mask value (the tiny net's Dropout: 8 x 16 values per step). The
// checkpoint's generator state is recomputed here from that rule.
TEST_F(DataParallel, OneRankKeepsTheNetsContinuousDropoutStream) {
    const int steps = 4;
    const auto tiny = constant_workspace(m_dir.path() / "data", steps);
    const fs::path one = m_dir.path() / "one";
    const auto single = run_shell(tiny_train(tiny, one));
    ASSERT_EQ(single.exit_code, 0) << single.output;
    dl::NetConfig net_config = dl::load_config(tiny);
    for (auto& layer : net_config.layers) {
        if (layer.type == "Data") {
            layer.shape = {1, 8, 8};
        }
    }
    auto backend = dl::make_backend("cpu", 1);
    dl::Net net(net_config, dl::Phase::train, *backend, net_config.solver.random_seed);
    std::mt19937 expected = net.rng();
    expected.discard(static_cast<unsigned long long>(steps) * 8 * 16);
    const dl::TrainingState state =
        dl::read_checkpoint(dl_test::checkpoint(one, steps), net, nullptr);
    std::ostringstream text;
    text << expected;
    EXPECT_EQ(state.rng_state, text.str());
}

TEST_F(DataParallel, MpichRanksMatchOneRankOfTheGlobalBatch) {
    need("mpich");
    const int steps = 5;
    const auto one = config(64, steps, 0, "one");
    const auto per2 = config(32, steps, 0, "two");
    const fs::path ref = m_dir.path() / "ref";
    ASSERT_EQ(run_shell(dl_test::lenet_train(one, ref)).exit_code, 0);
    const fs::path a = m_dir.path() / "a";
    const auto two = run_shell(launcher("mpich", 2) + dl_test::lenet_train(per2, a));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    EXPECT_NE(dl_test::metrics(a).front()["communicator"].get<std::string>().find("MPICH"),
              std::string::npos)
        << dl_test::metrics(a).front().dump();
    dl_test::expect_equivalent(dl_test::weights(per2, dl_test::checkpoint(a, steps)),
                               dl_test::weights(one, dl_test::checkpoint(ref, steps)),
                               "2 ranks x 32 (MPICH)");
}

// MPICH's library under Open MPI's launcher starts each process as a world of its own: two
// separate trainings of one rank on one run directory, unless dltrain compares MPI's world with
// the launcher's and refuses.
TEST_F(DataParallel, AnMpiThatDoesNotKnowTheLauncherIsRefused) {
    need("openmpi");
    need("mpich");
    const auto per2 = config(32, 3);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell("DLTRAIN_MPI=mpich " + launcher("openmpi", 2) +
                                  "-x DLTRAIN_MPI " + dl_test::lenet_train(per2, run));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("the launcher started 2 ranks"), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("sees a world of 1"), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(run / "metrics.jsonl")) << result.output;
}

TEST_F(DataParallel, AResumeAcrossRanksIsBitIdenticalToAnUnbrokenRun) {
    need("openmpi");
    const auto per2 = config(32, 6, 3);
    const fs::path straight = m_dir.path() / "straight";
    const fs::path broken = m_dir.path() / "broken";
    ASSERT_EQ(run_shell(launcher("openmpi", 2) + dl_test::lenet_train(per2, straight)).exit_code,
              0);
    ASSERT_EQ(run_shell(launcher("openmpi", 2) + dl_test::lenet_train(per2, broken, "--max-iter 3"))
                  .exit_code,
              0);
    const auto resumed =
        run_shell(launcher("openmpi", 2) + dl_test::lenet_train(per2, broken, "--resume auto"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
    EXPECT_TRUE(dl_test::read_file(dl_test::checkpoint(straight, 6)) ==
                dl_test::read_file(dl_test::checkpoint(broken, 6)))
        << "the resumed 2-rank run's iteration-6 checkpoint differs";
}

TEST_F(DataParallel, SigtermToOneRankStopsEveryRankAtOneIterationWithExit75) {
    need("openmpi");
    const auto per2 = config(32, 1000000);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(dl_test::around_a_run(
        launcher("openmpi", 2) + dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)),
        m_dir.path(), run, "kill -TERM $r1"));
    EXPECT_NE(result.output.find("exit=75"), std::string::npos) << result.output;
    const auto lines = dl_test::metrics(run);
    ASSERT_FALSE(lines.empty()) << result.output;
    EXPECT_EQ(lines.back()["status"], "checkpointed") << result.output;
    const int iter = lines.back()["iter"].get<int>();
    // Exactly one checkpoint, of the iteration every rank stopped at.
    const auto found = dl::find_latest_checkpoint(run / "checkpoints", [](const std::string&) {});
    ASSERT_TRUE(found) << result.output;
    EXPECT_EQ(*found, dl_test::checkpoint(run, iter));
    EXPECT_FALSE(dl::checkpoint_problem(*found));
    EXPECT_NE(result.output.find("rank 1 of 2: stopped at iteration " + std::to_string(iter)),
              std::string::npos)
        << result.output;
}

// The scheduler's way: every rank gets the signal, each at its own point of a step.
TEST_F(DataParallel, SigtermToEveryRankUnderMpichStopsThemAtOneIterationWithExit75) {
    need("mpich");
    const auto per2 = config(32, 1000000);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(dl_test::around_a_run(
        launcher("mpich", 2) + dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)),
        m_dir.path(), run, "kill -TERM $r0 $r1"));
    EXPECT_NE(result.output.find("exit=75"), std::string::npos) << result.output;
    const auto lines = dl_test::metrics(run);
    ASSERT_FALSE(lines.empty()) << result.output;
    EXPECT_EQ(lines.back()["status"], "checkpointed") << result.output;
    const int iter = lines.back()["iter"].get<int>();
    const auto found = dl::find_latest_checkpoint(run / "checkpoints", [](const std::string&) {});
    ASSERT_TRUE(found) << result.output;
    EXPECT_EQ(*found, dl_test::checkpoint(run, iter));
    for (const char* rank : {"rank 0 of 2", "rank 1 of 2"}) {
        EXPECT_NE(result.output.find(std::string(rank) + ": stopped at iteration " +
                                     std::to_string(iter)),
                  std::string::npos)
            << rank << "\n"
            << result.output;
    }
}

// With two buckets (DLTRAIN_BUCKET_MB=1) and the progress thread: sums in flight during the
// backward pass, tested by a second thread, which may be the one to see the peer gone.
TEST_F(DataParallel, ARankKilledEndsTheOthersNamingItInBoundedTime) {
    need("openmpi");
    const auto per2 = config(32, 1000000);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(
        "DLTRAIN_COLLECTIVE_TIMEOUT=5 DLTRAIN_BUCKET_MB=1 DLTRAIN_MPI_PROGRESS=thread " +
        dl_test::around_a_run(launcher("openmpi", 2) +
                                  dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)),
                              m_dir.path(), run, "kill -KILL $r1"));
    EXPECT_EQ(result.output.find("exit=0\n"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("exit="), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("rank 1"), std::string::npos) << result.output;
    // Not a speed claim: far above the 5 s collective timeout, far below MPIEXEC_TIMEOUT's 120 s
    // (a hang would be ended there, exit non-zero too, and must not pass for the bound).
    EXPECT_LT(dl_test::seconds_after(result.output), 60) << result.output;
}

// A rank that hangs (stopped, an I/O stall, a GPU fault) is no exit for the launcher to see:
// only the others' collective timeout ends the job, and its message names the rank.
TEST_F(DataParallel, ARankThatHangsIsNamedAfterTheCollectiveTimeout) {
    need("openmpi");
    const auto per2 = config(32, 1000000);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(
        "DLTRAIN_COLLECTIVE_TIMEOUT=3 DLTRAIN_BUCKET_MB=1 " +
        dl_test::around_a_run(launcher("openmpi", 2) +
                                  dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)),
                              m_dir.path(), run, "kill -STOP $r1"));
    EXPECT_EQ(result.output.find("exit=0\n"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("rank 0 of 2: the gradient sum of iteration"), std::string::npos)
        << result.output;
    // Two buckets (DLTRAIN_BUCKET_MB=1): the sums started during the backward pass are waited
    // for within the same bound.
    EXPECT_NE(result.output.find(" of 2): no answer from rank 1 within 3 s"), std::string::npos)
        << result.output;
    EXPECT_LT(dl_test::seconds_after(result.output), 60) << result.output;
}

TEST_F(DataParallel, ASecondSetOfRanksOnABusyRunDirectoryIsRefused) {
    need("openmpi");
    const auto per2 = config(32, 1000000);
    const fs::path run = m_dir.path() / "run";
    const auto second = launcher("openmpi", 2) + dl_test::lenet_train(per2, run);
    const auto result = run_shell(dl_test::around_a_run(
        launcher("openmpi", 2) + dl_test::with_pids(m_dir.path(), dl_test::lenet_train(per2, run)),
        m_dir.path(), run,
        second + " > " + (m_dir.path() / "second.txt").string() + " 2>&1; echo second=$?; cat " +
            (m_dir.path() / "second.txt").string() + "; kill -TERM $r0"));
    EXPECT_NE(result.output.find("second=2"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("is in use by another training (pid "), std::string::npos)
        << result.output;
    // The first set was not disturbed: it stopped on its SIGTERM, checkpointed.
    EXPECT_NE(result.output.find("exit=75"), std::string::npos) << result.output;
}

// Each rank of a job reads its own config and command line: a per-rank --solver (or a file
// edited while the ranks started) would train two models summed as one. The start-up agreement
// compares them and names the line that differs.
TEST_F(DataParallel, RanksGivenDifferentSolverSettingsAreRefusedNamingTheLine) {
    need("openmpi");
    const auto per2 = config(32, 4);
    const fs::path run = m_dir.path() / "run";
    const std::string per_rank =
        "sh -c " + dl_test::quoted("extra=; [ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && extra='--solver "
                                   "base_lr=0.02'; exec " +
                                   dl_test::lenet_train(per2, run) + " $extra");
    const auto result = run_shell(launcher("openmpi", 2) + per_rank);
    EXPECT_NE(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("rank 1 was given another config than rank 0"), std::string::npos)
        << result.output;
    // The config as read holds floats (0.01f is 0.00999999978).
    EXPECT_TRUE(
        std::regex_search(result.output, std::regex("is 'base_lr: 0\\.0099+\\d*' on rank 0 and "
                                                    "'base_lr: 0\\.0199+\\d*' here")))
        << result.output;
    EXPECT_FALSE(fs::exists(run / "metrics.jsonl")) << "a step was trained";
    // The same settings on both ranks (given on the command line) train.
    const auto same =
        run_shell(launcher("openmpi", 2) +
                  dl_test::lenet_train(per2, m_dir.path() / "same", "--solver base_lr=0.02"));
    EXPECT_EQ(same.exit_code, 0) << same.output;
}

} // namespace
