// Caffe's LMDB Data sources (data/lmdb_dataset.hpp, data/datum_dataset.hpp): databases written here
// with LMDB's C API and Datums encoded by hand in protobuf's wire format (what
// caffe_pb2.Datum.SerializeToString gives for these fields), read back raw and encoded; damaged
// Datums and databases are clear errors.

#include "data/idx_dataset.hpp"
#include "data/lmdb_dataset.hpp"
#include "datum_support.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/error.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <lmdb.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

using dl_test::datum;
using dl_test::pixels;
using dl_test::put_field;
using dl_test::put_varint;
using dl_test::write_lmdb;

std::string load_error(const fs::path& source) {
    try {
        dl::data::load_idx(source, source);
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::config);
        return e.what();
    }
    ADD_FAILURE() << "no error for " << source;
    return {};
}

class LmdbReader : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;
};

TEST_F(LmdbReader, RawDatumsAreReadInKeyOrderWithLabels) {
    const fs::path db = m_dir.path() / "train_lmdb";
    std::vector<std::string> values;
    for (int i = 0; i < 12; ++i) {
        values.push_back(datum(3, 4, 5, pixels(60, i), i % 10));
    }
    write_lmdb(db, values);
    const dl::data::IdxDataset set = dl::data::load_idx(db, db);
    ASSERT_EQ(set.count, 12U);
    EXPECT_EQ(set.channels, 3);
    EXPECT_EQ(set.height, 4);
    EXPECT_EQ(set.width, 5);
    for (int i = 0; i < 12; ++i) {
        EXPECT_EQ(set.labels[static_cast<std::size_t>(i)], i % 10);
        const std::string expected = pixels(60, i);
        for (std::size_t p = 0; p < 60; ++p) {
            ASSERT_EQ(set.pixels[static_cast<std::size_t>(i) * 60 + p],
                      static_cast<std::uint8_t>(expected[p]))
                << "record " << i << " byte " << p;
        }
    }
    const dl::data::IdxDataset header = dl::data::read_idx_header(db);
    EXPECT_EQ(header.count, 12U);
    EXPECT_EQ(header.channels, 3);
    EXPECT_TRUE(header.pixels.empty());
}

TEST_F(LmdbReader, EncodedDatumsAreDecoded) {
    // convert_imageset --encoded stores the image file itself; a binary PPM here.
    std::string ppm = "P6\n2 2\n255\n";
    const std::string rgb = "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c";
    ppm += rgb;
    const fs::path db = m_dir.path() / "encoded_lmdb";
    write_lmdb(db, {datum(0, 0, 0, ppm, 4, true), datum(0, 0, 0, ppm, 7, true)});
    const dl::data::IdxDataset set = dl::data::load_idx(db, db);
    ASSERT_EQ(set.count, 2U);
    EXPECT_EQ(set.channels, 3);
    EXPECT_EQ(set.height, 2);
    EXPECT_EQ(set.width, 2);
    EXPECT_EQ(set.labels, (std::vector<std::int32_t>{4, 7}));
    // Channel-major and BGR, as Caffe's OpenCV decodes it: the blue plane of the four pixels
    // first.
    EXPECT_EQ(std::vector<std::uint8_t>(set.pixels.begin(), set.pixels.begin() + 12),
              (std::vector<std::uint8_t>{3, 6, 9, 12, 2, 5, 8, 11, 1, 4, 7, 10}));
}

TEST_F(LmdbReader, ADatumOfTheWrongShapeNamesItsRecordAndKey) {
    const fs::path db = m_dir.path() / "mixed_lmdb";
    write_lmdb(db, {datum(1, 4, 4, pixels(16, 0), 1), datum(1, 4, 4, pixels(16, 1), 2),
                    datum(1, 5, 4, pixels(20, 2), 3)});
    const std::string message = load_error(db);
    EXPECT_NE(message.find("record 2 (key '00000002_img')"), std::string::npos) << message;
    EXPECT_NE(message.find("1x5x4 but the first record is 1x4x4"), std::string::npos) << message;
}

