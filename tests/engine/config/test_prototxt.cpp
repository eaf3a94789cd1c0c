// Caffe's prototxt files (engine/src/config/prototxt_config.cpp): a corpus of Caffe's example
// networks and solvers, written out here from the format's documentation (tests/engine/prototxt),
// read into the same NetConfig as their YAML twins in recipes/networks; malformed files, unknown
// or unsupported fields, values and layer types are refused with file:line and the name.

#include "engine_test_support.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace dl {
namespace {

namespace fs = std::filesystem;

using dl_test::corpus;
fs::path networks() {
    return fs::path(DLJOB_SOURCE_DIR) / "recipes/networks";
}

void expect_filler(const FillerConfig& a, const FillerConfig& b, const std::string& what) {
    EXPECT_EQ(a.type, b.type) << what;
    EXPECT_FLOAT_EQ(a.value, b.value) << what;
    if (a.type == "gaussian") {
        EXPECT_FLOAT_EQ(a.std, b.std) << what;
    }
    EXPECT_EQ(a.variance_norm, b.variance_norm) << what;
}

// Layer by layer, everything but the Data layers' files, order and shape (the prototxt reads an
// LMDB, the YAML twin IDX or CIFAR files).
void expect_same_net(const NetConfig& prototxt, const NetConfig& yaml) {
    ASSERT_EQ(prototxt.layers.size(), yaml.layers.size());
    for (std::size_t i = 0; i < yaml.layers.size(); ++i) {
        const LayerConfig& p = prototxt.layers[i];
        const LayerConfig& y = yaml.layers[i];
        SCOPED_TRACE(y.name);
        EXPECT_EQ(p.name, y.name);
        EXPECT_EQ(p.type, y.type);
        EXPECT_EQ(p.bottoms, y.bottoms);
        EXPECT_EQ(p.tops, y.tops);
        EXPECT_EQ(p.phase, y.phase);
        ASSERT_EQ(p.params.size(), y.params.size());
        for (std::size_t s = 0; s < y.params.size(); ++s) {
            EXPECT_FLOAT_EQ(p.params[s].lr_mult, y.params[s].lr_mult);
            EXPECT_FLOAT_EQ(p.params[s].decay_mult, y.params[s].decay_mult);
        }
        EXPECT_EQ(p.batch_size, y.batch_size);
        EXPECT_FLOAT_EQ(p.scale, y.scale);
        EXPECT_EQ(p.mean_value, y.mean_value);
        EXPECT_EQ(p.num_output, y.num_output);
        EXPECT_EQ(p.kernel_size, y.kernel_size);
        EXPECT_EQ(p.stride, y.stride);
        EXPECT_EQ(p.pad, y.pad);
        EXPECT_EQ(p.group, y.group);
        EXPECT_EQ(p.bias_term, y.bias_term);
        EXPECT_EQ(p.pool, y.pool);
        if (y.type == "Convolution" || y.type == "InnerProduct") {
            expect_filler(p.weight_filler, y.weight_filler, "weight_filler");
            expect_filler(p.bias_filler, y.bias_filler, "bias_filler");
        }
        EXPECT_EQ(p.top_k, y.top_k);
        EXPECT_FLOAT_EQ(p.loss_weight, y.loss_weight);
    }
}

std::vector<std::vector<int>> param_shapes(NetConfig config, const std::vector<int>& image) {
    for (auto& layer : config.layers) {
        if (layer.type == "Data") {
            layer.shape = image;
        }
    }
    const auto backend = make_backend("cpu", 1);
    Net net(config, Phase::train, *backend, 1);
    std::vector<std::vector<int>> shapes;
    for (const Param& param : net.params()) {
        shapes.push_back(param.tensor->shape());
    }
    return shapes;
}

TEST(Prototxt, LeNetSolverAndNetReadAsTheirYamlTwin) {
    const NetConfig prototxt = load_config(corpus() / "lenet_solver.prototxt");
    const NetConfig yaml = load_config(networks() / "lenet.yaml");
    EXPECT_EQ(prototxt.name, "LeNet");
    EXPECT_EQ(prototxt.file, corpus() / "lenet_train_test.prototxt"); // found beside the solver
    expect_same_net(prototxt, yaml);
    EXPECT_EQ(prototxt.layers[0].source, "examples/mnist/mnist_train_lmdb");
    EXPECT_EQ(prototxt.layers[0].label_source, "examples/mnist/mnist_train_lmdb");
    const SolverConfig& p = prototxt.solver;
    const SolverConfig& y = yaml.solver;
    EXPECT_EQ(p.type, y.type);
    EXPECT_FLOAT_EQ(p.base_lr, y.base_lr);
    EXPECT_FLOAT_EQ(p.momentum, y.momentum);
    EXPECT_FLOAT_EQ(p.weight_decay, y.weight_decay);
    EXPECT_EQ(p.lr_policy, y.lr_policy);
    EXPECT_FLOAT_EQ(p.gamma, y.gamma);
    EXPECT_FLOAT_EQ(p.power, y.power);
    EXPECT_EQ(p.max_iter, y.max_iter);
    EXPECT_EQ(p.test_interval, y.test_interval);
    EXPECT_EQ(p.test_iter, y.test_iter);
    EXPECT_EQ(p.display, y.display);
    EXPECT_EQ(p.snapshot, y.snapshot);
    EXPECT_EQ(p.random_seed, y.random_seed);
    EXPECT_EQ(param_shapes(prototxt, {1, 28, 28}), param_shapes(yaml, {1, 28, 28}));
}

TEST(Prototxt, Cifar10QuickReadsAsTheRecipeNetwork) {
    const NetConfig prototxt = load_config(corpus() / "cifar10_quick_solver.prototxt");
    const NetConfig yaml = load_config(networks() / "cifar10_quick.yaml");
    expect_same_net(prototxt, yaml);
    EXPECT_EQ(prototxt.solver.lr_policy, "fixed"); // Caffe's first stage
    EXPECT_EQ(prototxt.solver.max_iter, 4000);
    EXPECT_FLOAT_EQ(prototxt.solver.weight_decay, 0.004F);
    EXPECT_EQ(param_shapes(prototxt, {3, 32, 32}), param_shapes(yaml, {3, 32, 32}));
    // A net file alone gets the solver's defaults.
    const NetConfig net = load_config(corpus() / "cifar10_quick_train_test.prototxt");
    EXPECT_EQ(net.layers.size(), yaml.layers.size());
}

TEST(Prototxt, NewLayersReadWithTheirCaffeFields) {
    dl_test::TempDir dir;
    const fs::path file = dir.path() / "net.prototxt";
    std::ofstream(file) << R"(name: "blocks"
layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 group: 2
                            weight_filler { type: "msra" variance_norm: FAN_OUT } } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv"
        param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 }
        batch_norm_param { use_global_stats: false eps: 0.001 } }
