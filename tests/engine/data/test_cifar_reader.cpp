// CIFAR-10's binary batches (data/cifar_dataset.hpp) on files the tests write: records in order
// across a glob of files, every length and label checked against the file, and the Data layer's
// mean_value; then dltrain trains a small net on such files.

#include "data/batch_reader.hpp"
#include "data/cifar_dataset.hpp"
#include "data/idx_dataset.hpp"
#include "data/mean_file.hpp"
#include "datum_support.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using dl::data::k_cifar_image;

// Record i: label i % 10, pixel p = (i * 7 + p) % 251 (no two records alike).
std::string records(int first, int count) {
    std::string bytes;
    for (int i = first; i < first + count; ++i) {
        bytes.push_back(static_cast<char>(i % 10));
        for (std::size_t p = 0; p < k_cifar_image; ++p) {
            bytes.push_back(static_cast<char>((static_cast<std::size_t>(i) * 7 + p) % 251));
        }
    }
    return bytes;
}

using dl_test::put_varint;
using dl_test::write_bytes;

// A BlobProto as compute_image_mean writes it: legacy num/channels/height/width and packed
// floats; with `shape_field`, a BlobShape (field 7) and packed doubles (field 8) instead.
std::string blob_proto(const std::vector<int>& dims, const std::vector<float>& values,
                       bool shape_field = false) {
    std::string out;
    std::string payload;
    if (shape_field) {
        std::string packed;
        for (const int d : dims) {
            put_varint(packed, static_cast<std::uint64_t>(d));
        }
        std::string shape;
        put_varint(shape, (1U << 3U) | 2U);
        put_varint(shape, packed.size());
        shape += packed;
        put_varint(out, (7U << 3U) | 2U);
        put_varint(out, shape.size());
        out += shape;
        for (const float v : values) {
            const double d = v;
            payload.append(reinterpret_cast<const char*>(&d), sizeof(d));
        }
        put_varint(out, (8U << 3U) | 2U);
    } else {
        for (std::size_t i = 0; i < dims.size(); ++i) {
            put_varint(out, (i + 1) << 3U);
            put_varint(out, static_cast<std::uint64_t>(dims[i]));
        }
        for (const float v : values) {
            payload.append(reinterpret_cast<const char*>(&v), sizeof(v));
        }
        put_varint(out, (5U << 3U) | 2U);
    }
    put_varint(out, payload.size());
    out += payload;
    return out;
}

std::vector<float> mean_image() {
    std::vector<float> values(k_cifar_image);
    for (std::size_t p = 0; p < values.size(); ++p) {
        values[p] = static_cast<float>(p % 97) * 0.5F;
    }
    return values;
}

std::string load_error(const fs::path& images, const fs::path& labels) {
    try {
        dl::data::load_idx(images, labels);
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::config);
        return e.what();
    }
    ADD_FAILURE() << "no error for " << images;
    return {};
}

class CifarReader : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;
};

