// Slice and Reshape (net/layers/slice.cpp, reshape.cpp): Caffe's shapes, the values and
// gradients moved by index, refusals naming the layer, and their keys through YAML and prototxt.

#include "engine_test_support.hpp"
#include "layer_runner.hpp"
#include "net/layer.hpp"
#include "support/run_process.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

namespace dl {
namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

std::vector<float> iota(std::size_t n, float first) {
    std::vector<float> values(n);
    std::iota(values.begin(), values.end(), first);
    return values;
}

struct SliceRun {
    std::vector<std::vector<int>> shapes;
    std::vector<std::vector<float>> tops;
    std::vector<float> dbottom;
};

/// Slices `shape` (values 0, 1, ...) into `tops` tops; top t's gradient is 1000 (t + 1) + i.
SliceRun slice(const std::vector<int>& shape, int axis, const std::vector<int>& points,
               std::size_t tops) {
    LayerConfig config;
    config.name = "slice";
    config.type = "Slice";
    config.bottoms = {"x"};
    config.axis = axis;
    config.slice_point = points;
    for (std::size_t t = 0; t < tops; ++t) {
        config.tops.push_back("t" + std::to_string(t));
    }
    const auto backend = make_backend("cpu", 1);
    Tensor x(shape, backend.get());
    x.write_data(iota(x.count(), 0.0F).data());
    std::vector<std::unique_ptr<Tensor>> owned;
    Blobs top;
    for (std::size_t t = 0; t < tops; ++t) {
        owned.push_back(std::make_unique<Tensor>(backend.get()));
        top.push_back(owned.back().get());
    }
    auto layer = make_layer(config, *backend);
    layer->setup({&x}, top, {"input"});
    layer->forward({&x}, top);
    SliceRun run;
    for (std::size_t t = 0; t < tops; ++t) {
        run.shapes.push_back(top[t]->shape());
        run.tops.push_back(top[t]->read_data());
        top[t]->write_diff(iota(top[t]->count(), 1000.0F * static_cast<float>(t + 1)).data());
    }
    layer->backward(top, {true}, {&x});
    run.dbottom = x.read_diff();
    return run;
}

TEST(SliceLayer, CutsAlongTheAxisAtItsPointsAndGathersTheGradientsBack) {
    // 2 x 5 x 3 at channels 1 and 3: 1, 2 and 2 channels.
    const SliceRun run = slice({2, 5, 3}, 1, {1, 3}, 3);
    EXPECT_EQ(run.shapes, (std::vector<std::vector<int>>{{2, 1, 3}, {2, 2, 3}, {2, 2, 3}}));
    // Value (n, c, k) of the bottom is n * 15 + c * 3 + k.
    EXPECT_EQ(run.tops[0], (std::vector<float>{0, 1, 2, 15, 16, 17}));
    EXPECT_EQ(run.tops[1], (std::vector<float>{3, 4, 5, 6, 7, 8, 18, 19, 20, 21, 22, 23}));
    EXPECT_EQ(run.tops[2], (std::vector<float>{9, 10, 11, 12, 13, 14, 24, 25, 26, 27, 28, 29}));
    EXPECT_EQ(run.dbottom,
              (std::vector<float>{1000, 1001, 1002, 2000, 2001, 2002, 2003, 2004, 2005, 3000,
                                  3001, 3002, 3003, 3004, 3005, 1003, 1004, 1005, 2006, 2007,
                                  2008, 2009, 2010, 2011, 3006, 3007, 3008, 3009, 3010, 3011}));
    // Without points, equal parts: the siamese net's pair of images along the channels.
    const SliceRun halves = slice({3, 2, 2}, 1, {}, 2);
    EXPECT_EQ(halves.shapes, (std::vector<std::vector<int>>{{3, 1, 2}, {3, 1, 2}}));
    EXPECT_EQ(halves.tops[1], (std::vector<float>{2, 3, 6, 7, 10, 11}));
}

TEST(SliceLayer, PointsOrPartsThatDoNotFitAreRefusedNamingThem) {
    for (const auto& [points, tops, says] :
         {std::tuple{std::vector<int>{}, std::size_t{2},
                     "has 5 along axis 1, not a multiple of its 2 tops"},
          std::tuple{std::vector<int>{3, 2}, std::size_t{3}, "slice_point [3, 2] does not cut 5"},
          std::tuple{std::vector<int>{1}, std::size_t{3}, "slice_point [1] does not cut 5"},
          std::tuple{std::vector<int>{5}, std::size_t{2}, "slice_point [5] does not cut 5"}}) {
        try {
            (void)slice({2, 5, 3}, 1, points, tops);
            ADD_FAILURE() << says;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config);
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
        }
    }
}

