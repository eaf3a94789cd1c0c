// Branched nets (net/splits.cpp): where a blob feeds several layers that backpropagate, the
// gradients of all of them reach it. Checked against central differences of the whole net's
// loss, for the parameters before the branch (whose gradient is the branches' sum).

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace dl {
namespace {

// conv0 feeds two branches and the shortcut of a residual sum; the inception-style concat and
// the residual Eltwise meet at the loss. conv0's output is read by three layers that
// backpropagate, tanh_b's in-place output by two (TanH, not ReLU: no kink for the differences
// to straddle).
constexpr const char* k_branched = R"(name: branched
layers:
  - {name: data, type: Data, top: [data, label], source: none, label_source: none,
     batch_size: 2, shape: [2, 5, 5]}
  - {name: conv0, type: Convolution, bottom: data, top: conv0, num_output: 3, kernel_size: 3,
     pad: 1, weight_filler: {type: gaussian, std: 0.3}, bias_filler: {type: gaussian, std: 0.3}}
  - {name: conv_a, type: Convolution, bottom: conv0, top: conv_a, num_output: 2, kernel_size: 1,
     weight_filler: {type: gaussian, std: 0.3}}
  - {name: conv_b, type: Convolution, bottom: conv0, top: conv_b, num_output: 3, kernel_size: 3,
     pad: 1, weight_filler: {type: gaussian, std: 0.3}}
  - {name: tanh_b, type: TanH, bottom: conv_b, top: conv_b}
  - {name: residual, type: Eltwise, bottom: [conv_b, conv0], top: residual}
  - {name: cat, type: Concat, bottom: [conv_a, residual, conv_b], top: cat}
  - {name: ip, type: InnerProduct, bottom: cat, top: ip, num_output: 3,
     weight_filler: {type: gaussian, std: 0.3}}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}
solver: {base_lr: 0.1}
)";

TEST(BranchedNet, EveryBranchsGradientReachesTheBlobItReads) {
    const NetConfig config = parse_config(k_branched, "branched.yaml");
    const auto backend = make_backend("cpu", 1);
    Net net(config, Phase::train, *backend, 17);
    // A Split after conv0 (three readers) and after tanh_b (two: the Eltwise and the Concat).
    const auto names = net.layer_names();
    EXPECT_EQ(std::count_if(names.begin(), names.end(),
                            [](const std::string& n) { return n.ends_with("_split"); }),
              2)
        << "layers: " << ::testing::PrintToString(names);
    NetInput& input = net.inputs().front();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    std::vector<float> data(input.data->count());
    for (float& v : data) {
        v = uniform(rng);
    }
    input.data->write_data(data.data());
    const std::vector<float> labels = {2.0F, 0.0F};
    input.labels->write_data(labels.data());

    net.forward();
    net.backward();
    for (const Param& param : net.params()) {
        if (param.name != "conv0.0" && param.name != "conv0.1" && param.name != "conv_b.0") {
            continue;
        }
        Tensor& w = *param.tensor;
        const std::vector<float> analytic = w.read_diff();
        std::vector<float> values = w.read_data();
        for (std::size_t i = 0; i < values.size();
             i += std::max<std::size_t>(1, values.size() / 12)) {
            const float saved = values[i];
            const float step = 1e-2F;
            values[i] = saved + step;
            w.write_data(values.data());
            const double plus = net.forward();
            values[i] = saved - step;
            w.write_data(values.data());
            const double minus = net.forward();
            values[i] = saved;
            w.write_data(values.data());
            const double numeric = (plus - minus) / (2.0 * step);
            EXPECT_NEAR(analytic[i], numeric, 2e-3 * std::max(1.0, std::fabs(numeric)))
                << param.name << " element " << i;
        }
    }
}

TEST(BranchedNet, ABranchedNetTrainsWithDltrain) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 20);
    std::string text = dl_test::read_file(config);
    // pool1 feeds ip1 and a second head whose loss joins the first (a GoogLeNet-style auxiliary
    // classifier): both backpropagate into pool1.
    const std::string loss =
        "  - {name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}";
    const auto at = text.find(loss);
    ASSERT_NE(at, std::string::npos);
    text.insert(at + loss.size(),
                "\n  - {name: aux, type: InnerProduct, bottom: pool1, top: aux, num_output: 3}\n"
                "  - {name: aux_loss, type: SoftmaxWithLoss, bottom: [aux, label], top: aux_loss,"
                " loss_weight: 0.3}");
    std::ofstream(dir.path() / "aux.yaml") << text;
    const auto result = dljob::test::run_shell(
        dl_test::train_command(dir.path() / "aux.yaml", dir.path() / "run", "2>&1"));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "run/checkpoints/iter_00000020.ckpt"))
        << result.output;
}

} // namespace
} // namespace dl