TEST_F(CifarReader, GlobReadsEveryFileInNameOrderWithItsLabels) {
    write_bytes(m_dir.path() / "data_batch_2.bin", records(3, 2));
    write_bytes(m_dir.path() / "data_batch_1.bin", records(0, 3));
    write_bytes(m_dir.path() / "test_batch.bin", records(100, 1)); // not matched by the glob
    const fs::path source = m_dir.path() / "data_batch_*.bin";
    const dl::data::IdxDataset set = dl::data::load_idx(source, source);
    ASSERT_EQ(set.count, 5U);
    EXPECT_EQ(set.channels, 3);
    EXPECT_EQ(set.height, 32);
    EXPECT_EQ(set.width, 32);
    EXPECT_EQ(set.labels, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
    const std::string expected = records(0, 5);
    ASSERT_EQ(set.pixels.size(), 5 * k_cifar_image);
    for (std::size_t i = 0; i < 5; ++i) {
        for (std::size_t p = 0; p < k_cifar_image; p += 97) {
            ASSERT_EQ(set.pixels[i * k_cifar_image + p],
                      static_cast<std::uint8_t>(expected[i * (k_cifar_image + 1) + 1 + p]))
                << "record " << i << " pixel " << p;
        }
    }
    const dl::data::IdxDataset header = dl::data::read_idx_header(source);
    EXPECT_EQ(header.count, 5U);
    EXPECT_TRUE(header.pixels.empty());
    // Without label_source there are no labels, and the pixels are the same.
    EXPECT_TRUE(dl::data::load_idx(m_dir.path() / "data_batch_1.bin", {}).labels.empty());
}

TEST_F(CifarReader, LengthsThatAreNotWholeRecordsAreRefusedNamingTheFile) {
    const fs::path truncated = m_dir.path() / "truncated.bin";
    write_bytes(truncated, records(0, 2).substr(0, 3073 + 100));
    std::string message = load_error(truncated, truncated);
    EXPECT_NE(message.find(truncated.string()), std::string::npos) << message;
    EXPECT_NE(message.find("3173 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("100 bytes left over"), std::string::npos) << message;
    // The header read checks the same, before any pixel is read.
    EXPECT_THROW(dl::data::read_idx_header(truncated), dl::Error);

    const fs::path empty = m_dir.path() / "empty.bin";
    write_bytes(empty, "");
    message = load_error(empty, empty);
    EXPECT_NE(message.find("0 bytes"), std::string::npos) << message;
}

TEST_F(CifarReader, ALabelOutsideTenClassesNamesTheRecord) {
    // Two CIFAR-100 records (2 label bytes + 3072) are 6148 bytes: 2 CIFAR-10 records and 2 bytes,
    // refused by length; here a whole number of records with a bad label.
    std::string bytes = records(0, 3);
    bytes[2 * 3073] = 12;
    const fs::path file = m_dir.path() / "bad_label.bin";
    write_bytes(file, bytes);
    const std::string message = load_error(file, file);
    EXPECT_NE(message.find("record 2"), std::string::npos) << message;
    EXPECT_NE(message.find("label 12"), std::string::npos) << message;
}

TEST_F(CifarReader, LabelsFromAnotherFileAndGlobsWithoutMatchesAreRefused) {
    write_bytes(m_dir.path() / "a.bin", records(0, 1));
    std::string message = load_error(m_dir.path() / "a.bin", m_dir.path() / "labels.idx");
    EXPECT_NE(message.find("label_source to the same path"), std::string::npos) << message;
    message = load_error(m_dir.path() / "nothing_*.bin", {});
    EXPECT_NE(message.find("no data file matches"), std::string::npos) << message;
}

TEST_F(CifarReader, MeanValueIsSubtractedPerChannelBeforeScaling) {
    write_bytes(m_dir.path() / "a.bin", records(0, 2));
    const fs::path source = m_dir.path() / "a.bin";
    const dl::data::IdxDataset set = dl::data::load_idx(source, source);
    dl::data::BatchReader reader(set, 2, 0.5F, dl::data::SampleOrder(set.count, std::nullopt), 0, 2,
                                 0, 1, {10.0F, 20.0F, 30.0F});
    std::vector<float> data(2 * k_cifar_image);
    std::vector<float> labels(2);
    reader.next(data.data(), labels.data());
    for (std::size_t i = 0; i < 2; ++i) {
        for (std::size_t p = 0; p < k_cifar_image; p += 131) {
            const float mean = 10.0F * static_cast<float>(1 + p / 1024);
            EXPECT_FLOAT_EQ(data[i * k_cifar_image + p],
                            (static_cast<float>(set.pixels[i * k_cifar_image + p]) - mean) * 0.5F);
        }
    }
    EXPECT_EQ(labels, (std::vector<float>{0.0F, 1.0F}));
}

TEST_F(CifarReader, ChannelMeansAverageAMeanImageOfAnySize) {
    // What `dltrain predict --mean` subtracts: ImageNet's 256 x 256 mean for 227 x 227 inputs.
    std::vector<float> values(3 * 2 * 5);
    for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = static_cast<float>(i / 10 * 100 + i % 10); // plane c: 100c + 0..9
    }
    const fs::path mean = m_dir.path() / "mean.binaryproto";
    write_bytes(mean, blob_proto({1, 3, 2, 5}, values));
    EXPECT_EQ(dl::data::load_channel_means(mean, 3), (std::vector<float>{4.5F, 104.5F, 204.5F}));
    write_bytes(mean, blob_proto({1, 3, 2, 5}, values, true));
    EXPECT_EQ(dl::data::load_channel_means(mean, 3), (std::vector<float>{4.5F, 104.5F, 204.5F}));
    try {
        (void)dl::data::load_channel_means(mean, 1);
        ADD_FAILURE() << "a 3-channel mean for 1-channel images was read";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("a mean of shape 3x2x5 for images of 1 channel(s)"),
                  std::string::npos)
            << e.what();
    }
    write_bytes(mean, blob_proto({1, 3, 2, 5}, std::vector<float>(29, 1.0F)));
    try {
        (void)dl::data::load_channel_means(mean, 3);
        ADD_FAILURE() << "a mean short of its shape was read";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("29 values for its shape 3x2x5 (30 expected)"),
                  std::string::npos)
            << e.what();
    }
}

