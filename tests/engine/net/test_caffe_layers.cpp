// The Caffe layers beyond LeNet inside the YAML format and a net: their keys, the errors for bad
// values, in-place BatchNorm + Scale (the ResNet idiom), and BatchNorm's running statistics
// (never moved by the solver, read by the test net).

#include "engine_test_support.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace dl {
namespace {

using dl_test::config_error;

// data (2x3x6x6) -> conv -> BatchNorm -> Scale -> LRN, summed (Eltwise) with a 1x1 conv of the
// data, concatenated with the data -> Sigmoid -> ip -> loss; `in_place` names BatchNorm's and
// Scale's tops after their bottoms.
std::string caffe_net(bool in_place) {
    const std::string bn_top = in_place ? "conv" : "bn";
    const std::string scale_top = in_place ? "conv" : "scaled";
    return R"(name: caffe_layers
layers:
  - {name: data, type: Data, top: [data, label], source: none, label_source: none,
     batch_size: 2, shape: [3, 6, 6]}
  - {name: conv, type: Convolution, bottom: data, top: conv, num_output: 4, kernel_size: 3,
     pad: 1, weight_filler: {type: gaussian, std: 0.5}, bias_filler: {type: constant, value: 0.1}}
  - {name: bn, type: BatchNorm, bottom: conv, top: )" +
           bn_top + R"(, eps: 0.001}
  - {name: scale, type: Scale, bottom: )" +
           bn_top + ", top: " + scale_top + R"(, bias_term: true,
     filler: {type: uniform, min: 0.5, max: 1.5}, bias_filler: {type: constant, value: 0.2}}
  - {name: lrn, type: LRN, bottom: )" +
           scale_top + R"(, top: lrn, local_size: 3, alpha: 0.3, beta: 0.75, k: 1.5}
  - {name: side, type: Convolution, bottom: data, top: side, num_output: 4, kernel_size: 1,
     weight_filler: {type: gaussian, std: 0.5}}
  - {name: both, type: Eltwise, bottom: [lrn, side], top: both, operation: sum, coeff: [1, -0.5]}
  - {name: cat, type: Concat, bottom: [both, data], top: cat}
  - {name: sig, type: Sigmoid, bottom: cat, top: cat}
  - {name: ip, type: InnerProduct, bottom: cat, top: ip, num_output: 3,
     weight_filler: {type: gaussian, std: 0.1}}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}
solver: {base_lr: 0.1, momentum: 0.9, weight_decay: 0.01, max_iter: 1}
)";
}

void fill_input(Net& net) {
    NetInput& input = net.inputs().front();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    std::vector<float> images(input.data->count());
    for (float& v : images) {
        v = uniform(rng);
    }
    input.data->write_data(images.data());
    const std::vector<float> labels = {0.0F, 2.0F};
    input.labels->write_data(labels.data());
}

TEST(CaffeLayers, ConfigRoundTripKeepsEveryNewKey) {
    const NetConfig config = parse_config(caffe_net(false), "net.yaml");
    const NetConfig again = parse_config(to_yaml(config), "again.yaml");
    ASSERT_EQ(again.layers.size(), config.layers.size());
    const LayerConfig& bn = again.layers[2];
    EXPECT_FLOAT_EQ(bn.eps, 0.001F);
    EXPECT_FALSE(bn.use_global_stats.has_value());
    const LayerConfig& scale = again.layers[3];
    EXPECT_TRUE(scale.bias_term);
    EXPECT_EQ(scale.filler.type, "uniform");
    EXPECT_FLOAT_EQ(scale.bias_filler.value, 0.2F);
    const LayerConfig& lrn = again.layers[4];
    EXPECT_EQ(lrn.local_size, 3);
    EXPECT_FLOAT_EQ(lrn.alpha, 0.3F);
    EXPECT_FLOAT_EQ(lrn.k, 1.5F);
    const LayerConfig& eltwise = again.layers[6];
    EXPECT_EQ(eltwise.operation, "sum");
    EXPECT_EQ(eltwise.coeff, (std::vector<float>{1.0F, -0.5F}));
    EXPECT_EQ(again.layers[7].axis, 1);
}

TEST(CaffeLayers, ScaleHasNoBiasUnlessAskedLikeCaffe) {
    const NetConfig config =
        parse_config("layers:\n  - {name: s, type: Scale, bottom: x, top: x}\n", "scale.yaml");
    EXPECT_FALSE(config.layers[0].bias_term);
    EXPECT_EQ(config.layers[0].filler.type, "constant");
    EXPECT_FLOAT_EQ(config.layers[0].filler.value, 1.0F);
}