layer { name: "scale" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: true } }
layer { name: "norm" type: "LRN" bottom: "conv" top: "norm"
        lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
layer { name: "side" type: "Convolution" bottom: "data" top: "side"
        convolution_param { num_output: 8 kernel_size: 1 } }
layer { name: "sum" type: "Eltwise" bottom: "norm" bottom: "side" top: "sum"
        eltwise_param { operation: MAX } }
layer { name: "cat" type: "Concat" bottom: "sum" bottom: "data" top: "cat"
        concat_param { axis: 1 } }
layer { name: "tanh" type: "TanH" bottom: "cat" top: "cat" }
layer { name: "ip" type: "InnerProduct" bottom: "cat" top: "ip" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
        loss_weight: 2 }
)";
    const NetConfig config = load_config(file);
    ASSERT_EQ(config.layers.size(), 11U);
    EXPECT_EQ(config.layers[1].group, 2);
    EXPECT_EQ(config.layers[1].weight_filler.type, "msra");
    EXPECT_EQ(config.layers[1].weight_filler.variance_norm, "fan_out");
    EXPECT_EQ(config.layers[2].use_global_stats, std::optional<bool>(false));
    EXPECT_FLOAT_EQ(config.layers[2].eps, 0.001F);
    EXPECT_TRUE(config.layers[3].bias_term);
    EXPECT_EQ(config.layers[4].local_size, 3);
    EXPECT_EQ(config.layers[6].operation, "max");
    EXPECT_FLOAT_EQ(config.layers[10].loss_weight, 2.0F);
    const auto shapes = param_shapes(config, {4, 6, 6});
    EXPECT_EQ(shapes[0], (std::vector<int>{8, 2, 3, 3})); // grouped: 4 input channels / 2
}