TEST_F(CifarReader, MeanFileIsReadInBothBlobProtoFormsAndSubtractedPerPixel) {
    const fs::path legacy = m_dir.path() / "mean.binaryproto";
    write_bytes(legacy, blob_proto({1, 3, 32, 32}, mean_image()));
    EXPECT_EQ(dl::data::load_mean_file(legacy, 3, 32, 32), mean_image());
    const fs::path shaped = m_dir.path() / "shaped.binaryproto";
    write_bytes(shaped, blob_proto({1, 3, 32, 32}, mean_image(), true));
    EXPECT_EQ(dl::data::load_mean_file(shaped, 3, 32, 32), mean_image());

    write_bytes(m_dir.path() / "a.bin", records(0, 1));
    const dl::data::IdxDataset set = dl::data::load_idx(m_dir.path() / "a.bin", {});
    dl::data::BatchReader reader(set, 1, 2.0F, dl::data::SampleOrder(set.count, std::nullopt), 0, 2,
                                 0, 1, mean_image());
    std::vector<float> data(k_cifar_image);
    reader.next(data.data(), nullptr);
    for (std::size_t p = 0; p < k_cifar_image; p += 61) {
        EXPECT_FLOAT_EQ(data[p], (static_cast<float>(set.pixels[p]) - mean_image()[p]) * 2.0F);
    }
}

TEST_F(CifarReader, AMeanFileOfAnotherShapeOrLengthIsRefused) {
    const fs::path small = m_dir.path() / "small.binaryproto";
    write_bytes(small, blob_proto({1, 1, 28, 28}, std::vector<float>(784, 1.0F)));
    try {
        dl::data::load_mean_file(small, 3, 32, 32);
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(small.string()), std::string::npos) << message;
        EXPECT_NE(message.find("a mean of shape 1x28x28 for images of 3x32x32"), std::string::npos)
            << message;
    }
    const fs::path short_data = m_dir.path() / "short.binaryproto";
    write_bytes(short_data, blob_proto({1, 3, 32, 32}, std::vector<float>(100, 1.0F)));
    try {
        dl::data::load_mean_file(short_data, 3, 32, 32);
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("100 values for its shape 3x32x32 (3072 expected)"),
                  std::string::npos)
            << e.what();
    }
    const fs::path garbage = m_dir.path() / "garbage.binaryproto";
    write_bytes(garbage, std::string("\x2a\xff\xff\xff\x0f", 5)); // data field, 4 GB long
    EXPECT_THROW(dl::data::load_mean_file(garbage, 3, 32, 32), dl::Error);
}

