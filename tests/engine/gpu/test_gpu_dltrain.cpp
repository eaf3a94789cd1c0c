// dltrain's --device flag and device-query, and the real binary training on the GPU. The Gpu*
// suite has the ctest label `gpu` and skips, saying why, without a usable GPU; the others run
// everywhere and check what a machine without a GPU answers.

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

bool built_with_cuda() {
    const auto names = dl::backend_names();
    return std::find(names.begin(), names.end(), "cuda") != names.end();
}

using dl_test::train_command;

nlohmann::json final_line(const fs::path& run_dir) {
    std::ifstream in(run_dir / "metrics.jsonl");
    std::string line;
    std::string last;
    while (std::getline(in, line)) {
        last = line;
    }
    return last.empty() ? nlohmann::json{} : nlohmann::json::parse(last);
}

TEST(DltrainDevice, DeviceQueryNamesTheCpuAndSaysWhatGpusThereAre) {
    const auto result = run_shell(std::string(DLTRAIN_BINARY) + " device-query");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("CPU: "), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("Default device: " + dl::default_device()), std::string::npos)
        << result.output;
    if (dl::default_device() == "cpu") {
        EXPECT_NE(result.output.find("GPUs: none ("), std::string::npos) << result.output;
    } else {
        for (const char* key : {"Name:", "Compute capability:", "Total global memory:",
                                "CUDA driver:", "CUDA runtime:", "cuDNN:"}) {
            EXPECT_NE(result.output.find(key), std::string::npos) << key << "\n" << result.output;
        }
    }
}

TEST(DltrainDevice, AnUnusableDeviceIsAClearErrorNotACrash) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 5);
    const auto bogus = run_shell(train_command(config, dir.path() / "a", "--device tpu"));
    EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
    EXPECT_NE(bogus.output.find("unknown device 'tpu'"), std::string::npos) << bogus.output;
    // A GPU index past the visible ones, or no CUDA backend at all: exit 1 with the reason.
    const auto missing = run_shell(train_command(config, dir.path() / "b", "--device cuda:99"));
    EXPECT_EQ(missing.exit_code, 1) << missing.output;
    EXPECT_NE(missing.output.find("cuda:99"), std::string::npos) << missing.output;
    EXPECT_FALSE(fs::exists(dir.path() / "a")) << "a bad --device leaves nothing behind";
    EXPECT_FALSE(fs::exists(dir.path() / "b")) << "an unusable GPU leaves nothing behind";
}

// A job that asked for GPUs renders --device cuda (src/dljob/render/job_script.cpp). Landed on a
// node without the NVIDIA driver (here: this machine, with CUDA_VISIBLE_DEVICES naming a GPU as
// a scheduler sets it), dltrain must refuse, naming the driver, and not train on the CPU.
TEST(DltrainDevice, AGpuAskedForWithoutTheDriverIsRefusedNamingIt) {
    std::error_code ec;
    if (fs::exists("/dev/nvidiactl", ec) || fs::exists("/dev/dxg", ec)) {
        GTEST_SKIP() << "this machine has an NVIDIA driver";
    }
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 3);
    for (const char* device : {"cuda", "cuda:0"}) {
        const auto run =
            run_shell("env -u DLTRAIN_CUDA_PLUGIN CUDA_VISIBLE_DEVICES=0 " +
                      train_command(config, dir.path() / "run", std::string("--device ") + device));
        EXPECT_EQ(run.exit_code, 1) << run.output;
        EXPECT_NE(run.output.find("dltrain: error: device '" + std::string(device) + "'"),
                  std::string::npos)
            << run.output;
        EXPECT_NE(run.output.find("no NVIDIA driver"), std::string::npos) << run.output;
        EXPECT_EQ(run.output.find("on cpu"), std::string::npos) << run.output;
        EXPECT_FALSE(fs::exists(dir.path() / "run")) << "a refused GPU leaves nothing behind";
    }
}