TEST_F(LmdbReader, DataShorterThanItsShapeAndTruncatedDatumsAreRefused) {
    const fs::path db = m_dir.path() / "short_lmdb";
    write_lmdb(db, {datum(1, 4, 4, pixels(15, 0), 1)});
    std::string message = load_error(db);
    EXPECT_NE(message.find("15 bytes of data for its shape 1x4x4 (16 expected)"), std::string::npos)
        << message;

    const std::string whole = datum(1, 4, 4, pixels(16, 0), 1);
    const fs::path cut = m_dir.path() / "cut_lmdb";
    write_lmdb(cut, {whole.substr(0, whole.size() - 8)});
    message = load_error(cut);
    EXPECT_NE(message.find("not a Datum (truncated"), std::string::npos) << message;
    EXPECT_NE(message.find("record 0"), std::string::npos) << message;
}

TEST_F(LmdbReader, FloatDatumsShortOfTheirShapeAndForeignLabelSourcesAreRefusedByName) {
    // float_data Datums are read (tests/engine/data/test_leveldb_reader.cpp); one value for two is
    // not.
    std::string floats;
    put_field(floats, 1, 1);
    put_field(floats, 2, 1);
    put_field(floats, 3, 2);
    put_varint(floats, (6U << 3U) | 5U); // float_data: one fixed32
    floats += std::string("\0\0\x80\x3f", 4);
    const fs::path db = m_dir.path() / "float_lmdb";
    write_lmdb(db, {floats});
    std::string message = load_error(db);
    EXPECT_NE(message.find("1 float_data values for its shape 1x1x2 (2 expected)"),
              std::string::npos)
        << message;
    try {
        dl::data::load_idx(db, m_dir.path() / "labels");
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("label_source to the same path"), std::string::npos)
            << e.what();
    }
}

// A data set is held in memory whole: what its records would take is checked against the run's
// memory as they are read (a 948 KB LMDB of PNGs that decode large once grew to 9.5 GB).
TEST_F(LmdbReader, ASetLargerThanTheMemoryBudgetIsRefusedAsItIsRead) {
    const fs::path db = m_dir.path() / "big";
    std::vector<std::string> values;
    for (int i = 0; i < 10; ++i) {
        values.push_back(datum(1, 100, 100, pixels(10000, i), i % 10));
    }
    write_lmdb(db, values);
    const dl::data::DataBudget budget{45000, "--max-memory 45000"};
    try {
        dl::data::load_idx(db, db, budget);
        FAIL() << "a 100,000-byte set was read within a 45,000-byte budget";
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::config);
        const std::string message = e.what();
        EXPECT_NE(message.find("5 records of 1x100x100 so far"), std::string::npos) << message;
        EXPECT_NE(message.find("--max-memory 45000"), std::string::npos) << message;
    }
    EXPECT_EQ(dl::data::load_idx(db, db, {100000, "--max-memory 100000"}).count, 10U);
}

TEST_F(LmdbReader, ACorruptDatabaseIsAClearError) {
    const fs::path db = m_dir.path() / "corrupt_lmdb";
    fs::create_directories(db);
    std::ofstream(db / "data.mdb", std::ios::binary) << std::string(8192, 'x');
    const std::string message = load_error(db);
    EXPECT_NE(message.find("LMDB " + db.string()), std::string::npos) << message;
    EXPECT_NE(message.find("mdb_env_open failed"), std::string::npos) << message;
}

TEST_F(LmdbReader, DltrainTrainsACaffeSolverPrototxtOnLmdbs) {
    // Caffe's workflow end to end: LMDBs of 8x8 grey Datums whose label is a bright quadrant, a
    // net prototxt with the Caffe layers beyond LeNet, and a solver prototxt naming it.
    const auto make = [](int count, int seed) {
        std::vector<std::string> values;
        for (int i = 0; i < count; ++i) {
            const int label = (i * 7 + seed) % 3;
            std::string image;
            for (int p = 0; p < 64; ++p) {
                const int y = p / 8;
                const int x = p % 8;
                const bool bright = (label == 0 && y < 4) || (label == 1 && x < 4) ||
                                    (label == 2 && y >= 4 && x >= 4);
                image.push_back(static_cast<char>((bright ? 150 : 0) + (p * 13 + i) % 50));
            }
            values.push_back(datum(1, 8, 8, image, label));
        }
        return values;
    };
    write_lmdb(m_dir.path() / "train_lmdb", make(60, 0));
    write_lmdb(m_dir.path() / "test_lmdb", make(20, 1));
    std::ofstream(m_dir.path() / "net.prototxt") << R"(name: "tiny"
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TRAIN }
        transform_param { scale: 0.01 mean_value: 60 }
        data_param { source: "train_lmdb" batch_size: 10 backend: LMDB } }
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TEST }
        transform_param { scale: 0.01 mean_value: 60 }
        data_param { source: "test_lmdb" batch_size: 10 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "scale" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: true } }
