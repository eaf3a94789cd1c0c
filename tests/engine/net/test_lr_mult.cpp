// Caffe's per-parameter lr_mult, as a fine-tuning recipe uses it (the pretrained layers frozen at
// 0, the new classifier at 10): through the YAML `param` list and prototxt `param { lr_mult }`,
// one real SGD step leaves an lr_mult-0 layer unchanged and moves an lr_mult-10 layer 10 times as
// far as lr_mult 1 does. On the CPU, and on the CUDA backend (suite GpuLrMult) where there is one.

#include "engine_test_support.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

namespace dl {
namespace {

namespace fs = std::filesystem;

std::string yaml_net(float first, float second) {
    return fmt::format(R"(name: mult
layers:
  - {{name: in, type: Data, top: [data, label], source: x, label_source: x, batch_size: 4,
     shape: [1, 3, 3]}}
  - {{name: ip1, type: InnerProduct, bottom: data, top: ip1, num_output: 5,
     param: [{{lr_mult: {0}}}, {{lr_mult: {0}}}], weight_filler: {{type: gaussian, std: 0.5}},
     bias_filler: {{type: constant, value: 0.1}}}}
  - {{name: relu, type: ReLU, bottom: ip1, top: ip1}}
  - {{name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 3,
     param: [{{lr_mult: {1}}}, {{lr_mult: {1}}}], weight_filler: {{type: gaussian, std: 0.5}}}}
  - {{name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}}
solver: {{base_lr: 0.1, momentum: 0.9, weight_decay: 0, random_seed: 3}}
)",
                       first, second);
}

std::string prototxt_net(float first, float second) {
    return fmt::format(R"(name: "mult"
layer {{ name: "in" type: "Data" top: "data" top: "label"
  data_param {{ source: "x" batch_size: 4 backend: LMDB }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  param {{ lr_mult: {0} }} param {{ lr_mult: {0} }}
  inner_product_param {{ num_output: 5 weight_filler {{ type: "gaussian" std: 0.5 }}
                        bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  param {{ lr_mult: {1} }} param {{ lr_mult: {1} }}
  inner_product_param {{ num_output: 3 weight_filler {{ type: "gaussian" std: 0.5 }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
)",
                       first, second);
}

/// Every parameter's change in one SGD step (first step: the change is lr x lr_mult x gradient)
/// on a fixed batch, for the net read from `file`.
std::vector<std::vector<float>> one_step(const fs::path& file, const std::string& device) {
    NetConfig config = load_config(file);
    config.layers[0].shape = {1, 3, 3};
    config.solver.base_lr = 0.1F;
    config.solver.momentum = 0.9F;
    config.solver.random_seed = 3;
    const std::unique_ptr<Backend> backend = make_backend(device, 1);
    Net net(config, Phase::train, *backend, config.solver.random_seed);
    Solver solver(config.solver, net, *backend);
    std::vector<float> data(4 * 9);
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = std::sin(static_cast<float>(i) * 0.7F);
    }
    const std::vector<float> labels = {0.0F, 2.0F, 1.0F, 2.0F};
    net.inputs().front().data->write_data(data.data());
    net.inputs().front().labels->write_data(labels.data());
    std::vector<std::vector<float>> before;
    for (const auto& param : net.params()) {
        before.push_back(param.tensor->read_data());
    }
    net.forward();
    net.backward();
    solver.apply_update();
    std::vector<std::vector<float>> change;
    for (std::size_t p = 0; p < net.params().size(); ++p) {
        std::vector<float> after = net.params()[p].tensor->read_data();
        for (std::size_t i = 0; i < after.size(); ++i) {
            after[i] -= before[p][i];
        }
        change.push_back(after);
    }
    return change;
}

void expect_multipliers_apply(const fs::path& dir, const std::string& device) {
    for (const std::string format : {"yaml", "prototxt"}) {
        SCOPED_TRACE(format + " on " + device);
        const auto write = [&](const std::string& name, float first, float second) {
            const fs::path file = dir / (name + "." + format);
            std::ofstream(file) << (format == "yaml" ? yaml_net(first, second)
                                                     : prototxt_net(first, second));
            return file;
        };
        const auto plain = one_step(write("plain", 1.0F, 1.0F), device);
        const auto tuned = one_step(write("tuned", 0.0F, 10.0F), device);
        ASSERT_EQ(plain.size(), 4U); // ip1 weights, bias; ip2 weights, bias
        ASSERT_EQ(tuned.size(), 4U);
        for (std::size_t p = 0; p < 2; ++p) {
            EXPECT_TRUE(
                std::all_of(tuned[p].begin(), tuned[p].end(), [](float d) { return d == 0.0F; }))
                << "ip1 parameter " << p << " moved at lr_mult 0";
            EXPECT_TRUE(
                std::any_of(plain[p].begin(), plain[p].end(), [](float d) { return d != 0.0F; }))
                << "ip1 parameter " << p << " did not move at lr_mult 1";
        }
        for (std::size_t p = 2; p < 4; ++p) {
            double largest = 0.0;
            for (std::size_t i = 0; i < plain[p].size(); ++i) {
                largest = std::max(largest, std::fabs(static_cast<double>(plain[p][i])));
                EXPECT_NEAR(tuned[p][i], 10.0 * plain[p][i], 1e-5 * std::fabs(10.0 * plain[p][i]))
                    << "ip2 parameter " << p << " [" << i << "]";
            }
            EXPECT_GT(largest, 1e-4) << "ip2 parameter " << p << " barely moved";
        }
    }
}

TEST(LrMult, ZeroFreezesALayerAndTenMovesItTenTimesAsFar) {
    dl_test::TempDir dir;
    expect_multipliers_apply(dir.path(), "cpu");
}

TEST(GpuLrMult, ZeroFreezesALayerAndTenMovesItTenTimesAsFar) {
    const auto names = backend_names();
    if (std::find(names.begin(), names.end(), "cuda") == names.end()) {
        GTEST_SKIP() << "no GPU test: dltrain was built without CUDA";
    }
    try {
        make_backend("cuda:0", 1);
    } catch (const Error& e) {
        GTEST_SKIP() << "no GPU test: " << e.what();
    }
    dl_test::TempDir dir;
    expect_multipliers_apply(dir.path(), "cuda:0");
}

} // namespace
} // namespace dl
