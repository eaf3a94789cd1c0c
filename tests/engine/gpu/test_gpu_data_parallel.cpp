// The GPU paths of data parallelism (docs/data-parallel.md): NCCL on one rank (a one-rank NCCL
// communicator is valid; its sum is a copy, so the run must train exactly as a run without it),
// and two ranks sharing one GPU through MPI with host staging. The Gpu* suite skips, saying why,
// without a GPU, without NCCL (DLTRAIN_NCCL_LIBRARY or libnccl.so.2 on the library path) or
// without Open MPI; the DataParallelComm tests run everywhere.

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

using dl_test::train_command;

// The tiny net without Dropout: its GPU masks depend on how the step is launched.
fs::path tiny_without_dropout(const fs::path& dir, int iters) {
    const auto config = dl_test::make_tiny_workspace(dir, iters);
    std::string text = dl_test::read_file(config);
    const auto drop = text.find("  - {name: drop1");
    text.erase(drop, text.find('\n', drop) + 1 - drop);
    std::ofstream(config) << text;
    return config;
}

std::vector<float> weights(const fs::path& config, const fs::path& checkpoint) {
    dl::NetConfig net_config = dl::load_config(config);
    for (auto& layer : net_config.layers) {
        layer.shape = {1, 8, 8}; // the tiny workspace's images; no data is read here
    }
    auto backend = dl::make_backend("cpu", 1);
    dl::Net net(net_config, dl::Phase::train, *backend, net_config.solver.random_seed);
    dl::read_checkpoint(checkpoint, net, nullptr);
    std::vector<float> all;
    for (const auto& param : net.params()) {
        const auto values = param.tensor->read_data();
        all.insert(all.end(), values.begin(), values.end());
    }
    return all;
}

// Worst difference relative to the largest weight.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double largest = 0.0;
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
        largest = std::max(largest, static_cast<double>(std::fabs(a[i])));
        worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    return largest > 0 ? worst / largest : worst;
}

TEST(DataParallelComm, AnUnknownOrImpossibleCommunicatorIsAClearError) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 3);
    const auto bogus =
        run_shell("DLTRAIN_COMM=pigeon " + train_command(config, dir.path() / "a", "--device cpu"));
    EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
    EXPECT_NE(bogus.output.find("DLTRAIN_COMM='pigeon': expected mpi, gloo or nccl"),
              std::string::npos)
        << bogus.output;
    // NCCL sums GPU memory: on the CPU (or without a CUDA build) it is refused, not ignored.
    const auto cpu =
        run_shell("DLTRAIN_COMM=nccl " + train_command(config, dir.path() / "b", "--device cpu"));
    EXPECT_EQ(cpu.exit_code, 2) << cpu.output;
    EXPECT_NE(cpu.output.find("DLTRAIN_COMM=nccl sums GPU memory"), std::string::npos)
        << cpu.output;
    EXPECT_FALSE(fs::exists(dir.path() / "b")) << "a refused run leaves nothing behind";
}

class GpuDataParallel : public ::testing::Test {
protected:
    void SetUp() override {
        const auto names = dl::backend_names();
        if (std::find(names.begin(), names.end(), "cuda") == names.end()) {
            GTEST_SKIP() << "no GPU test: dltrain was built without CUDA";
        }
        if (dl::default_device() == "cpu") {
            GTEST_SKIP() << "no GPU test: no GPU visible to the CUDA runtime";
        }
    }
    dl_test::TempDir m_dir;
};

