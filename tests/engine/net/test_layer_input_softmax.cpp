// Input and Softmax (net/layers/input.cpp, softmax.cpp), what Caffe's deploy nets begin and end
// with: Softmax's probabilities and their gradient, Input's shape from a prototxt in both
// directions, and BVLC's own deploy nets through `dltrain check`.

#include "engine_test_support.hpp"
#include "layer_runner.hpp"
#include "support/run_process.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace dl {
namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

LayerConfig softmax() {
    LayerConfig config;
    config.name = "prob";
    config.type = "Softmax";
    config.bottoms = {"scores"};
    config.tops = {"prob"};
    return config;
}

TEST(SoftmaxLayer, RowsBecomeProbabilitiesAndTheGradientIsTheSoftmaxJacobians) {
    const auto backend = make_backend("cpu", 1);
    dl_test::LayerInput input;
    input.bottom_shapes = {{3, 4}};
    input.bottoms = {{1, 2, 3, 4, -1, 0, 1, 50, 0.5F, 0.5F, 0.5F, 0.5F}};
    input.dy = {1, 0, 0, 0, 0.5F, -2, 3, 1, 1, 2, 3, 4};
    const auto run = dl_test::run_layer(softmax(), *backend, input);
    ASSERT_EQ(run.top_shape, (std::vector<int>{3, 4}));
    for (int r = 0; r < 3; ++r) {
        double total = 0.0;
        std::vector<double> p(4);
        for (int c = 0; c < 4; ++c) {
            total += std::exp(static_cast<double>(input.bottoms[0][r * 4 + c]) -
                              input.bottoms[0][r * 4 + 3]);
        }
        double dot = 0.0;
        for (int c = 0; c < 4; ++c) {
            p[c] = std::exp(static_cast<double>(input.bottoms[0][r * 4 + c]) -
                            input.bottoms[0][r * 4 + 3]) /
                   total;
            EXPECT_NEAR(run.top[r * 4 + c], p[c], 1e-6) << "row " << r << " class " << c;
            dot += p[c] * input.dy[r * 4 + c];
        }
        for (int c = 0; c < 4; ++c) {
            EXPECT_NEAR(run.dbottoms[0][r * 4 + c], p[c] * (input.dy[r * 4 + c] - dot), 1e-6)
                << "row " << r << " class " << c;
        }
    }
}

TEST(SoftmaxLayer, AMapOfScoresIsASoftmaxAtEveryPixelAndOneAxisIsRefused) {
    // 1 x 3 x 1 x 2: pixel 0 has scores (0, 1, 2), pixel 1 (5, 5, 5).
    const auto backend = make_backend("cpu", 1);
    dl_test::LayerInput input;
    input.bottom_shapes = {{1, 3, 1, 2}};
    input.bottoms = {{0, 5, 1, 5, 2, 5}};
    const auto run = dl_test::run_layer(softmax(), *backend, input);
    const double total = 1.0 + std::exp(1.0) + std::exp(2.0);
    const std::vector<double> want = {
        1.0 / total, 1.0 / 3, std::exp(1.0) / total, 1.0 / 3, std::exp(2.0) / total, 1.0 / 3};
    ASSERT_EQ(run.top.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(run.top[i], want[i], 1e-6) << i;
    }
    input.bottom_shapes = {{6}};
    try {
        dl_test::run_layer(softmax(), *backend, input);
        ADD_FAILURE() << "no error for scores of one axis";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::config);
        EXPECT_NE(std::string(e.what()).find("is 6: Softmax takes N x C scores, or N x C x H x W"),
                  std::string::npos)
            << e.what();
    }
}

// LeNet's deploy net, a small one: Input, the layers, Softmax.
constexpr const char* deploy = R"(name: "LeNet"
layer {
  name: "data"
  type: "Input"
  top: "data"
  input_param { shape: { dim: 64 dim: 1 dim: 28 dim: 28 } }
}
layer {
  name: "ip1"
  type: "InnerProduct"
  bottom: "data"
  top: "ip1"
  inner_product_param { num_output: 10 }
}
layer {
  name: "prob"
  type: "Softmax"
  bottom: "ip1"
  top: "prob"
}
)";