// A mean holds one value per pixel: a file with more values, more dimensions, or more bytes than
// those values could take is refused by what it is, without holding what it claims.
TEST_F(CifarReader, AMeanFileLargerThanItsImagesIsRefusedBeforeItIsHeld) {
    const auto refusal = [](const fs::path& file) -> std::string {
        try {
            dl::data::load_mean_file(file, 1, 28, 28);
        } catch (const dl::Error& e) {
            EXPECT_EQ(e.kind(), dl::ErrorKind::config);
            return e.what();
        }
        ADD_FAILURE() << "no error for " << file;
        return {};
    };
    const fs::path many = m_dir.path() / "many.binaryproto";
    write_bytes(many, blob_proto({1, 1, 28, 28}, std::vector<float>(785, 1.0F)));
    std::string message = refusal(many);
    EXPECT_NE(message.find("more than the 784 values of its images"), std::string::npos) << message;
    // Ten dimensions in the shape: refused at the fifth (a mean is at most 1 x C x H x W).
    std::string shape = "\x3a\x14"; // field 7 (BlobShape), 20 bytes
    for (int i = 0; i < 10; ++i) {
        shape += "\x08\x01"; // dim: 1
    }
    const fs::path deep = m_dir.path() / "deep.binaryproto";
    write_bytes(deep, shape);
    message = refusal(deep);
    EXPECT_NE(message.find("more than 4 dimensions"), std::string::npos) << message;
    // Far more bytes than 784 values take in any encoding: refused by its size, unread.
    const fs::path huge = m_dir.path() / "huge.binaryproto";
    write_bytes(huge, blob_proto({1, 1, 28, 28}, std::vector<float>(784, 1.0F)) +
                          std::string(std::size_t{1} << 20U, '\0'));
    message = refusal(huge);
    EXPECT_NE(message.find(huge.string()), std::string::npos) << message;
}

TEST_F(CifarReader, MeanFileAndMeanValueTogetherAreRefused) {
    try {
        dl::parse_config("layers:\n  - {name: data, type: Data, top: data, source: x.bin,\n"
                         "     batch_size: 2, mean_value: 1, mean_file: m.binaryproto}\n",
                         "both.yaml");
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("both.yaml:3"), std::string::npos) << message;
        EXPECT_NE(message.find("mean_file or mean_value, not both"), std::string::npos) << message;
    }
}

TEST_F(CifarReader, MeanValueMustMatchTheChannels) {
    const dl::NetConfig config = dl::parse_config(R"(layers:
  - {name: data, type: Data, top: data, source: x.bin, batch_size: 2, shape: [3, 32, 32],
     mean_value: [1, 2]}
)",
                                                  "mean.yaml");
    EXPECT_EQ(config.layers[0].mean_value, (std::vector<float>{1.0F, 2.0F}));
    const auto backend = dl::make_backend("cpu", 1);
    try {
        dl::Net net(config, dl::Phase::train, *backend, 1);
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("mean_value has 2 values for 3 channels"),
                  std::string::npos)
            << e.what();
    }
}