// Caffe's V1 layers (`layers { type: CONVOLUTION blobs_lr … }`) read as UpgradeV1Net makes them:
// the same NetConfig as today's spelling of the same net.
TEST(Prototxt, LegacyV1LayersReadAsCaffeUpgradesThem) {
    dl_test::TempDir dir;
    std::ofstream(dir.path() / "v1.prototxt") << R"(name: "old"
layers { name: "mnist" type: DATA top: "data" top: "label"
         data_param { source: "db" batch_size: 4 backend: LMDB }
         transform_param { scale: 0.5 } include: { phase: TRAIN } }
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
         blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
         convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
layers { name: "ip" type: INNER_PRODUCT bottom: "conv" top: "ip"
         inner_product_param { num_output: 3 } }
layers { name: "loss" type: SOFTMAX_LOSS bottom: "ip" bottom: "label" top: "loss"
         loss_weight: 2 }
)";
    std::ofstream(dir.path() / "new.prototxt") << R"(name: "old"
layer { name: "mnist" type: "Data" top: "data" top: "label"
        data_param { source: "db" batch_size: 4 backend: LMDB }
        transform_param { scale: 0.5 } include: { phase: TRAIN } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
        inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
        loss_weight: 2 }
)";
    const NetConfig v1 = load_config(dir.path() / "v1.prototxt");
    const NetConfig today = load_config(dir.path() / "new.prototxt");
    expect_same_net(v1, today);
    EXPECT_EQ(v1.layers[0].phase, std::optional<Phase>(Phase::train));
    EXPECT_FLOAT_EQ(v1.layers[0].scale, 0.5F);
    EXPECT_FLOAT_EQ(v1.layers[1].params[1].lr_mult, 2.0F);
    EXPECT_FLOAT_EQ(v1.layers[1].params[1].decay_mult, 0.0F);
    EXPECT_FLOAT_EQ(v1.layers[4].loss_weight, 2.0F);
}

// Caffe's V0 nets (before May 2014: `layers { layer { type: "conv" kernelsize … } }`) read as
// UpgradeV0Net makes them: a padding layer folded into the convolution it feeds, each V0 field
// in its layer type's parameter; the same NetConfig as today's spelling.
TEST(Prototxt, V0NetsReadAsCaffeUpgradesThem) {
    dl_test::TempDir dir;
    std::ofstream(dir.path() / "v0.prototxt") << R"(name: "CaffeNet-2013"
layers { layer { name: "data" type: "data" source: "db" batchsize: 4 scale: 0.5
                 cropsize: 6 mirror: true }
         top: "data" top: "label" }
layers { layer { name: "conv1" type: "conv" num_output: 4 kernelsize: 3 stride: 1
                 weight_filler { type: "gaussian" std: 0.01 } bias_filler { type: "constant" }
                 blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0 }
         bottom: "data" top: "conv1" }
layers { layer { name: "relu1" type: "relu" } bottom: "conv1" top: "conv1" }
layers { layer { name: "norm1" type: "lrn" local_size: 3 alpha: 0.0001 beta: 0.75 }
         bottom: "conv1" top: "norm1" }
layers { layer { name: "pad2" type: "padding" pad: 1 } bottom: "norm1" top: "pad2" }
layers { layer { name: "conv2" type: "conv" num_output: 4 kernelsize: 3 group: 2 biasterm: false }
         bottom: "pad2" top: "conv2" }
layers { layer { name: "pool2" type: "pool" pool: AVE kernelsize: 2 stride: 2 }
         bottom: "conv2" top: "pool2" }
layers { layer { name: "fc" type: "innerproduct" num_output: 3 } bottom: "pool2" top: "fc" }
layers { layer { name: "drop" type: "dropout" dropout_ratio: 0.25 } bottom: "fc" top: "fc" }
layers { layer { name: "loss" type: "softmax_loss" } bottom: "fc" bottom: "label" }
)";
    std::ofstream(dir.path() / "new.prototxt") << R"(name: "CaffeNet-2013"
layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: "db" batch_size: 4 }
        transform_param { scale: 0.5 crop_size: 6 mirror: true } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        convolution_param { num_output: 4 kernel_size: 3 stride: 1
                            weight_filler { type: "gaussian" std: 0.01 }
                            bias_filler { type: "constant" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"
        lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
layer { name: "conv2" type: "Convolution" bottom: "norm1" top: "conv2"
        convolution_param { num_output: 4 kernel_size: 3 group: 2 bias_term: false pad: 1 } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
        inner_product_param { num_output: 3 } }
layer { name: "drop" type: "Dropout" bottom: "fc" top: "fc" dropout_param { dropout_ratio: 0.25 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" }
)";
    const NetConfig v0 = load_config(dir.path() / "v0.prototxt");
    const NetConfig today = load_config(dir.path() / "new.prototxt");
    expect_same_net(v0, today);
    ASSERT_EQ(v0.layers.size(), 9U); // the padding layer is gone, folded into conv2
    EXPECT_EQ(v0.layers[4].name, "conv2");
    EXPECT_EQ(v0.layers[4].bottoms, std::vector<std::string>{"norm1"});
    EXPECT_EQ(v0.layers[4].pad, 1);
    EXPECT_FALSE(v0.layers[4].bias_term);
    EXPECT_EQ(v0.layers[5].pool, "ave");
    EXPECT_FLOAT_EQ(v0.layers[0].scale, 0.5F);
    EXPECT_TRUE(v0.layers[0].mirror);
    EXPECT_FLOAT_EQ(v0.layers[1].params[1].lr_mult, 2.0F);
    EXPECT_FLOAT_EQ(v0.layers[7].dropout_ratio, 0.25F);
}

// This wave's layers as Caffe spells them: PReLU's prelu_param, Crop's crop_param (an FCN's
// score cropped to its input), HingeLoss's norm; the net builds and its shapes follow.
TEST(Prototxt, PReluCropAndHingeLossReadAsCaffeWritesThem) {
    dl_test::TempDir dir;
    std::ofstream(dir.path() / "net.prototxt") << R"(name: "fcn-ish"
layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: "db" batch_size: 2 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 3 kernel_size: 3 pad: 2 } }
layer { name: "act" type: "PReLU" bottom: "conv" top: "conv"
        prelu_param { channel_shared: true filler { type: "constant" value: 0.1 } } }
layer { name: "fit" type: "Crop" bottom: "conv" bottom: "data" top: "fit"
        crop_param { axis: 2 offset: 1 } }
layer { name: "score" type: "InnerProduct" bottom: "fit" top: "score"
        inner_product_param { num_output: 4 } }
layer { name: "svm" type: "HingeLoss" bottom: "score" bottom: "label" top: "loss"
        hinge_loss_param { norm: L2 } }
)";
    NetConfig config = load_config(dir.path() / "net.prototxt");
    ASSERT_EQ(config.layers.size(), 6U);
    EXPECT_TRUE(config.layers[2].channel_shared);
    EXPECT_FLOAT_EQ(config.layers[2].slope_filler.value, 0.1F);
    EXPECT_EQ(config.layers[3].axis, 2);
    EXPECT_EQ(config.layers[3].crop_offset, std::vector<int>{1});
    EXPECT_EQ(config.layers[5].norm, "l2");
    config.layers[0].shape = {1, 6, 6};
    const auto backend = make_backend("cpu", 1);
    Net net(config, Phase::train, *backend, 1);
    EXPECT_EQ(net.blob("conv")->shape(), (std::vector<int>{2, 3, 8, 8}));
    EXPECT_EQ(net.blob("fit")->shape(), (std::vector<int>{2, 3, 6, 6}));
    EXPECT_EQ(net.params()[2].tensor->read_data(), std::vector<float>{0.1F}); // the slope
    // A crop window past the bottom is refused naming both blobs.
    config.layers[3].crop_offset = {3};
    try {
        Net bad(config, Phase::train, *backend, 1);
        ADD_FAILURE() << "built";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'conv' from layer 'act' (2x3x8x8) cannot be "
                                             "cropped to 'data' from layer 'data'"),
                  std::string::npos)
            << e.what();
    }
}

