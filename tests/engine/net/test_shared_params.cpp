// Parameters shared by name (Caffe's ParamSpec `name`, the siamese net's two towers): one
// parameter, updated once, whose gradient is the sum of every layer's that uses it. Checked
// against central differences of the whole net's loss.

#include "engine_test_support.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace dl {
namespace {

// Pairs of 2 x 3 x 3 images sliced into two towers of one InnerProduct each, sharing weights
// and bias by name; a ContrastiveLoss on the towers' features against the pair's similarity.
constexpr const char* k_siamese = R"(name: siamese
layers:
  - {name: pairs, type: Data, top: [pairs, sim], source: none, label_source: none,
     batch_size: 4, shape: [2, 3, 3]}
  - {name: slice, type: Slice, bottom: pairs, top: [left, right], slice_point: [1]}
  - {name: tower, type: InnerProduct, bottom: left, top: feat, num_output: 3,
     param: [{lr_mult: 1, name: shared_w}, {lr_mult: 2, name: shared_b}],
     weight_filler: {type: gaussian, std: 0.5}, bias_filler: {type: gaussian, std: 0.5}}
  - {name: tower_p, type: InnerProduct, bottom: right, top: feat_p, num_output: 3,
     param: [{lr_mult: 1, name: shared_w}, {lr_mult: 2, name: shared_b}],
     weight_filler: {type: gaussian, std: 0.5}, bias_filler: {type: gaussian, std: 0.5}}
  - {name: loss, type: ContrastiveLoss, bottom: [feat, feat_p, sim], top: loss, margin: 3}
solver: {base_lr: 0.1}
)";

void fill_inputs(Net& net) {
    NetInput& input = net.inputs().front();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    std::vector<float> data(input.data->count());
    for (float& v : data) {
        v = uniform(rng);
    }
    input.data->write_data(data.data());
    const std::vector<float> similar = {1.0F, 0.0F, 0.0F, 1.0F};
    input.labels->write_data(similar.data());
}

TEST(SharedParams, OneParameterWhoseGradientSumsBothTowers) {
    const NetConfig config = parse_config(k_siamese, "siamese.yaml");
    const auto backend = make_backend("cpu", 1);
    Net net(config, Phase::train, *backend, 17);
    // The second tower's weights are the first's: the solver sees (and updates) them once.
    ASSERT_EQ(net.params().size(), 2U);
    EXPECT_EQ(net.params()[0].name, "tower.0");
    EXPECT_EQ(net.params()[1].name, "tower.1");
    fill_inputs(net);
    net.forward();
    net.backward();
    for (const Param& param : net.params()) {
        Tensor& w = *param.tensor;
        const std::vector<float> analytic = w.read_diff();
        std::vector<float> values = w.read_data();
        double largest = 0.0;
        for (std::size_t i = 0; i < values.size(); ++i) {
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
            largest = std::max(largest, std::fabs(numeric));
            EXPECT_NEAR(analytic[i], numeric, 3e-3 * std::max(1.0, std::fabs(numeric)))
                << param.name << " element " << i;
        }
        // The weights' gradient is the towers' sum; the bias's is zero, as the towers' halves
        // cancel in the features' difference only when both reach the one bias.
        if (param.name == "tower.0") {
            EXPECT_GT(largest, 1e-2) << param.name << ": a gradient of zero checks nothing";
        }
    }
}

TEST(SharedParams, AStepMovesBothTowersAlike) {
    const NetConfig config = parse_config(k_siamese, "siamese.yaml");
    const auto backend = make_backend("cpu", 1);
    Net net(config, Phase::train, *backend, 17);
    Solver solver(config.solver, net, *backend);
    fill_inputs(net);
    const std::vector<float> before = net.params()[0].tensor->read_data();
    net.forward();
    net.backward();
    solver.apply_update();
    EXPECT_NE(net.params()[0].tensor->read_data(), before);
    // Both towers then fed the same images: their features agree only if the updated weights
    // are one set.
    NetInput& input = net.inputs().front();
    std::vector<float> data = input.data->read_data();
    for (std::size_t i = 0; i < data.size(); i += 18) {
        std::copy(data.begin() + static_cast<std::ptrdiff_t>(i),
                  data.begin() + static_cast<std::ptrdiff_t>(i + 9),
                  data.begin() + static_cast<std::ptrdiff_t>(i + 9));
    }
    input.data->write_data(data.data());
    net.forward();
    EXPECT_EQ(net.blob("feat")->read_data(), net.blob("feat_p")->read_data());
}

TEST(SharedParams, ASharedNameWithAnotherShapeNamesBothLayers) {
    std::string text = k_siamese;
    const std::string second = "bottom: right, top: feat_p, num_output: 3";
    text.replace(text.find(second), second.size(), "bottom: right, top: feat_p, num_output: 2");
    const NetConfig config = parse_config(text, "siamese.yaml");
    const auto backend = make_backend("cpu", 1);
    try {
        Net net(config, Phase::train, *backend, 17);
        ADD_FAILURE() << "built";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::config);
        EXPECT_NE(std::string(e.what()).find("layer 'tower_p' (InnerProduct): parameter "
                                             "'shared_w' is 2x9 here but 3x9 in layer 'tower'"),
                  std::string::npos)
            << e.what();
    }
}

} // namespace
} // namespace dl