TEST_F(CifarReader, DltrainTrainsOnCifarBatches) {
    // 60 training and 20 test records; the label is written into a bright corner so that a
    // small net learns it in a few dozen steps.
    const auto make = [](int count, int seed) {
        std::string bytes;
        for (int i = 0; i < count; ++i) {
            const int label = (i * 7 + seed) % 3;
            bytes.push_back(static_cast<char>(label));
            for (std::size_t p = 0; p < k_cifar_image; ++p) {
                const std::size_t y = p % 1024 / 32;
                const std::size_t x = p % 32;
                const bool bright = (label == 0 && y < 16) || (label == 1 && x < 16) ||
                                    (label == 2 && y >= 16 && x >= 16);
                bytes.push_back(static_cast<char>((bright ? 150 : 0) + (p * 13 + i) % 50));
            }
        }
        return bytes;
    };
    write_bytes(m_dir.path() / "data_batch_1.bin", make(30, 0));
    write_bytes(m_dir.path() / "data_batch_2.bin", make(30, 1));
    write_bytes(m_dir.path() / "test_batch.bin", make(20, 2));
    // The test net subtracts a mean image (Caffe's mean.binaryproto) of 60 everywhere: the same
    // inputs as the train net's mean_value.
    write_bytes(m_dir.path() / "mean.binaryproto",
                blob_proto({1, 3, 32, 32}, std::vector<float>(k_cifar_image, 60.0F)));
    const fs::path config = m_dir.path() / "cifar.yaml";
    std::ofstream(config) << R"(name: cifar_tiny
layers:
  - {name: data, type: Data, top: [data, label], phase: train, source: data_batch_*.bin,
     label_source: data_batch_*.bin, batch_size: 10, mean_value: [60, 60, 60], scale: 0.01}
  - {name: data, type: Data, top: [data, label], phase: test, source: test_batch.bin,
     label_source: test_batch.bin, batch_size: 10, mean_file: mean.binaryproto, scale: 0.01}
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 4, kernel_size: 5,
     stride: 4, weight_filler: {type: xavier}}
  - {name: pool1, type: Pooling, bottom: conv1, top: pool1, pool: ave, kernel_size: 3, stride: 2}
  - {name: relu1, type: ReLU, bottom: pool1, top: pool1}
  - {name: ip1, type: InnerProduct, bottom: pool1, top: ip1, num_output: 3,
     weight_filler: {type: xavier}}
  - {name: accuracy, type: Accuracy, bottom: [ip1, label], top: accuracy, phase: test}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip1, label], top: loss}
solver: {base_lr: 0.05, momentum: 0.9, max_iter: 60, test_interval: 60, test_iter: 2,
         display: 20}
)";
    const fs::path run = m_dir.path() / "run";
    const auto result = dljob::test::run_shell(
        std::string(DLTRAIN_BINARY) + " train --device cpu --config " + config.string() +
        " --run-dir " + run.string() + " --threads 1 --deadline none");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(run / "metrics.jsonl");
    nlohmann::json last;
    for (std::string line; std::getline(in, line);) {
        last = nlohmann::json::parse(line);
    }
    ASSERT_EQ(last["type"], "final") << last.dump();
    EXPECT_GT(last["test_accuracy"].get<double>(), 0.8) << last.dump();
}

} // namespace

namespace {

// The shipped cifar10_quick network builds with Caffe's shapes: 32x32 -> conv1 32x32 -> pool1
// 16x16 -> conv2 16x16 -> pool2 8x8 -> conv3 8x8 -> pool3 4x4 -> ip1 64 -> ip2 10 (Caffe's log
// of the same prototxt prints these), with 145,578 parameters.
TEST(CifarQuickRecipe, NetworkHasCaffesShapes) {
    const dl::NetConfig config =
        dl::load_config(std::string(DLJOB_SOURCE_DIR) + "/recipes/networks/cifar10_quick.yaml");
    const auto backend = dl::make_backend("cpu", 1);
    dl::Net net(config, dl::Phase::train, *backend, 1);
    EXPECT_EQ(net.blob("conv1")->shape(), (std::vector<int>{100, 32, 32, 32}));
    EXPECT_EQ(net.blob("pool1")->shape(), (std::vector<int>{100, 32, 16, 16}));
    EXPECT_EQ(net.blob("pool2")->shape(), (std::vector<int>{100, 32, 8, 8}));
    EXPECT_EQ(net.blob("pool3")->shape(), (std::vector<int>{100, 64, 4, 4}));
    EXPECT_EQ(net.blob("ip2")->shape(), (std::vector<int>{100, 10}));
    std::size_t weights = 0;
    for (const dl::Param& param : net.params()) {
        weights += param.tensor->count();
    }
    EXPECT_EQ(weights, 145578U);
    EXPECT_EQ(config.solver.stepvalues, std::vector<int>{4000});
    EXPECT_EQ(config.solver.max_iter, 5000);
}

} // namespace