std::vector<std::string> layers_of(const NetConfig& config, const NetState& state) {
    std::vector<std::string> names;
    for (const LayerConfig& layer : config.layers) {
        if (in_net(layer, state)) {
            names.push_back(layer.name + (layer.type == "Data" ? ":" + layer.source : ""));
        }
    }
    return names;
}

// Caffe's several test nets: a solver's test_state entries (each with its test_iter) pick layers
// by their NetStateRules' stages and levels, as the MNIST autoencoder's do.
TEST(Prototxt, TestStatesPickLayersByStage) {
    dl_test::TempDir dir;
    std::ofstream(dir.path() / "net.prototxt") << R"(name: "staged"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
        data_param { source: "train_db" batch_size: 4 } }
layer { name: "data" type: "Data" top: "data" top: "label"
        include { phase: TEST stage: "on-train" }
        data_param { source: "train_db" batch_size: 2 } }
layer { name: "data" type: "Data" top: "data" top: "label"
        include { phase: TEST stage: "on-test" }
        data_param { source: "test_db" batch_size: 3 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 } }
layer { name: "deep" type: "ReLU" bottom: "ip" top: "ip" include { min_level: 1 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
        exclude { stage: "on-test" } }
)";
    std::ofstream(dir.path() / "solver.prototxt") << R"(net: "net.prototxt"
test_state: { stage: "on-train" }
test_iter: 5
test_state: { stage: "on-test" level: 2 }
test_iter: 7
test_interval: 10
base_lr: 0.1
max_iter: 20
)";
    const NetConfig config = load_config(dir.path() / "solver.prototxt");
    ASSERT_EQ(config.solver.test_nets.size(), 2U);
    EXPECT_EQ(config.solver.test_iter, 5);
    EXPECT_EQ(config.solver.test_nets[1].test_iter, 7);
    EXPECT_EQ(config.solver.test_nets[1].state.level, 2);
    EXPECT_EQ(config.solver.test_nets[1].state.stages, std::vector<std::string>{"on-test"});
    const std::vector<NetState> states = net_states(config.solver);
    ASSERT_EQ(states.size(), 3U);
    EXPECT_EQ(layers_of(config, states[0]),
              (std::vector<std::string>{"data:train_db", "ip", "loss"}));
    EXPECT_EQ(layers_of(config, states[1]),
              (std::vector<std::string>{"data:train_db", "ip", "loss"}));
    EXPECT_EQ(layers_of(config, states[2]),
              (std::vector<std::string>{"data:test_db", "ip", "deep"}));
    // The YAML the run directory keeps says the same: rules, states, each test_iter.
    const NetConfig again = parse_config(to_yaml(config), dir.path() / "again.yaml");
    ASSERT_EQ(again.solver.test_nets.size(), 2U);
    EXPECT_EQ(again.solver.test_nets[1].state.stages, std::vector<std::string>{"on-test"});
    EXPECT_EQ(again.solver.test_nets[1].state.level, 2);
    EXPECT_EQ(again.solver.test_nets[0].test_iter, 5);
    for (const NetState& state : states) {
        EXPECT_EQ(layers_of(again, state), layers_of(config, state));
    }
    // Caffe's train_state: the train net of level 1 holds the level-1 layer too; a TEST one is
    // refused at its line.
    std::ofstream(dir.path() / "deep.prototxt") << R"(net: "net.prototxt"
