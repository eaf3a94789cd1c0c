// dltrain convert, both ways: Caffe's net and solver prototxt (the corpus in tests/engine/prototxt)
// written as Caffe's prototxt again or as YAML read back as the same config; a YAML config's
// fields that Caffe's format cannot say are named, not dropped silently.
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace dl {
namespace {
namespace fs = std::filesystem;
using dljob::test::run_shell;

using dl_test::corpus;

std::string convert(const std::string& arguments) {
    const auto result = run_shell(std::string(DLTRAIN_BINARY) + " convert " + arguments);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output;
}

TEST(PrototxtConvert, CaffesFilesRoundTripThroughBothFormats) {
    dl_test::TempDir dir;
    for (const char* name : {"lenet_solver.prototxt", "cifar10_quick_solver.prototxt"}) {
        SCOPED_TRACE(name);
        const NetConfig original = load_config(corpus() / name);
        const fs::path net = dir.path() / (std::string(name) + ".net.prototxt");
        const fs::path solver = dir.path() / (std::string(name) + ".solver.prototxt");
        convert("--config " + (corpus() / name).string() + " -o " + net.string() +
                " --solver-output " + solver.string());
        EXPECT_EQ(to_yaml(load_config(solver)), to_yaml(original)); // prototxt -> prototxt
        const fs::path yaml = dir.path() / (std::string(name) + ".yaml");
        convert("--config " + (corpus() / name).string() + " -o " + yaml.string());
        EXPECT_EQ(to_yaml(load_config(yaml)), to_yaml(original)); // prototxt -> YAML
    }
}

// Every layer type with its Caffe fields survives prototxt -> prototxt.
TEST(PrototxtConvert, TheNewLayersRoundTrip) {
    dl_test::TempDir dir;
    const fs::path file = dir.path() / "blocks.prototxt";
    std::ofstream(file) << R"(name: "blocks"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
        transform_param { scale: 0.5 mean_value: 10 mean_value: 20 }
        data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 1 group: 2
                            weight_filler { type: "msra" variance_norm: FAN_OUT }
                            bias_filler { type: "constant" value: 0.1 } } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv"
        batch_norm_param { use_global_stats: false eps: 0.001 moving_average_fraction: 0.9 } }
layer { name: "scale" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: true } }
layer { name: "norm" type: "LRN" bottom: "conv" top: "norm" lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 k: 2 } }
layer { name: "pool" type: "Pooling" bottom: "norm" top: "pool" pooling_param { pool: AVE kernel_size: 3 stride: 2 } }
layer { name: "side" type: "Pooling" bottom: "conv" top: "side" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "sum" type: "Eltwise" bottom: "pool" bottom: "side" top: "sum" eltwise_param { operation: SUM coeff: 1 coeff: -1 } }
layer { name: "cat" type: "Concat" bottom: "sum" bottom: "pool" top: "cat" concat_param { axis: 1 } }
layer { name: "ip" type: "InnerProduct" bottom: "cat" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "drop" type: "Dropout" bottom: "ip" top: "ip" dropout_param { dropout_ratio: 0.3 } }
layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label" top: "acc" include { phase: TEST } accuracy_param { top_k: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" loss_weight: 2 }
)";
    const fs::path out = dir.path() / "again.prototxt";
    convert("--config " + file.string() + " -o " + out.string());
    EXPECT_EQ(to_yaml(load_config(out)), to_yaml(load_config(file)));
}

// A Data layer's backend (LEVELDB, also Caffe's default where none is given, or LMDB) is kept
// through YAML and back; which database the source is, is checked when it is read
// (LeveldbReader.DltrainTrainsOnAPrototxtWithBackendLeveldb).
TEST(PrototxtConvert, TheDataBackendSurvivesBothFormats) {
    dl_test::TempDir dir;
    const fs::path file = dir.path() / "backends.prototxt";
    std::ofstream(file) << R"(name: "backends"
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TRAIN }
        data_param { source: "train_leveldb" batch_size: 4 backend: LEVELDB } }
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TEST }
        data_param { source: "test_db" batch_size: 4 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
    const NetConfig original = load_config(file);
    ASSERT_EQ(original.layers.size(), 4U);
    EXPECT_EQ(original.layers[0].backend, "leveldb");
    EXPECT_EQ(original.layers[1].backend, "leveldb"); // Caffe's default
    const fs::path yaml = dir.path() / "backends.yaml";
    convert("--config " + file.string() + " -o " + yaml.string());
    EXPECT_NE(dl_test::read_file(yaml).find("backend: leveldb"), std::string::npos);
    const fs::path again = dir.path() / "again.prototxt";
    convert("--config " + yaml.string() + " -o " + again.string());
    EXPECT_NE(dl_test::read_file(again).find("backend: LEVELDB"), std::string::npos);
    EXPECT_EQ(to_yaml(load_config(again)), to_yaml(original));
    EXPECT_EQ(to_yaml(load_config(yaml)), to_yaml(original));

    // A YAML config may say it too, and only lmdb or leveldb.
    std::ofstream(dir.path() / "bad.yaml") << "layers:\n  - {name: d, type: Data, top: data, "
                                              "source: x, batch_size: 2, backend: rocksdb}\n";
    try {
        (void)load_config(dir.path() / "bad.yaml");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("key 'backend' in layer 'd': unknown value 'rocksdb' "
                                             "(valid: lmdb, leveldb)"),
                  std::string::npos)
            << e.what();
    }
}

TEST(PrototxtConvert, WhatCaffeCannotSayIsNamed) {
    dl_test::TempDir dir;
    const fs::path config = dl_test::make_tiny_workspace(dir.path(), 10, "SGD", true);
    const std::string output =
        convert("--config " + config.string() + " -o " + (dir.path() / "tiny.prototxt").string() +
                " --solver-output " + (dir.path() / "solver.prototxt").string());
    EXPECT_NE(output.find("not in Caffe's format, left out: layer 'data': shuffle"),
              std::string::npos)
        << output;
    EXPECT_NE(output.find("label_source train-labels-idx1-ubyte"), std::string::npos) << output;
    EXPECT_NE(output.find("keep_checkpoints 2"), std::string::npos) << output;
    // The solver names the net beside it, as Caffe resolves it.
    EXPECT_NE(dl_test::read_file(dir.path() / "solver.prototxt").find("net: \"tiny.prototxt\""),
              std::string::npos);
}

} // namespace
} // namespace dl