dl_test::LayerRun reshape(const std::vector<int>& shape, const std::vector<int>& dims, int axis = 0,
                          int num_axes = -1) {
    LayerConfig config;
    config.name = "reshape";
    config.type = "Reshape";
    config.bottoms = {"x"};
    config.tops = {"y"};
    config.shape = dims;
    config.reshape_axis = axis;
    config.num_axes = num_axes;
    const auto backend = make_backend("cpu", 1);
    dl_test::LayerInput input;
    input.bottom_shapes = {shape};
    const std::size_t count =
        std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
    input.bottoms = {iota(count, 1.0F)};
    input.dy = iota(count, -7.0F);
    return dl_test::run_layer(config, *backend, input);
}

TEST(ReshapeLayer, FollowsCaffesDimRulesAndMovesNoValue) {
    EXPECT_EQ(reshape({2, 3, 4}, {0, -1}).top_shape, (std::vector<int>{2, 12}));
    EXPECT_EQ(reshape({2, 3, 4}, {0, 2, 6}).top_shape, (std::vector<int>{2, 2, 6}));
    EXPECT_EQ(reshape({2, 3, 4}, {-1}).top_shape, (std::vector<int>{24}));
    // Only axis 1 replaced, by 3 x 1: the axes after it stay.
    EXPECT_EQ(reshape({2, 3, 4}, {3, 1}, 1, 1).top_shape, (std::vector<int>{2, 3, 1, 4}));
    // axis -1: after the last axis (Caffe's example: a trailing 1).
    EXPECT_EQ(reshape({2, 3}, {1}, -1, 0).top_shape, (std::vector<int>{2, 3, 1}));
    const auto run = reshape({2, 3, 4}, {4, 0, -1});
    EXPECT_EQ(run.top_shape, (std::vector<int>{4, 3, 2}));
    EXPECT_EQ(run.top, iota(24, 1.0F));
    EXPECT_EQ(run.dbottoms.at(0), iota(24, -7.0F));
    for (const auto& [dims, says] :
         {std::pair{std::vector<int>{-1, -1}, "more than one dim is -1"},
          std::pair{std::vector<int>{5, -1}, "24 values are not a multiple of 5"},
          std::pair{std::vector<int>{2, 3, 5}, "24 values do not fill 2x3x5"},
          std::pair{std::vector<int>{0, 0, 0, 0}, "dim 3 is 0"}}) {
        try {
            (void)reshape({2, 3, 4}, dims);
            ADD_FAILURE() << says;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("layer 'reshape'"), std::string::npos) << e.what();
        }
    }
}

TEST(SliceAndReshapeLayers, TheirKeysReadAndWriteInYamlAndPrototxt) {
    const dl_test::TempDir dir;
    const fs::path file = dir.path() / "net.prototxt";
    std::ofstream(file) << R"(name: "pair"
input: "pair_data"
input_shape { dim: 4 dim: 2 dim: 6 dim: 6 }
layer { name: "slice_pair" type: "Slice" bottom: "pair_data" top: "data" top: "data_p"
        slice_param { slice_dim: 1 slice_point: 1 } }
layer { name: "flat" type: "Reshape" bottom: "data" top: "flat"
        reshape_param { shape { dim: 0 dim: -1 } } }
layer { name: "col" type: "Reshape" bottom: "data_p" top: "col"
        reshape_param { shape { dim: 6 dim: 1 } axis: 2 num_axes: 1 } }
)";
    const auto check = [](const NetConfig& config) {
        ASSERT_EQ(config.layers.size(), 4U);
        EXPECT_EQ(config.layers[1].axis, 1);
        EXPECT_EQ(config.layers[1].slice_point, (std::vector<int>{1}));
        EXPECT_EQ(config.layers[2].shape, (std::vector<int>{0, -1}));
        EXPECT_EQ(config.layers[2].reshape_axis, 0); // Caffe's defaults
        EXPECT_EQ(config.layers[2].num_axes, -1);
        EXPECT_EQ(config.layers[3].shape, (std::vector<int>{6, 1}));
        EXPECT_EQ(config.layers[3].reshape_axis, 2);
        EXPECT_EQ(config.layers[3].num_axes, 1);
    };
    check(load_config(file));
    check(parse_config(to_yaml(load_config(file)), "round.yaml"));
    const fs::path out = dir.path() / "out.prototxt";
    const auto converted = run_shell(std::string(DLTRAIN_BINARY) + " convert --config " +
                                     file.string() + " --output " + out.string() + " 2>&1");
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
    check(load_config(out));
    // The shapes through a whole net, as `dltrain check` builds it.
    const auto checked =
        run_shell(std::string(DLTRAIN_BINARY) + " check --config " + file.string() + " 2>&1");
    EXPECT_EQ(checked.exit_code, 0) << checked.output;
}

} // namespace
} // namespace dl