train_state: { level: 1 stage: "warm" }
base_lr: 0.1
)";
    const NetConfig deep = load_config(dir.path() / "deep.prototxt");
    EXPECT_EQ(deep.solver.train_state.stages, std::vector<std::string>{"warm"});
    EXPECT_EQ(layers_of(deep, net_states(deep.solver)[0]),
              (std::vector<std::string>{"data:train_db", "ip", "deep", "loss"}));
    std::ofstream(dir.path() / "test-train.prototxt") << R"(net: "net.prototxt"
base_lr: 0.1
train_state: { phase: TEST }
)";
    try {
        load_config(dir.path() / "test-train.prototxt");
        ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("test-train.prototxt:3: a train_state in the TEST "
                                             "phase"),
                  std::string::npos)
            << e.what();
    }
    // One test_state short of the test_iter entries: Caffe's rule, refused at the field.
    std::ofstream(dir.path() / "short.prototxt") << R"(net: "net.prototxt"
test_state: { stage: "on-train" }
test_iter: 5
test_iter: 7
base_lr: 0.1
)";
    try {
        load_config(dir.path() / "short.prototxt");
        ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("short.prototxt:2: 1 test_state entries and 2 "
                                             "test_iter"),
                  std::string::npos)
            << e.what();
    }
}

std::string prototxt_error(const std::string& text) {
    dl_test::TempDir dir;
    const fs::path file = dir.path() / "bad.prototxt";
    std::ofstream(file) << text;
    try {
        load_config(file);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::config);
        const std::string message = e.what();
        // The temporary directory's name varies: keep what follows it.
        const auto at = message.find("bad.prototxt");
        return at == std::string::npos ? message : message.substr(at);
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return {};
}

