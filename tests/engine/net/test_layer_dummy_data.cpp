// DummyData (net/layers/dummy_data.cpp): its top's shape and filler from Caffe's
// dummy_data_param, the values its filler draws, and its keys through YAML and prototxt.

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numeric>

namespace dl {
namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

constexpr const char* k_net = R"(name: "dummy"
layer { type: 'DummyData' name: 'x' top: 'x'
        dummy_data_param { shape: { dim: 50 dim: 4 dim: 5 } data_filler: { type: 'gaussian' } } }
layer { type: 'DummyData' name: 'twos' top: 'twos'
        dummy_data_param { shape: { dim: 3 dim: 2 } data_filler: { value: 2 } } }
layer { type: 'DummyData' name: 'zeros' top: 'zeros' dummy_data_param { shape: { dim: 4 } } }
layer { type: 'InnerProduct' name: 'ip' bottom: 'x' top: 'ip' inner_product_param { num_output: 3 } }
)";

TEST(DummyDataLayer, FillsItsTopOfItsShapeByItsFiller) {
    const dl_test::TempDir dir;
    const fs::path file = dir.path() / "dummy.prototxt";
    std::ofstream(file) << k_net;
    const auto check = [](const NetConfig& config) {
        ASSERT_EQ(config.layers.size(), 4U);
        EXPECT_EQ(config.layers[0].shape, (std::vector<int>{50, 4, 5}));
        EXPECT_EQ(config.layers[0].data_filler.type, "gaussian");
        EXPECT_EQ(config.layers[1].data_filler.value, 2.0F);
        EXPECT_EQ(config.layers[2].data_filler.type, "constant"); // Caffe's default: zeros
        EXPECT_EQ(config.layers[2].data_filler.value, 0.0F);
    };
    const NetConfig config = load_config(file);
    check(config);
    check(parse_config(to_yaml(config), "round.yaml"));
    const fs::path out = dir.path() / "out.prototxt";
    const auto converted = run_shell(std::string(DLTRAIN_BINARY) + " convert --config " +
                                     file.string() + " -o " + out.string() + " 2>&1");
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
    check(load_config(out));

    const auto backend = make_backend("cpu", 1);
    Net net(config, Phase::test, *backend, 1);
    const std::vector<float> x = net.blob("x")->read_data();
    ASSERT_EQ(x.size(), 1000U);
    const double mean = std::accumulate(x.begin(), x.end(), 0.0) / 1000.0;
    double squares = 0.0;
    for (const float v : x) {
        squares += (v - mean) * (v - mean);
    }
    EXPECT_NEAR(mean, 0.0, 0.15);
    EXPECT_NEAR(std::sqrt(squares / 1000.0), 1.0, 0.15);
    EXPECT_EQ(net.blob("twos")->read_data(), std::vector<float>(6, 2.0F));
    EXPECT_EQ(net.blob("zeros")->read_data(), std::vector<float>(4, 0.0F));
    net.forward(); // the values stay as drawn
    EXPECT_EQ(net.blob("x")->read_data(), x);
    EXPECT_EQ(net.blob("ip")->shape(), (std::vector<int>{50, 3}));
}

} // namespace
} // namespace dl