layer { name: "norm" type: "LRN" bottom: "conv" top: "norm" lrn_param { local_size: 3 } }
layer { name: "side" type: "Convolution" bottom: "data" top: "side"
        convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "xavier" } } }
layer { name: "sum" type: "Eltwise" bottom: "norm" bottom: "side" top: "sum" }
layer { name: "cat" type: "Concat" bottom: "sum" bottom: "data" top: "cat" }
layer { name: "pool" type: "Pooling" bottom: "cat" top: "pool"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy"
        include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
    std::ofstream(m_dir.path() / "solver.prototxt") << R"(net: "net.prototxt"
test_iter: 2
test_interval: 60
base_lr: 0.05
momentum: 0.9
weight_decay: 0.0005
lr_policy: "fixed"
display: 20
max_iter: 60
snapshot_prefix: "examples/tiny"
solver_mode: CPU
)";
    const fs::path run = m_dir.path() / "run";
    const auto result = dljob::test::run_shell(
        std::string(DLTRAIN_BINARY) + " train --device cpu --config " +
        (m_dir.path() / "solver.prototxt").string() + " --data-dir " + m_dir.path().string() +
        " --run-dir " + run.string() + " --threads 1 --deadline none");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(run / "metrics.jsonl");
    nlohmann::json last;
    for (std::string line; std::getline(in, line);) {
        last = nlohmann::json::parse(line);
    }
    ASSERT_EQ(last["type"], "final") << last.dump();
    EXPECT_EQ(last["iter"], 60);
    EXPECT_GT(last["test_accuracy"].get<double>(), 0.8) << last.dump();
}

TEST_F(LmdbReader, LabelsPastTheClassifiersOutputsAreRefusedNamingTheRecord) {
    // A 10-way net on an LMDB whose labels are 200 to 249: the loss would index far past each
    // row of 10 scores (it printed an accuracy, then crashed).
    std::vector<std::string> values;
    for (int i = 0; i < 50; ++i) {
        values.push_back(datum(1, 4, 4, pixels(16, i), 200 + i));
    }
    write_lmdb(m_dir.path() / "lmdb", values);
    std::ofstream(m_dir.path() / "net.prototxt") << R"(name: "wide_labels"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "lmdb" batch_size: 10 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy"
        include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
    std::ofstream(m_dir.path() / "solver.prototxt")
        << "net: \"net.prototxt\"\ntest_iter: 2\ntest_interval: 5\nbase_lr: 0.01\n"
           "max_iter: 5\n";
    const auto result = dljob::test::run_shell(
        "cd " + m_dir.path().string() + " && " + std::string(DLTRAIN_BINARY) +
        " train --device cpu --config " + (m_dir.path() / "solver.prototxt").string() +
        " --run-dir " + (m_dir.path() / "run").string() + " --threads 1 --deadline none");
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_NE(result.output.find("net.prototxt:2: layer 'd': record 0 of "), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("has label 200, but layer 'ip'"), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("has 10 outputs (labels 0 to 9)"), std::string::npos)
        << result.output;
}