TEST(Prototxt, ErrorsNameTheFileLineAndField) {
    // Malformed: the text parser's own message, with line and column.
    std::string message = prototxt_error("name: \"x\"\nlayer {\n  name: \"a\"\n  type: \n");
    EXPECT_TRUE(message.rfind("bad.prototxt:4:", 0) == 0 ||
                message.rfind("bad.prototxt:5:", 0) == 0)
        << message;
    // A field Caffe does not have.
    message = prototxt_error("layer {\n  name: \"c\"\n  type: \"Convolution\"\n"
                             "  convolution_param {\n    kernal_size: 3\n  }\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:5:", 0), 0U) << message;
    EXPECT_NE(message.find("kernal_size"), std::string::npos) << message;
    // A Caffe field dltrain does not support.
    message = prototxt_error("layer {\n  name: \"c\"\n  type: \"Convolution\"\n"
                             "  convolution_param {\n    num_output: 2\n    kernel_size: 3\n"
                             "    dilation: 2\n  }\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:7:", 0), 0U) << message;
    EXPECT_NE(message.find("'dilation'"), std::string::npos) << message;
    // A Caffe layer type dltrain does not run.
    message = prototxt_error("layer {\n  name: \"a\"\n  type: \"ReLU\"\n}\n"
                             "layer {\n  name: \"up\"\n  type: \"Embed\"\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:5:", 0), 0U) << message;
    EXPECT_NE(message.find("layer 'up': type 'Embed' is not supported"), std::string::npos)
        << message;
    // A data layer dltrain does not read, with its Caffe fields: refused by its type, listing the
    // types dltrain runs (the parser once refused it as a typo: "no field named 'source'").
    message = prototxt_error("layer {\n  name: \"images\"\n  type: \"MemoryData\"\n"
                             "  memory_data_param { batch_size: 4 channels: 1 }\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:1:", 0), 0U) << message;
    EXPECT_NE(message.find("layer 'images': type 'MemoryData' is not supported by dltrain: its "
                           "arrays are handed over by a program that runs the net"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("(supported: Data, ImageData, HDF5Data, "), std::string::npos)
        << message;
    // A legacy V1 layer holding weights: refused at its line, saying where weights go.
    message = prototxt_error("name: \"x\"\nlayers {\n  name: \"c\"\n  type: CONVOLUTION\n"
                             "  blobs { data: 1 }\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:2:", 0), 0U) << message;
    EXPECT_NE(message.find("layer 'c': weights (blobs) inside a prototxt"), std::string::npos)
        << message;
    // V0 layers Caffe's upgrade cannot place either, at the line of their entry: a field the
    // type does not take, a type it has no name for, padding before a ReLU, a bottom from nowhere.
    const std::string v0_data = "input: \"data\"\ninput_dim: 1\ninput_dim: 1\ninput_dim: 8\n"
                                "input_dim: 8\n";
    message = prototxt_error(v0_data + "layers {\n  layer { name: \"conv1\" type: \"conv\" "
                                       "num_output: 2 kernelsize: 3 }\n  bottom: \"data\" "
                                       "top: \"conv1\"\n}\nlayers {\n  layer { name: \"r\" "
                                       "type: \"relu\" dropout_ratio: 0.1 }\n  bottom: "
                                       "\"conv1\" top: \"r\"\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:10:", 0), 0U) << message;
    EXPECT_NE(message.find("layer 'r' (Caffe's V0 format): V0 field 'dropout_ratio' has no "
                           "place in a 'relu' layer"),
              std::string::npos)
        << message;
    message = prototxt_error(v0_data + "layers { layer { name: \"x\" type: \"warp\" } "
                                       "bottom: \"data\" top: \"x\" }\n");
    EXPECT_EQ(message.rfind("bad.prototxt:6:", 0), 0U) << message;
    EXPECT_NE(message.find("V0 layer type 'warp' has no name in Caffe's upgrade"),
              std::string::npos)
        << message;
    message = prototxt_error(v0_data + "layers { layer { name: \"p\" type: \"padding\" pad: 1 } "
                                       "bottom: \"data\" top: \"p\" }\nlayers { layer { name: "
                                       "\"r\" type: \"relu\" } bottom: \"p\" top: \"r\" }\n");
    EXPECT_EQ(message.rfind("bad.prototxt:7:", 0), 0U) << message;
    EXPECT_NE(message.find("padding layer 'p' feeds a 'relu' layer"), std::string::npos) << message;
    message = prototxt_error(v0_data + "layers { layer { name: \"r\" type: \"relu\" } "
                                       "bottom: \"nowhere\" top: \"r\" }\n");
    EXPECT_NE(message.find("bottom 'nowhere' is neither a net input nor an earlier layer's top"),
              std::string::npos)
        << message;
    // A value dltrain does not support, at the line of its field.
    message = prototxt_error("layer {\n  name: \"p\"\n  type: \"Pooling\"\n"
                             "  pooling_param { pool: STOCHASTIC kernel_size: 2 }\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:4:", 0), 0U) << message;
    EXPECT_NE(message.find("STOCHASTIC"), std::string::npos) << message;
    // A parameter block of another layer type.
    message = prototxt_error("layer {\n  name: \"r\"\n  type: \"ReLU\"\n"
                             "  dropout_param { dropout_ratio: 0.1 }\n}\n");
    EXPECT_EQ(message.rfind("bad.prototxt:4:", 0), 0U) << message;
    EXPECT_NE(message.find("'dropout_param' does not apply to type ReLU"), std::string::npos)
        << message;
    // A solver field dltrain does not support, and a solver whose net is missing.
    message = prototxt_error("net: \"n.prototxt\"\nbase_lr: 0.1\niter_size: 2\n");
    EXPECT_EQ(message.rfind("bad.prototxt:3:", 0), 0U) << message;
    EXPECT_NE(message.find("'iter_size'"), std::string::npos) << message;
    message = prototxt_error("net: \"missing.prototxt\"\nbase_lr: 0.1\n");
    EXPECT_EQ(message.rfind("bad.prototxt:1:", 0), 0U) << message;
    EXPECT_NE(message.find("net 'missing.prototxt' not found"), std::string::npos) << message;
    // A solver with a typo is reported as a solver (its error comes later than a net's would).
    message = prototxt_error("net: \"n.prototxt\"\nbase_lr: 0.1\nmomentun: 0.9\n");
    EXPECT_EQ(message.rfind("bad.prototxt:3:", 0), 0U) << message;
    EXPECT_NE(message.find("momentun"), std::string::npos) << message;
}

} // namespace
} // namespace dl
