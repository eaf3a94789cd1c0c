// A net that learns without labels, as Caffe's mnist_autoencoder does: SigmoidCrossEntropyLoss
// against its own input, with EuclideanLoss of weight 0 beside it (reported, not trained on),
// through the real dltrain, with each adaptive solver.

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

std::string autoencoder_yaml(const std::string& solver) {
    return R"(name: tiny_autoencoder
layers:
  - {name: data, type: Data, top: [data], phase: train, source: train-images-idx3-ubyte,
     batch_size: 8, scale: 0.00390625}
  - {name: data, type: Data, top: [data], phase: test, source: test-images-idx3-ubyte,
     batch_size: 10, scale: 0.00390625}
  - {name: flatdata, type: Flatten, bottom: data, top: flatdata}
  - {name: encode, type: InnerProduct, bottom: data, top: encode, num_output: 6,
     weight_filler: {type: gaussian, std: 0.1}}
  - {name: encodeneuron, type: Sigmoid, bottom: encode, top: encodeneuron}
  - {name: decode, type: InnerProduct, bottom: encodeneuron, top: decode, num_output: 64,
     weight_filler: {type: gaussian, std: 0.1}}
  - {name: loss, type: SigmoidCrossEntropyLoss, bottom: [decode, flatdata],
     top: cross_entropy_loss}
  - {name: decodeneuron, type: Sigmoid, bottom: decode, top: decodeneuron}
  - {name: l2, type: EuclideanLoss, bottom: [decodeneuron, flatdata], top: l2_error,
     loss_weight: 0}
solver:
)" + solver +
           R"(
  lr_policy: fixed
  max_iter: 60
  test_interval: 30
  test_iter: 3
  display: 10
  random_seed: 7
)";
}

std::vector<nlohmann::json> lines_of(const fs::path& run, const std::string& type) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        auto json = nlohmann::json::parse(line);
        if (json["type"] == type) {
            lines.push_back(json);
        }
    }
    return lines;
}

TEST(Autoencoder, LearnsItsInputWithEachAdaptiveSolverAndReportsNoAccuracy) {
    const dl_test::TempDir dir;
    dl_test::write_tiny_dataset(dir.path(), "train", 96, 8, 1);
    dl_test::write_tiny_dataset(dir.path(), "test", 30, 8, 2);
    for (const std::string solver :
         {"  type: AdaGrad\n  base_lr: 0.05", "  type: RMSProp\n  base_lr: 0.01\n  rms_decay: 0.98",
          "  type: AdaDelta\n  base_lr: 1.0\n  momentum: 0.95\n  delta: 0.000001",
          "  type: Nesterov\n  base_lr: 0.1\n  momentum: 0.95"}) {
        SCOPED_TRACE(solver);
        const fs::path config = dir.path() / "autoencoder.yaml";
        std::ofstream(config) << autoencoder_yaml(solver);
        const fs::path run = dir.path() / "run";
        fs::remove_all(run);
        const auto result = run_shell(std::string(DLTRAIN_BINARY) +
                                      " train --device cpu --threads 1 --deadline none --config " +
                                      config.string() + " --run-dir " + run.string() + " 2>&1");
        ASSERT_EQ(result.exit_code, 0) << result.output;
        const auto train = lines_of(run, "train");
        ASSERT_GE(train.size(), 5U);
        // The reported loss is the cross-entropy alone (the L2 error's weight is 0), and it falls.
        EXPECT_LT(train.back()["loss"].get<double>(), train.front()["loss"].get<double>())
            << result.output;
        const auto tests = lines_of(run, "test");
        ASSERT_FALSE(tests.empty());
        EXPECT_TRUE(tests.back()["accuracy"].is_null()) << tests.back().dump();
        EXPECT_GT(tests.back()["loss"].get<double>(), 0.0);
        EXPECT_NE(result.output.find("test loss "), std::string::npos) << result.output;
        EXPECT_EQ(result.output.find("test accuracy"), std::string::npos) << result.output;
    }
}

} // namespace