TEST_F(LmdbReader, ImageNetsLabelsPast255TrainA1000WayClassifier) {
    // CaffeNet's and AlexNet's 1,000 classes: labels were read as bytes and 569 was refused.
    std::vector<std::string> values;
    for (int i = 0; i < 20; ++i) {
        values.push_back(datum(1, 4, 4, pixels(16, i), 560 + i % 5 * 100 + i));
    }
    write_lmdb(m_dir.path() / "lmdb", values);
    std::ofstream(m_dir.path() / "net.prototxt") << R"(name: "imagenet_labels"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "lmdb" batch_size: 10 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 1000 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
    std::ofstream(m_dir.path() / "solver.prototxt")
        << "net: \"net.prototxt\"\nbase_lr: 0.01\nmax_iter: 4\nsnapshot: 4\n";
    const auto result = dljob::test::run_shell(
        "cd " + m_dir.path().string() + " && " + std::string(DLTRAIN_BINARY) +
        " train --device cpu --config " + (m_dir.path() / "solver.prototxt").string() +
        " --run-dir " + (m_dir.path() / "run").string() + " --threads 1 --deadline none");
    EXPECT_EQ(result.exit_code, 0) << result.output;
    // A label past a 500-way classifier is still refused, naming it. The source 'lmdb' is found
    // from the working directory, as Caffe's tools find it.
    std::string text = dl_test::read_file(m_dir.path() / "net.prototxt");
    text.replace(text.find("num_output: 1000"), 16, "num_output: 500");
    std::ofstream(m_dir.path() / "net.prototxt") << text;
    const auto narrow = dljob::test::run_shell("cd " + m_dir.path().string() + " && " +
                                               std::string(DLTRAIN_BINARY) + " check --config " +
                                               (m_dir.path() / "solver.prototxt").string());
    EXPECT_EQ(narrow.exit_code, 3) << narrow.output;
    EXPECT_NE(narrow.output.find("has label 560, but layer 'ip'"), std::string::npos)
        << narrow.output;
}