// The CUDA backend is a plugin loaded only for a GPU (engine/src/cuda/cuda_plugin.hpp): a CPU run
// never maps cuBLAS or cuDNN, which is what lets it start where they are not installed.
TEST(DltrainCudaPlugin, ACpuRunLoadsNoCudaLibrary) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 3);
    const auto run =
        run_shell("LD_DEBUG=files " + train_command(config, dir.path() / "run", "--device cpu"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (const char* library : {"libdltrain-cuda", "libcudnn", "libcublas", "libcudart"}) {
        EXPECT_EQ(run.output.find(std::string("file=") + library), std::string::npos)
            << library << " was loaded by a CPU run";
    }
}

#ifdef DL_TEST_CUDA_PLUGIN_BUILT
// Where the plugin was built, it loads into dltrain: every engine symbol it needs is exported by
// the executable and every library it needs is found. device-query then reports the CUDA runtime
// and cuDNN versions even on a machine without a GPU.
TEST(DltrainCudaPlugin, TheBuiltPluginLoadsIntoDltrain) {
    const auto query =
        run_shell("env -u DLTRAIN_CUDA_PLUGIN " + std::string(DLTRAIN_BINARY) + " device-query");
    ASSERT_EQ(query.exit_code, 0) << query.output;
    EXPECT_EQ(query.output.find("did not load"), std::string::npos) << query.output;
    EXPECT_NE(query.output.find("CUDA runtime: 1"), std::string::npos) << query.output;
    EXPECT_NE(query.output.find("cuDNN: "), std::string::npos) << query.output;
    EXPECT_TRUE(built_with_cuda()) << "the test binary finds the plugin too";
}
#endif

// A plugin that cannot load (here: not a shared library at all; on a cluster, usually cuDNN not
// on the library path) is a clear device error for a GPU run and a reason in device-query,
// and CPU training is untouched by it.
TEST(DltrainCudaPlugin, APluginThatDoesNotLoadIsAClearErrorOnlyForTheGpu) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 3);
    const auto bogus = dir.path() / "libdltrain-cuda.so";
    std::ofstream(bogus) << "not an ELF file\n";
    const std::string env = "DLTRAIN_CUDA_PLUGIN=" + bogus.string() + " ";

    const auto gpu = run_shell(env + train_command(config, dir.path() / "gpu", "--device cuda"));
    EXPECT_EQ(gpu.exit_code, 1) << gpu.output;
    EXPECT_NE(gpu.output.find("the CUDA backend did not load"), std::string::npos) << gpu.output;
    EXPECT_NE(gpu.output.find(bogus.string()), std::string::npos) << gpu.output;
    EXPECT_FALSE(fs::exists(dir.path() / "gpu")) << "a failed device leaves nothing behind";

    const auto query = run_shell(env + std::string(DLTRAIN_BINARY) + " device-query");
    EXPECT_EQ(query.exit_code, 0) << query.output;
    EXPECT_NE(query.output.find("GPUs: none (the CUDA backend did not load"), std::string::npos)
        << query.output;

    const auto cpu = run_shell(env + train_command(config, dir.path() / "cpu", "--device cpu"));
    EXPECT_EQ(cpu.exit_code, 0) << cpu.output;
    EXPECT_EQ(cpu.output.find("did not load"), std::string::npos) << cpu.output;
}

class GpuDltrain : public ::testing::Test {
protected:
    void SetUp() override {
        if (!built_with_cuda()) {
            GTEST_SKIP() << "no GPU test: dltrain was built without CUDA";
        }
        if (dl::default_device() == "cpu") {
            GTEST_SKIP() << "no GPU test: no GPU visible to the CUDA runtime";
        }
    }
    dl_test::TempDir m_dir;
};

