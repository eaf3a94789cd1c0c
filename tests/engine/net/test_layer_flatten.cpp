// Flatten (net/layers/flatten.cpp): its shapes, values and gradients, its keys in both formats,
// and a net with it trains exactly as the same net without (InnerProduct flattens by itself).

#include "engine_test_support.hpp"
#include "layer_runner.hpp"
#include "support/run_process.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

namespace dl {
namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

LayerConfig flatten(int axis, int end_axis) {
    LayerConfig config;
    config.name = "flat";
    config.type = "Flatten";
    config.bottoms = {"x"};
    config.tops = {"flat"};
    config.axis = axis;
    config.end_axis = end_axis;
    return config;
}

dl_test::LayerRun run(const LayerConfig& config, const std::vector<int>& shape) {
    const auto backend = make_backend("cpu", 1);
    dl_test::LayerInput input;
    input.bottom_shapes = {shape};
    const std::size_t count =
        std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
    input.bottoms = {std::vector<float>(count)};
    std::iota(input.bottoms[0].begin(), input.bottoms[0].end(), 1.0F);
    input.dy.resize(count);
    std::iota(input.dy.begin(), input.dy.end(), -5.0F);
    return dl_test::run_layer(config, *backend, input);
}

TEST(FlattenLayer, JoinsTheAxesFromAxisThroughEndAxisAndPassesValuesAndGradientsAsTheyAre) {
    const std::vector<int> shape = {2, 3, 4, 5};
    const auto all = run(flatten(1, -1), shape);
    EXPECT_EQ(all.top_shape, (std::vector<int>{2, 60}));
    const auto middle = run(flatten(1, 2), shape);
    EXPECT_EQ(middle.top_shape, (std::vector<int>{2, 12, 5}));
    const auto negative = run(flatten(-3, -2), shape);
    EXPECT_EQ(negative.top_shape, (std::vector<int>{2, 12, 5}));
    const auto last = run(flatten(2, 3), shape);
    EXPECT_EQ(last.top_shape, (std::vector<int>{2, 3, 20}));
    const auto one = run(flatten(0, 0), shape);
    EXPECT_EQ(one.top_shape, shape);
    for (const auto* result : {&all, &middle, &negative, &last, &one}) {
        ASSERT_EQ(result->top.size(), 120U);
        ASSERT_EQ(result->dbottoms.size(), 1U);
        for (std::size_t i = 0; i < 120; ++i) {
            EXPECT_EQ(result->top[i], static_cast<float>(i) + 1.0F);
            EXPECT_EQ(result->dbottoms[0][i], static_cast<float>(i) - 5.0F);
        }
    }
}

TEST(FlattenLayer, AxesThatAreNotTheBottomsOrOutOfOrderAreRefusedNamingThem) {
    for (const auto& [axis, end_axis] : {std::pair{4, -1}, std::pair{2, 1}, std::pair{-5, 1}}) {
        try {
            run(flatten(axis, end_axis), {2, 3, 4, 5});
            ADD_FAILURE() << "no error for axis " << axis << " end_axis " << end_axis;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config);
            EXPECT_NE(std::string(e.what()).find(fmt::format("axis {} through end_axis {} are not "
                                                             "axes of",
                                                             axis, end_axis)),
                      std::string::npos)
                << e.what();
            EXPECT_NE(std::string(e.what()).find("2x3x4x5"), std::string::npos) << e.what();
        }
    }
}

TEST(FlattenLayer, ItsKeysReadAndWriteInYamlAndPrototxt) {
    const dl_test::TempDir dir;
    const fs::path file = dir.path() / "net.prototxt";
    std::ofstream(file) << R"(name: "flat"
layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "flat" type: "Flatten" bottom: "data" top: "flat"
        flatten_param { axis: 2 end_axis: 3 } }
layer { name: "all" type: "Flatten" bottom: "data" top: "all" }
)";
    const NetConfig config = load_config(file);
    ASSERT_EQ(config.layers.size(), 3U);
    EXPECT_EQ(config.layers[1].axis, 2);
    EXPECT_EQ(config.layers[1].end_axis, 3);
    EXPECT_EQ(config.layers[2].axis, 1); // Caffe's defaults
    EXPECT_EQ(config.layers[2].end_axis, -1);
    // The line of the field in messages, as for every layer's keys.
    const fs::path bad = dir.path() / "bad.yaml";
    std::ofstream(bad) << "name: n\nlayers:\n  - {name: f, type: Flatten, bottom: x, top: y,\n"
                          "     end_axis: two}\n";
    try {
        load_config(bad);
        ADD_FAILURE() << "no error for end_axis: two";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("bad.yaml:4:"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("end_axis"), std::string::npos) << e.what();
    }
    // YAML out and back, prototxt out and back: the same keys.
    const NetConfig yaml = parse_config(to_yaml(config), "round.yaml");
    EXPECT_EQ(yaml.layers[1].axis, 2);
    EXPECT_EQ(yaml.layers[1].end_axis, 3);
    const fs::path out = dir.path() / "out.prototxt";
    const auto converted = run_shell(std::string(DLTRAIN_BINARY) + " convert --config " +
                                     file.string() + " --output " + out.string() + " 2>&1");
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
    EXPECT_NE(dl_test::read_file(out).find("flatten_param {\n    axis: 2\n    end_axis: 3\n"),
              std::string::npos)
        << dl_test::read_file(out);
    const NetConfig again = load_config(out);
    EXPECT_EQ(again.layers[1].axis, 2);
    EXPECT_EQ(again.layers[1].end_axis, 3);
}

TEST(FlattenLayer, ANetWithFlattenTrainsBitIdenticallyToTheSameNetWithout) {
    const dl_test::TempDir dir;
    const fs::path plain = dl_test::make_tiny_workspace(dir.path(), 20);
    std::string text = dl_test::read_file(plain);
    const std::string ip1 = "  - {name: ip1, type: InnerProduct, bottom: pool1,";
    const auto at = text.find(ip1);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, ip1.size(),
                 "  - {name: flat, type: Flatten, bottom: pool1, top: flat}\n"
                 "  - {name: ip1, type: InnerProduct, bottom: flat,");
    const fs::path with_flatten = dir.path() / "flat.yaml";
    std::ofstream(with_flatten) << text;
    for (const auto& [config, run_dir] :
         {std::pair{plain, dir.path() / "plain"}, std::pair{with_flatten, dir.path() / "flat"}}) {
        const auto result = run_shell(dl_test::train_command(config, run_dir, "2>&1"));
        ASSERT_EQ(result.exit_code, 0) << result.output;
    }
    const std::string a = dl_test::read_file(dir.path() / "plain/checkpoints/iter_00000020.ckpt");
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a, dl_test::read_file(dir.path() / "flat/checkpoints/iter_00000020.ckpt"));
}

} // namespace
} // namespace dl