TEST_F(LmdbReader, APrototxtsRelativeSourcesAreFoundFromTheWorkingDirectoryAsCaffesTools) {
    write_lmdb(m_dir.path() / "examples/lmdb", {datum(1, 4, 4, pixels(16, 1), 1)});
    fs::create_directories(m_dir.path() / "examples/nets");
    std::ofstream(m_dir.path() / "examples/nets/net.prototxt") << R"(name: "n"
layer { name: "d" type: "Data" top: "data" top: "label"
        data_param { source: "examples/lmdb" batch_size: 1 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
    const std::string check = std::string(DLTRAIN_BINARY) + " check --config ";
    const auto from_root = dljob::test::run_shell("cd " + m_dir.path().string() + " && " + check +
                                                  "examples/nets/net.prototxt 2>&1");
    EXPECT_EQ(from_root.exit_code, 0) << from_root.output;
    EXPECT_NE(from_root.output.find("net.prototxt: ok"), std::string::npos) << from_root.output;
    EXPECT_EQ(from_root.output.find("not checked"), std::string::npos) << from_root.output;
    // From the net's own folder the path doubles, and the message says where it looked and why.
    const fs::path nets = m_dir.path() / "examples/nets";
    const auto from_nets = dljob::test::run_shell(
        "cd " + nets.string() + " && " + std::string(DLTRAIN_BINARY) +
        " train --config net.prototxt --run-dir run --deadline none --solver max_iter=1 2>&1");
    EXPECT_EQ(from_nets.exit_code, 3) << from_nets.output;
    EXPECT_NE(from_nets.output.find("the relative source 'examples/lmdb' was looked for in " +
                                    nets.string() +
                                    ": --data-dir DIR, else the working "
                                    "directory for a Caffe prototxt"),
              std::string::npos)
        << from_nets.output;
}

using dljob::test::run_shell;

/// Caffe's layout: examples/mnist/ holds the corpus's lenet_solver.prototxt and
/// lenet_train_test.prototxt and 28x28 LMDBs at the paths they name.
fs::path caffe_root_with_lenet(const fs::path& root) {
    const fs::path mnist = root / "examples" / "mnist";
    fs::create_directories(mnist);
    const fs::path corpus = fs::path(DLJOB_SOURCE_DIR) / "tests" / "engine" / "prototxt";
    fs::copy_file(corpus / "lenet_solver.prototxt", mnist / "lenet_solver.prototxt");
    fs::copy_file(corpus / "lenet_train_test.prototxt", mnist / "lenet_train_test.prototxt");
    const auto make = [](int count) {
        std::vector<std::string> values;
        for (int i = 0; i < count; ++i) {
            values.push_back(datum(1, 28, 28, pixels(784, i), i % 10));
        }
        return values;
    };
    write_lmdb(mnist / "mnist_train_lmdb", make(40));
    write_lmdb(mnist / "mnist_test_lmdb", make(20));
    return mnist / "lenet_solver.prototxt";
}

std::vector<nlohmann::json> metrics_of(const fs::path& run) {
    std::ifstream in(run / "metrics.jsonl");
    std::vector<nlohmann::json> lines;
    for (std::string line; std::getline(in, line);) {
        lines.push_back(nlohmann::json::parse(line));
    }
    return lines;
}

TEST_F(LmdbReader, TrainTakesCaffesSolverFlagWithItsNetAndOverrides) {
    // `caffe train --solver examples/mnist/lenet_solver.prototxt`, run from Caffe's root as its
    // examples are: the solver's net is a path from there, and so are the net's LMDBs with
    // --data-dir . (dltrain's data paths otherwise start at the net file's directory).
    const fs::path root = m_dir.path() / "caffe";
    caffe_root_with_lenet(root);
    const std::string dltrain = DLTRAIN_BINARY;
    const std::string common = " --device cpu --threads 1 --deadline none --solver max_iter=6 "
                               "--solver test_iter=1 --solver display=3";
    const auto from_root = run_shell(
        "cd " + root.string() + " && " + dltrain +
        " train --solver examples/mnist/lenet_solver.prototxt --data-dir . --run-dir run" + common);
    ASSERT_EQ(from_root.exit_code, 0) << from_root.output;
    const auto lines = metrics_of(root / "run");
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back()["type"], "final") << lines.back().dump();
    EXPECT_EQ(lines.back()["iter"], 6);
    // The solver's own keys reached the run: lr_policy inv with Caffe's gamma and power.
    const std::string resolved = dl_test::read_file(root / "run" / "config.resolved.yaml");
    EXPECT_NE(resolved.find("lr_policy: inv"), std::string::npos) << resolved;
    EXPECT_NE(resolved.find("power: 0.75"), std::string::npos) << resolved;

    // From elsewhere the net is found next to the solver (its file name), and --data-dir says
    // where the LMDB paths start; the same first loss as from Caffe's root.
    const auto elsewhere =
        run_shell("cd " + m_dir.path().string() + " && " + dltrain + " train --solver=" +
                  (root / "examples" / "mnist" / "lenet_solver.prototxt").string() +
                  " --data-dir " + root.string() + " --run-dir run2" + common);
    ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.output;
    const auto first_loss = [](const std::vector<nlohmann::json>& all) {
        for (const auto& line : all) {
            if (line["type"] == "train") {
                return line["loss"].get<double>();
            }
        }
        return -1.0;
    };
    EXPECT_EQ(first_loss(metrics_of(m_dir.path() / "run2")), first_loss(lines));
    EXPECT_GT(first_loss(lines), 0.0);
}

TEST_F(LmdbReader, CaffesOwnSpellingTrainsTestsAndResumes) {
    // The seeds' scripts, with dltrain in place of caffe: gflags' single-dash flags, no run
    // directory, and Caffe's snapshot PREFIX_iter_N.caffemodel as the weights of the next step.
    const fs::path root = m_dir.path() / "caffe";
    caffe_root_with_lenet(root);
    const std::string dltrain = "cd " + root.string() + " && " + std::string(DLTRAIN_BINARY);
    const std::string quiet = " --device cpu --threads 1 --deadline none --solver test_iter=1 "
                              "--solver display=3 2>&1";
    const auto train = run_shell(dltrain +
                                 " train -solver examples/mnist/lenet_solver.prototxt "
                                 "--solver max_iter=6" +
                                 quiet);
    ASSERT_EQ(train.exit_code, 0) << train.output;
    const fs::path mnist = root / "examples" / "mnist";
    EXPECT_TRUE(fs::is_regular_file(mnist / "lenet_iter_6.caffemodel")) << train.output;
    EXPECT_EQ(metrics_of(mnist / "lenet_run").back()["iter"], 6);
    EXPECT_NE(train.output.find("run directory examples/mnist/lenet_run"), std::string::npos)
        << train.output;

    // `caffe test -model M -weights W -iterations N`, on the snapshot Caffe's name gives.
    const auto test =
        run_shell(dltrain + " test -model examples/mnist/lenet_train_test.prototxt "
                            "-weights examples/mnist/lenet_iter_6.caffemodel -iterations 2 "
                            "--device cpu --threads 1 2>&1");
    ASSERT_EQ(test.exit_code, 0) << test.output;
    EXPECT_NE(test.output.find("accuracy"), std::string::npos) << test.output;

    // -snapshot resumes (dltrain's checkpoint: Caffe's .solverstate is its own format), and
    // -flag=value is gflags' other spelling.
    const auto resumed =
        run_shell(dltrain +
                  " train -solver=examples/mnist/lenet_solver.prototxt -snapshot "
                  "examples/mnist/lenet_run/checkpoints/iter_00000006.ckpt --solver max_iter=8" +
                  quiet);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_TRUE(fs::is_regular_file(mnist / "lenet_iter_8.caffemodel")) << resumed.output;

    // -gpu names one GPU; several are data-parallel ranks, said so, with nothing written.
    const auto all = run_shell(dltrain + " train -solver examples/mnist/lenet_solver.prototxt "
                                         "-gpu all 2>&1");
    EXPECT_EQ(all.exit_code, 2) << all.output;
    EXPECT_NE(all.output.find("-gpu all: dltrain takes one GPU per process"), std::string::npos)
        << all.output;
    const auto query = run_shell(dltrain + " device_query -gpu 0 2>&1");
    if (dl_test::why_no_gpu().empty()) {
        EXPECT_EQ(query.exit_code, 0) << query.output;
        EXPECT_NE(query.output.find("GPU 0 (--device cuda:0)"), std::string::npos) << query.output;
    } else {
        EXPECT_EQ(query.exit_code, 1) << query.output;
        EXPECT_NE(query.output.find("dltrain: error: there is no GPU 0"), std::string::npos)
            << query.output;
    }
    EXPECT_EQ(run_shell(dltrain + " device_query 2>&1").exit_code, 0);

    // Caffe's check that snapshots can be written, before anything is.
    fs::remove_all(mnist / "lenet_run");
    const std::string solver = dl_test::read_file(mnist / "lenet_solver.prototxt");
    const auto moved =
        std::regex_replace(solver, std::regex("examples/mnist/lenet\""), "no/such/folder/lenet\"");
    dl_test::write_bytes(mnist / "lenet_solver.prototxt", moved);
    const auto nowhere =
        run_shell(dltrain + " train -solver examples/mnist/lenet_solver.prototxt" + quiet);
    EXPECT_EQ(nowhere.exit_code, 3) << nowhere.output;
    EXPECT_NE(nowhere.output.find("snapshot_prefix 'no/such/folder/lenet': the folder "
                                  "no/such/folder does not exist"),
              std::string::npos)
        << nowhere.output;
    EXPECT_FALSE(fs::exists(root / "no"));
}

TEST_F(LmdbReader, TheSolverFlagRefusesANetTwoConfigsAndNone) {
    const fs::path solver = caffe_root_with_lenet(m_dir.path() / "caffe");
    const fs::path net = solver.parent_path() / "lenet_train_test.prototxt";
    const std::string train = std::string(DLTRAIN_BINARY) + " train --device cpu --run-dir " +
                              (m_dir.path() / "run").string();
    const auto as_net = run_shell(train + " --solver " + net.string());
    EXPECT_EQ(as_net.exit_code, 2) << as_net.output;
    EXPECT_NE(as_net.output.find("--solver " + net.string() +
                                 " is not Caffe's solver prototxt (it names no 'net')"),
              std::string::npos)
        << as_net.output;
    const auto both =
        run_shell(train + " --solver " + solver.string() + " --config " + net.string());
    EXPECT_EQ(both.exit_code, 2) << both.output;
    EXPECT_NE(both.output.find("give one"), std::string::npos) << both.output;
    const auto neither = run_shell(train + " --solver base_lr=0.1");
    EXPECT_EQ(neither.exit_code, 2) << neither.output;
    EXPECT_NE(neither.output.find("--config FILE"), std::string::npos) << neither.output;
    // An override of a prototxt's solver is checked as over a YAML config.
    const auto bad_value =
        run_shell(train + " --solver " + solver.string() + " --solver base_lr=abc");
    EXPECT_EQ(bad_value.exit_code, 3) << bad_value.output;
    EXPECT_NE(bad_value.output.find("key 'base_lr' in solver: 'abc' is not a valid number"),
              std::string::npos)
        << bad_value.output;
    const auto missing = run_shell(train + " --solver " + (m_dir.path() / "no.prototxt").string());
    EXPECT_EQ(missing.exit_code, 3) << missing.output;
    EXPECT_NE(missing.output.find("no.prototxt"), std::string::npos) << missing.output;
    EXPECT_FALSE(fs::exists(m_dir.path() / "run"));
}

} // namespace