TEST_F(GpuDltrain, TrainsOnTheGpuAndTheCheckpointResumesOnTheCpu) {
    const auto config = dl_test::make_tiny_workspace(m_dir.path(), 100);
    const fs::path run = m_dir.path() / "run";
    const auto trained = run_shell(train_command(config, run, "--device cuda:0"));
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    const auto gpu_final = final_line(run);
    EXPECT_EQ(gpu_final["status"], "completed");
    EXPECT_GT(gpu_final["test_accuracy"].get<double>(), 0.6) << gpu_final.dump();
    std::ifstream start_in(run / "metrics.jsonl");
    std::string start;
    std::getline(start_in, start);
    EXPECT_EQ(nlohmann::json::parse(start)["backend"], "cuda") << start;

    // The GPU's checkpoint goes on on the CPU, and scores the same there.
    const auto resumed = run_shell(
        train_command(config, run, "--device cpu --threads 2 --resume auto --max-iter 120"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(final_line(run)["iter"], 120);
    const fs::path ckpt = run / "checkpoints" / "iter_00000100.ckpt";
    const auto on_cpu = run_shell(std::string(DLTRAIN_BINARY) + " test --device cpu --config " +
                                  config.string() + " --weights " + ckpt.string());
    const auto on_gpu = run_shell(std::string(DLTRAIN_BINARY) + " test --device cuda --config " +
                                  config.string() + " --weights " + ckpt.string());
    ASSERT_EQ(on_cpu.exit_code, 0) << on_cpu.output;
    ASSERT_EQ(on_gpu.exit_code, 0) << on_gpu.output;
    // 30 test images: the two may differ by one image whose top scores tie to float rounding.
    EXPECT_NEAR(nlohmann::json::parse(on_cpu.output)["accuracy"].get<double>(),
                nlohmann::json::parse(on_gpu.output)["accuracy"].get<double>(), 1.0 / 30 + 1e-9);
}

TEST_F(GpuDltrain, GraphReplayTrainsLikeOpByOpLaunches) {
    // Without Dropout (whose GPU masks depend on how the step is launched), the replayed CUDA
    // graph and op-by-op launches (DLTRAIN_GRAPHS=0) compute the same ops on the same data.
    const auto config = dl_test::make_tiny_workspace(m_dir.path(), 60);
    std::string text = dl_test::read_file(config);
    const auto drop = text.find("  - {name: drop1");
    ASSERT_NE(drop, std::string::npos);
    text.erase(drop, text.find('\n', drop) + 1 - drop);
    std::ofstream(config) << text;
    const fs::path graph = m_dir.path() / "graph";
    const fs::path eager = m_dir.path() / "eager";
    const auto a = run_shell(train_command(config, graph, "--device cuda"));
    const auto b = run_shell("DLTRAIN_GRAPHS=0 " + train_command(config, eager, "--device cuda"));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_EQ(a.output.find("warning"), std::string::npos) << "the graph was not used:\n"
                                                           << a.output;
    const auto losses = [](const fs::path& run) {
        std::vector<double> values;
        std::ifstream in(run / "metrics.jsonl");
        std::string line;
        while (std::getline(in, line)) {
            const auto json = nlohmann::json::parse(line);
            if (json["type"] == "train" || json["type"] == "test") {
                values.push_back(json["loss"].get<double>());
            }
        }
        return values;
    };
    const auto with_graph = losses(graph);
    const auto op_by_op = losses(eager);
    ASSERT_EQ(with_graph.size(), op_by_op.size());
    ASSERT_GE(with_graph.size(), 6U);
    for (std::size_t i = 0; i < with_graph.size(); ++i) {
        EXPECT_NEAR(with_graph[i], op_by_op[i], 1e-5 * std::max(1.0, std::fabs(op_by_op[i])))
            << "line " << i;
    }
}

TEST_F(GpuDltrain, TimeReportsEveryLayerOnTheGpu) {
    const auto result =
        run_shell(std::string(DLTRAIN_BINARY) + " time --device cuda --config " + DLJOB_SOURCE_DIR +
                  "/recipes/networks/lenet.yaml" + " --iterations 5");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    for (const char* layer : {"conv1", "pool2", "ip1", "loss", "cuda:0"}) {
        EXPECT_NE(result.output.find(layer), std::string::npos) << layer << "\n" << result.output;
    }
}

} // namespace