TEST(CaffeLayers, BadValuesAreRefusedWithFileLineAndKey) {
    std::string message = config_error(
        "layers:\n  - {name: e, type: Eltwise, bottom: [a, b], top: c, operation: mean}\n");
    EXPECT_NE(message.find("bad.yaml:2"), std::string::npos) << message;
    EXPECT_NE(message.find("sum, prod, max"), std::string::npos) << message;
    message = config_error("layers:\n  - {name: e, type: Eltwise, bottom: [a, b], top: c,\n"
                           "     coeff: [1, 2, 3]}\n");
    EXPECT_NE(message.find("bad.yaml:3"), std::string::npos) << message;
    EXPECT_NE(message.find("3 values for 2 bottoms"), std::string::npos) << message;
    message = config_error("layers:\n  - {name: e, type: Eltwise, bottom: [a, b], top: c,\n"
                           "     operation: max, coeff: [1, 2]}\n");
    EXPECT_NE(message.find("sum only"), std::string::npos) << message;
    message = config_error("layers:\n  - {name: b, type: BatchNorm, bottom: a, top: a,\n"
                           "     param: [{lr_mult: 1}]}\n");
    EXPECT_NE(message.find("bad.yaml:3"), std::string::npos) << message;
    EXPECT_NE(message.find("running statistics"), std::string::npos) << message;
    message = config_error("layers:\n  - {name: l, type: LRN, bottom: a, top: b, size: 5}\n");
    EXPECT_NE(message.find("'size'"), std::string::npos) << message;
    EXPECT_NE(message.find("local_size"), std::string::npos) << message;
}

TEST(CaffeLayers, ShapeErrorsNameBothLayers) {
    const auto backend = make_backend("cpu", 1);
    const NetConfig config = parse_config(R"(layers:
  - {name: data, type: Data, top: data, source: none, batch_size: 2, shape: [3, 6, 6]}
  - {name: pool, type: Pooling, bottom: data, top: pool, kernel_size: 2, stride: 2}
  - {name: cat, type: Concat, bottom: [data, pool], top: cat}
)",
                                          "cat.yaml");
    try {
        Net net(config, Phase::train, *backend, 1);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("cat.yaml:4"), std::string::npos) << message;
        EXPECT_NE(message.find("'pool' from layer 'pool' is 2x3x3x3"), std::string::npos)
            << message;
        EXPECT_NE(message.find("only axis 1 may differ"), std::string::npos) << message;
    }
}

TEST(CaffeLayers, InPlaceBatchNormAndScaleGiveTheSameGradientsAsSeparateTops) {
    const auto backend = make_backend("cpu", 1);
    std::vector<std::vector<float>> gradients[2];
    float losses[2] = {};
    for (const bool in_place : {false, true}) {
        const NetConfig config = parse_config(caffe_net(in_place), "net.yaml");
        Net net(config, Phase::train, *backend, 1);
        fill_input(net);
        losses[in_place ? 1 : 0] = net.forward();
        net.backward();
        for (const Param& param : net.params()) {
            gradients[in_place ? 1 : 0].push_back(param.tensor->read_diff());
        }
    }
    EXPECT_FLOAT_EQ(losses[0], losses[1]);
    ASSERT_EQ(gradients[0].size(), gradients[1].size());
    for (std::size_t p = 0; p < gradients[0].size(); ++p) {
        EXPECT_EQ(gradients[0][p], gradients[1][p]) << "parameter " << p;
    }
}

TEST(CaffeLayers, BatchNormStatisticsAreNotLearnedAndTheTestNetUsesThem) {
    const auto backend = make_backend("cpu", 1);
    const NetConfig config = parse_config(caffe_net(true), "net.yaml");
    Net train(config, Phase::train, *backend, 1);
    Net test(config, Phase::test, *backend, 1, &train);
    std::vector<const Param*> stats;
    for (const Param& param : train.params()) {
        if (param.name.rfind("bn.", 0) == 0) {
            EXPECT_EQ(param.spec.lr_mult, 0.0F) << param.name;
            EXPECT_EQ(param.spec.decay_mult, 0.0F) << param.name;
            stats.push_back(&param);
        }
    }
    ASSERT_EQ(stats.size(), 3U);
    Solver solver(config.solver, train, *backend);
    fill_input(train);
    train.forward();
    train.backward();
    const std::vector<float> after_forward = stats[0]->tensor->read_data();
    EXPECT_NE(after_forward, std::vector<float>(4, 0.0F)); // the batch mean was added
    EXPECT_EQ(stats[2]->tensor->read_data(), std::vector<float>{1.0F});
    solver.apply_update();
    // Weight decay and momentum would move them if the solver saw them as weights.
    EXPECT_EQ(stats[0]->tensor->read_data(), after_forward);
    EXPECT_EQ(stats[2]->tensor->read_data(), std::vector<float>{1.0F});

    // The test net normalises with the running statistics and leaves them as they are.
    fill_input(test);
    const float first = test.forward();
    EXPECT_EQ(stats[2]->tensor->read_data(), std::vector<float>{1.0F}); // not updated by test
    EXPECT_EQ(test.forward(), first);
}

} // namespace
} // namespace dl