// The 1-rank NCCL parity check: the gradients go through ncclAllReduce on the backend's stream
// (unique id, init, sum, the event watchdog) and the weights come out as without it.
TEST_F(GpuDataParallel, OneRankNcclTrainsAsASingleRankRun) {
    const auto config = tiny_without_dropout(m_dir.path(), 60);
    const fs::path plain = m_dir.path() / "plain";
    const fs::path nccl = m_dir.path() / "nccl";
    const auto a = run_shell(train_command(config, plain, "--device cuda"));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const auto b = run_shell("DLTRAIN_COMM=nccl " + train_command(config, nccl, "--device cuda"));
    if (b.exit_code != 0 && b.output.find("NCCL did not load") != std::string::npos) {
        GTEST_SKIP() << "no NCCL here (set DLTRAIN_NCCL_LIBRARY): " << b.output;
    }
    ASSERT_EQ(b.exit_code, 0) << b.output;
    std::ifstream start_in(nccl / "metrics.jsonl");
    std::string start;
    std::getline(start_in, start);
    EXPECT_NE(start.find("\"communicator\":\"nccl ("), std::string::npos) << start;
    const auto difference =
        relative_difference(weights(config, plain / "checkpoints" / "iter_00000060.ckpt"),
                            weights(config, nccl / "checkpoints" / "iter_00000060.ckpt"));
    std::cout << "1-rank NCCL against no communicator, 60 steps: largest weight difference "
              << difference << " of the largest weight\n";
    EXPECT_LE(difference, 1e-6);
}

// Two ranks on one GPU, each its own CUDA context, the sum through pinned host memory and MPI:
// the same weights as one rank of the global batch, to the CPU's tolerance.
TEST_F(GpuDataParallel, TwoRanksShareOneGpuThroughHostStaging) {
    std::string mpirun;
    for (const char* candidate : {"mpirun.openmpi", "mpirun"}) {
        if (run_shell(std::string(candidate) + " --version 2>&1 | grep -q 'Open MPI'").exit_code ==
            0) {
            mpirun = candidate;
            break;
        }
    }
    if (mpirun.empty()) {
        GTEST_SKIP() << "no Open MPI mpirun here";
    }
    const auto config_one = tiny_without_dropout(m_dir.path(), 30);
    const fs::path one = m_dir.path() / "one";
    {
        std::string text = dl_test::read_file(config_one);
        const auto at = text.find("batch_size: 8");
        text.replace(at, 13, "batch_size: 16");
        std::ofstream(m_dir.path() / "one.yaml") << text;
    }
    const auto a = run_shell(train_command(m_dir.path() / "one.yaml", one, "--device cuda"));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const fs::path two = m_dir.path() / "two";
    const auto b =
        run_shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                  "OMPI_MCA_btl_vader_single_copy_mechanism=none MPIEXEC_TIMEOUT=120 " +
                  dl_test::ompi_session_env() + mpirun + " --oversubscribe --bind-to none -n 2 " +
                  train_command(config_one, two, "--device cuda"));
    if (b.exit_code != 0 && b.output.find("no MPI plugin of dltrain loads") != std::string::npos) {
        GTEST_SKIP() << "the MPI plugin does not load here: " << b.output;
    }
    ASSERT_EQ(b.exit_code, 0) << b.output;
    std::ifstream start_in(two / "metrics.jsonl");
    std::string start;
    std::getline(start_in, start);
    EXPECT_NE(start.find("host-staged"), std::string::npos) << start;
    const auto difference = relative_difference(
        weights(m_dir.path() / "one.yaml", one / "checkpoints" / "iter_00000030.ckpt"),
        weights(config_one, two / "checkpoints" / "iter_00000030.ckpt"));
    std::cout << "2 ranks x 8 on one GPU against 1 x 16, 30 steps: largest weight difference "
              << difference << " of the largest weight\n";
    EXPECT_LE(difference, 1e-4);
    // NCCL cannot share the GPU: refused by name before NCCL starts (every rank, exit 2).
    const auto nccl =
        run_shell("DLTRAIN_COMM=nccl OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                  "OMPI_MCA_btl_vader_single_copy_mechanism=none MPIEXEC_TIMEOUT=120 " +
                  dl_test::ompi_session_env() + mpirun +
                  " -x DLTRAIN_COMM --oversubscribe --bind-to none -n 2 " +
                  train_command(config_one, m_dir.path() / "nccl", "--device cuda"));
    if (nccl.output.find("NCCL did not load") == std::string::npos) {
        EXPECT_NE(nccl.exit_code, 0) << nccl.output;
        EXPECT_NE(nccl.output.find("NCCL needs one GPU per rank"), std::string::npos)
            << nccl.output;
    }
}

} // namespace