TEST(InputLayer, ItsShapeIsReadAndWrittenAsCaffesInputParam) {
    const dl_test::TempDir dir;
    const fs::path file = dir.path() / "deploy.prototxt";
    std::ofstream(file) << deploy;
    const NetConfig config = load_config(file);
    ASSERT_EQ(config.layers.size(), 3U);
    EXPECT_EQ(config.layers[0].type, "Input");
    EXPECT_EQ(config.layers[0].shape, (std::vector<int>{64, 1, 28, 28}));
    const NetConfig yaml = parse_config(to_yaml(config), "round.yaml");
    EXPECT_EQ(yaml.layers[0].shape, (std::vector<int>{64, 1, 28, 28}));
    const fs::path out = dir.path() / "out.prototxt";
    const auto converted = run_shell(std::string(DLTRAIN_BINARY) + " convert --config " +
                                     file.string() + " --output " + out.string() + " 2>&1");
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
    EXPECT_NE(dl_test::read_file(out).find("input_param {\n    shape {\n      dim: 64\n"),
              std::string::npos)
        << dl_test::read_file(out);
    EXPECT_EQ(load_config(out).layers[0].shape, (std::vector<int>{64, 1, 28, 28}));

    const auto checked =
        run_shell(std::string(DLTRAIN_BINARY) + " check --config " + file.string() + " 2>&1");
    EXPECT_EQ(checked.exit_code, 0) << checked.output;
    // A deploy net has no data to train from.
    const auto trained =
        run_shell(std::string(DLTRAIN_BINARY) + " train --config " + file.string() + " --run-dir " +
                  (dir.path() / "run").string() + " 2>&1");
    EXPECT_EQ(trained.exit_code, 3) << trained.output;
    EXPECT_NE(trained.output.find("no Data layer in the train phase"), std::string::npos)
        << trained.output;
}

// Caffe's older net-level form, as the model zoo's older deploy files have it: the same net.
TEST(InputLayer, TheNetLevelInputFormsAreInputLayers) {
    const dl_test::TempDir dir;
    const std::string layers =
        std::string(deploy).substr(std::string(deploy).find("layer {\n  name: \"ip1\""));
    for (const char* inputs :
         {"input: \"data\"\ninput_dim: 64\ninput_dim: 1\ninput_dim: 28\ninput_dim: 28\n",
          "input: \"data\"\ninput_shape { dim: 64 dim: 1 dim: 28 dim: 28 }\n"}) {
        const fs::path file = dir.path() / "old.prototxt";
        std::ofstream(file) << "name: \"LeNet\"\n" << inputs << layers;
        const NetConfig config = load_config(file);
        ASSERT_EQ(config.layers.size(), 3U) << inputs;
        EXPECT_EQ(config.layers[0].type, "Input");
        EXPECT_EQ(config.layers[0].tops, (std::vector<std::string>{"data"}));
        EXPECT_EQ(config.layers[0].shape, (std::vector<int>{64, 1, 28, 28}));
        const auto checked =
            run_shell(std::string(DLTRAIN_BINARY) + " check --config " + file.string() + " 2>&1");
        EXPECT_EQ(checked.exit_code, 0) << checked.output;
    }
    const fs::path three = dir.path() / "three.prototxt";
    std::ofstream(three) << "input: \"data\"\ninput_dim: 64\ninput_dim: 1\ninput_dim: 28\n"
                         << layers;
    try {
        load_config(three);
        ADD_FAILURE() << "no error for three input_dim";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(three.string() + ":1: 1 input(s) need 4 input_dim, "
                                                              "and the net gives 3"),
                  std::string::npos)
            << e.what();
    }
}

TEST(InputLayer, TwoShapesOrNoneAreRefusedAtTheirLine) {
    const dl_test::TempDir dir;
    std::string two = deploy;
    const std::string shape = "shape: { dim: 64 dim: 1 dim: 28 dim: 28 }";
    two.replace(two.find(shape), shape.size(), shape + " " + shape);
    std::string none = deploy;
    none.replace(none.find("input_param { " + shape + " }"),
                 ("input_param { " + shape + " }").size(), "");
    for (const auto& [name, text, says] : {std::tuple{"two", two, "2 shapes; dltrain takes one"},
                                           std::tuple{"none", none, "needs its top's shape"}}) {
        const fs::path file = dir.path() / (std::string(name) + ".prototxt");
        std::ofstream(file) << text;
        try {
            load_config(file);
            ADD_FAILURE() << "no error for " << name;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config);
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(file.string() + ":"), std::string::npos)
                << e.what();
        }
    }
}

} // namespace
} // namespace dl
