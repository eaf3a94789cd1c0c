// Caffe's crop_size and mirror transforms in the reader thread (data/batch_reader.hpp), for every
// kind of source: IDX files, a pack of image members, CIFAR-10 binary batches and an LMDB of
// Datums, each written here from the same pixels. Batches equal a NumPy reference written from
// Caffe's DataTransformer (tests/engine/crop_reference.py), value for value; the config readers
// take the keys; a crop larger than the images is refused naming the file and key; a resumed
// run with random crops and flips is bit-identical to an unbroken one.

#include "data/batch_reader.hpp"
#include "data/idx_dataset.hpp"
#include "datum_support.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <lmdb.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

constexpr int k_count = 7; // images per source: 12 positions from cursor 5 cross two epochs

using dl_test::write_bytes;

/// Image i of C x H x W, planar: a pattern that differs along every axis, so a crop, a flip or a
/// swapped axis shows.
std::string image_bytes(int i, int channels, int height, int width) {
    std::string out;
    for (int c = 0; c < channels; ++c) {
        for (int h = 0; h < height; ++h) {
            for (int w = 0; w < width; ++w) {
                out.push_back(static_cast<char>((i * 37 + c * 71 + h * 13 + w * 5 + h * w) % 256));
            }
        }
    }
    return out;
}

std::string all_images(int channels, int height, int width) {
    std::string out;
    for (int i = 0; i < k_count; ++i) {
        out += image_bytes(i, channels, height, width);
    }
    return out;
}

int label_of(int i) {
    return (i * 3) % 10;
}

void put_be32(std::string& out, std::uint32_t value) {
    dl_test::put_be32(out, value);
}

fs::path write_idx(const fs::path& dir, int height, int width) {
    std::string images;
    put_be32(images, 0x00000803);
    put_be32(images, k_count);
    put_be32(images, static_cast<std::uint32_t>(height));
    put_be32(images, static_cast<std::uint32_t>(width));
    images += all_images(1, height, width);
    std::string labels;
    put_be32(labels, 0x00000801);
    put_be32(labels, k_count);
    for (int i = 0; i < k_count; ++i) {
        labels.push_back(static_cast<char>(label_of(i)));
    }
    write_bytes(dir / "images-idx3-ubyte", images);
    write_bytes(dir / "labels-idx1-ubyte", labels);
    return dir / "images-idx3-ubyte";
}

/// A pack (docs/data.md) of binary PPM members with labels: ustar data.tar and index.tsv.
fs::path write_pack(const fs::path& dir, int height, int width) {
    std::string tar;
    std::string index = "# dljob-index v1\ttype\toffset\tsize\tlabel\tpath\n";
    for (int i = 0; i < k_count; ++i) {
        const std::string planar = image_bytes(i, 3, height, width);
        const auto plane = static_cast<std::size_t>(height * width);
        std::string ppm = fmt::format("P6 {} {} 255\n", width, height);
        // The planes are BGR, as dltrain decodes image files (Caffe's OpenCV order); a PPM's
        // pixel is R, G, B.
        for (std::size_t p = 0; p < plane; ++p) {
            for (std::size_t c = 0; c < 3; ++c) {
                ppm.push_back(planar[(2 - c) * plane + p]);
            }
        }
        const std::string path = fmt::format("train/{:02}.ppm", i);
        std::string header(512, '\0');
        header.replace(0, path.size(), path);
        const auto octal = [&](std::size_t at, std::size_t width_of, std::uint64_t value) {
            const std::string text = fmt::format("{:0{}o}", value, width_of - 1);
            header.replace(at, text.size(), text);
        };
        octal(100, 8, 0644);
        octal(108, 8, 0);
        octal(116, 8, 0);
        octal(124, 12, ppm.size());
        octal(136, 12, 946684800);
        header[156] = '0';
        header.replace(257, 6, std::string("ustar\0", 6));
        header.replace(263, 2, "00");
        header.replace(148, 8, "        ");
        unsigned sum = 0;
        for (const char c : header) {
            sum += static_cast<unsigned char>(c);
        }
        octal(148, 7, sum);
        tar += header;
        index += fmt::format("f\t{}\t{}\t{}\t{}\n", tar.size(), ppm.size(), label_of(i), path);
        tar += ppm;
        tar.append((512 - ppm.size() % 512) % 512, '\0');
    }
    tar.append(1024, '\0');
    write_bytes(dir / "pack" / "data.tar", tar);
    write_bytes(dir / "pack" / "index.tsv", index);
    return dir / "pack" / "train";
}

fs::path write_cifar(const fs::path& dir) {
    std::string records;
    for (int i = 0; i < k_count; ++i) {
        records.push_back(static_cast<char>(label_of(i)));
        records += image_bytes(i, 3, 32, 32);
    }
    write_bytes(dir / "data_batch_1.bin", records);
    return dir / "data_batch_1.bin";
}

fs::path write_lmdb(const fs::path& dir, int height, int width) {
    const fs::path db = dir / "train_lmdb";
    std::vector<std::string> values;
    for (int i = 0; i < k_count; ++i) {
        values.push_back(
            dl_test::datum(3, height, width, image_bytes(i, 3, height, width), label_of(i)));
    }
    dl_test::write_lmdb(db, values);
    return db;
}

struct Case {
    std::string name;
    int crop = 0;
    bool mirror = false;
    bool train = true;
    bool shuffle = false;
};

class CropMirror : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    /// Reads 4 batches of 3 from position 5 with `c`'s transform and compares them with the
    /// NumPy reference over the pixels the test wrote (not the ones the reader decoded).
    void expect_reference(const fs::path& source, const fs::path& labels, int channels, int height,
                          int width, const std::vector<float>& mean, const Case& c) {
        SCOPED_TRACE(source.string() + " " + c.name);
        // The reference is NumPy's (setup.sh installs python3-numpy for the tests); a machine
        // without it, such as a lent GPU machine, skips rather than fails.
        if (run_shell("/usr/bin/python3 -c 'import numpy' 2>&1").exit_code != 0) {
            GTEST_SKIP() << "needs Debian's python3-numpy for the reference (scripts/setup.sh)";
        }
        const dl::data::IdxDataset set = dl::data::load_idx(source, labels);
        ASSERT_EQ(set.count, static_cast<std::size_t>(k_count));
        ASSERT_EQ(set.channels, channels);
        constexpr std::uint32_t seed = 1701;
        constexpr std::uint64_t cursor = 5;
        constexpr int batch = 3;
        constexpr int batches = 4;
        constexpr float scale = 0.125F;
        const dl::data::CropMirror transform{c.crop, c.mirror, c.train, seed};
        dl::data::BatchReader reader(
            set, batch, scale,
            dl::data::SampleOrder(set.count, c.shuffle ? std::optional(seed) : std::nullopt),
            cursor, 2, 0, 1, mean, transform);
        const int side_h = c.crop > 0 ? c.crop : height;
        const int side_w = c.crop > 0 ? c.crop : width;
        const auto image = static_cast<std::size_t>(channels * side_h * side_w);
        std::vector<float> got(batch * batches * image);
        std::vector<float> got_labels(batch * batches);
        for (int b = 0; b < batches; ++b) {
            reader.next(got.data() + b * batch * image, got_labels.data() + b * batch);
        }

        const fs::path pixels = m_dir.path() / "pixels.u8";
        write_bytes(pixels, all_images(channels, height, width));
        std::string mean_arg = "-";
        if (!mean.empty()) {
            std::string bytes(mean.size() * sizeof(float), '\0');
            std::memcpy(bytes.data(), mean.data(), bytes.size());
            write_bytes(m_dir.path() / "mean.f32", bytes);
            mean_arg = (m_dir.path() / "mean.f32").string();
        }
        const fs::path out = m_dir.path() / "expected.f32";
        const std::string command = fmt::format(
            "/usr/bin/python3 {}/tests/engine/crop_reference.py {} {} {} {} {} {} {} {} {} {} {} "
            "{} {} {} {}",
            DLJOB_SOURCE_DIR, pixels.string(), k_count, channels, height, width, c.crop,
            c.mirror ? 1 : 0, c.train ? "train" : "test", seed, c.shuffle ? 1 : 0, cursor,
            batch * batches, scale, mean_arg, out.string());
        const auto result = run_shell(command);
        ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.output;
        const std::string expected_bytes = dl_test::read_file(out);
        ASSERT_EQ(expected_bytes.size(), got.size() * sizeof(float));
        std::vector<float> expected(got.size());
        std::memcpy(expected.data(), expected_bytes.data(), expected_bytes.size());
        std::size_t differ = 0;
        std::size_t first = 0;
        for (std::size_t i = got.size(); i-- > 0;) {
            if (got[i] != expected[i]) {
                ++differ;
                first = i;
            }
        }
        EXPECT_EQ(differ, 0U) << "first at value " << first << " (image " << first / image
                              << "): " << got[first] << " vs NumPy's " << expected[first];
    }

    void every_case(const fs::path& source, const fs::path& labels, int channels, int height,
                    int width, const std::vector<float>& mean, int crop) {
        for (const Case& c : {Case{"train crop+mirror, shuffled", crop, true, true, true},
                              Case{"train crop+mirror, file order", crop, true, true, false},
                              Case{"train mirror only", 0, true, true, false},
                              Case{"test centre crop", crop, false, false, false},
                              Case{"test centre crop + mirror", crop, true, false, true}}) {
            expect_reference(source, labels, channels, height, width, mean, c);
        }
    }
};

TEST_F(CropMirror, DrawsFollowCaffesPhaseRulesAndArePureFunctionsOfThePosition) {
    const dl::data::CropMirror train{7, true, true, 1701};
    std::set<std::pair<int, int>> offsets;
    int flips = 0;
    for (std::uint64_t p = 0; p < 64; ++p) {
        const auto draw = dl::data::crop_draw(train, p, 10, 12);
        EXPECT_GE(draw.row, 0);
        EXPECT_LE(draw.row, 3);
        EXPECT_GE(draw.column, 0);
        EXPECT_LE(draw.column, 5);
        offsets.insert({draw.row, draw.column});
        flips += draw.flip ? 1 : 0;
        const auto again = dl::data::crop_draw(train, p, 10, 12);
        EXPECT_EQ(again.row, draw.row);
        EXPECT_EQ(again.flip, draw.flip);
    }
    EXPECT_GT(offsets.size(), 12U); // 24 possible
    EXPECT_GT(flips, 16);
    EXPECT_LT(flips, 48);
    // Test phase: the centre, and no draw at all without mirror.
    for (std::uint64_t p = 0; p < 16; ++p) {
        const auto draw = dl::data::crop_draw({7, false, false, 1701}, p, 10, 12);
        EXPECT_EQ(draw.row, 1);
        EXPECT_EQ(draw.column, 2);
        EXPECT_FALSE(draw.flip);
    }
    // Another seed draws other crops.
    int same = 0;
    for (std::uint64_t p = 0; p < 32; ++p) {
        const auto a = dl::data::crop_draw(train, p, 10, 12);
        const auto b = dl::data::crop_draw({7, true, true, 1702}, p, 10, 12);
        same += a.row == b.row && a.column == b.column && a.flip == b.flip ? 1 : 0;
    }
    EXPECT_LT(same, 16);
}

TEST_F(CropMirror, IdxImagesEqualTheNumPyReference) {
    const fs::path images = write_idx(m_dir.path() / "idx", 10, 12);
    every_case(images, m_dir.path() / "idx" / "labels-idx1-ubyte", 1, 10, 12, {40.0F}, 7);
}

TEST_F(CropMirror, PackImagesEqualTheNumPyReference) {
    const fs::path source = write_pack(m_dir.path(), 10, 12);
    every_case(source, source, 3, 10, 12, {10.0F, 20.0F, 30.0F}, 7);
}

TEST_F(CropMirror, CifarImagesWithAMeanImageEqualTheNumPyReference) {
    const fs::path source = write_cifar(m_dir.path());
    std::vector<float> mean(3 * 32 * 32);
    for (std::size_t i = 0; i < mean.size(); ++i) {
        mean[i] = static_cast<float>(i % 251) * 0.5F;
    }
    every_case(source, source, 3, 32, 32, mean, 24);
}

TEST_F(CropMirror, LmdbImagesWithAMeanImageEqualTheNumPyReference) {
    const fs::path source = write_lmdb(m_dir.path(), 10, 12);
    std::vector<float> mean(3 * 10 * 12);
    for (std::size_t i = 0; i < mean.size(); ++i) {
        mean[i] = static_cast<float>(i) * 0.25F;
    }
    every_case(source, source, 3, 10, 12, mean, 9);
}

// The YAML keys and Caffe's transform_param (and the older data_param form Caffe upgrades)
// reach the layer; the resolved YAML keeps them.
TEST_F(CropMirror, ConfigsInBothFormatsCarryTheKeys) {
    const fs::path yaml = m_dir.path() / "net.yaml";
    std::ofstream(yaml) << R"(name: n
layers:
  - {name: d, type: Data, top: [data, label], source: x, label_source: x, batch_size: 2,
     crop_size: 5, mirror: true}
  - {name: ip, type: InnerProduct, bottom: data, top: ip, num_output: 2}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}
solver: {max_iter: 1}
)";
    const dl::NetConfig from_yaml = dl::load_config(yaml);
    EXPECT_EQ(from_yaml.layers[0].crop_size, 5);
    EXPECT_TRUE(from_yaml.layers[0].mirror);
    const dl::NetConfig again = dl::parse_config(dl::to_yaml(from_yaml), yaml);
    EXPECT_EQ(again.layers[0].crop_size, 5);
    EXPECT_TRUE(again.layers[0].mirror);
    // dltrain convert writes them into Caffe's transform_param, and reads them back.
    const fs::path converted = m_dir.path() / "converted.prototxt";
    const auto convert = run_shell(std::string(DLTRAIN_BINARY) + " convert --config " +
                                   yaml.string() + " -o " + converted.string());
    ASSERT_EQ(convert.exit_code, 0) << convert.output;
    const std::string text = dl_test::read_file(converted);
    EXPECT_NE(text.find("crop_size: 5"), std::string::npos) << text;
    EXPECT_NE(text.find("mirror: true"), std::string::npos) << text;
    const dl::NetConfig from_converted = dl::load_config(converted);
    EXPECT_EQ(from_converted.layers[0].crop_size, 5);
    EXPECT_TRUE(from_converted.layers[0].mirror);

    const fs::path proto = m_dir.path() / "net.prototxt";
    std::ofstream(proto) << R"(name: "n"
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { crop_size: 5 mirror: true scale: 0.5 }
  data_param { source: "x" batch_size: 2 backend: LMDB } }
layer { name: "d" type: "Data" top: "data" top: "label" include { phase: TEST }
  data_param { source: "x" batch_size: 2 backend: LMDB crop_size: 4 mirror: false } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";
    const dl::NetConfig from_proto = dl::load_config(proto);
    EXPECT_EQ(from_proto.layers[0].crop_size, 5);
    EXPECT_TRUE(from_proto.layers[0].mirror);
    EXPECT_EQ(from_proto.layers[1].crop_size, 4);
    EXPECT_FALSE(from_proto.layers[1].mirror);
}

TEST_F(CropMirror, ACropLargerThanTheImagesIsRefusedNamingFileAndKey) {
    // With a 'shape' key the YAML reader knows at once: the key's own line and column.
    const fs::path yaml = m_dir.path() / "shaped.yaml";
    std::ofstream(yaml) << R"(name: n
layers:
  - {name: d, type: Data, top: [data, label], source: x, label_source: x, batch_size: 2,
     shape: [1, 8, 8], crop_size: 9}
  - {name: ip, type: InnerProduct, bottom: data, top: ip, num_output: 2}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}
solver: {max_iter: 1}
)";
    try {
        dl::load_config(yaml);
        ADD_FAILURE() << "no error";
    } catch (const dl::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(yaml.string() + ":4:"), std::string::npos) << message;
        EXPECT_NE(message.find("key 'crop_size'"), std::string::npos) << message;
        EXPECT_NE(message.find("9 is larger than the 8x8 images"), std::string::npos) << message;
    }
    // Without one, the images' shape comes from the data: dltrain train refuses before any run
    // directory exists (exit 3), naming the config's line, the layer and the key.
    const fs::path config = dl_test::make_tiny_workspace(m_dir.path(), 10);
    std::string text = dl_test::read_file(config);
    const std::string marker = "batch_size: 8, scale: 0.00390625,";
    text.replace(text.find(marker), marker.size(), marker + " crop_size: 9,");
    std::ofstream(config) << text;
    const fs::path run_dir = m_dir.path() / "run";
    const auto result =
        run_shell(std::string(DLTRAIN_BINARY) + " train --device cpu --config " + config.string() +
                  " --run-dir " + run_dir.string() + " --deadline none");
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_NE(result.output.find(config.string() + ":3: layer 'data' (Data): key 'crop_size' 9 "
                                                   "is larger than its 8x8 images"),
              std::string::npos)
        << result.output;
    EXPECT_FALSE(fs::exists(run_dir / "checkpoints"));
    const auto check =
        run_shell(std::string(DLTRAIN_BINARY) + " check --config " + config.string());
    EXPECT_EQ(check.exit_code, 3) << check.output;
    EXPECT_NE(check.output.find("key 'crop_size' 9"), std::string::npos) << check.output;
}

TEST_F(CropMirror, ARunWithRandomCropsAndFlipsResumesBitIdentically) {
    const fs::path config = dl_test::make_tiny_workspace(m_dir.path(), 60, "SGD", true);
    std::string text = dl_test::read_file(config);
    // Train: random 6x6 crops and flips of the 8x8 images; test: the centre 6x6.
    for (const std::string marker : {"scale: 0.00390625, shuffle: true", "batch_size: 10,"}) {
        const auto at = text.find(marker);
        ASSERT_NE(at, std::string::npos) << marker;
        text.replace(at, marker.size(),
                     marker + (marker.back() == ',' ? " crop_size: 6,"
                                                    : ", crop_size: 6, "
                                                      "mirror: true"));
    }
    std::ofstream(config) << text;
    const auto train = [&](const fs::path& run_dir, const std::string& extra) {
        return run_shell(std::string(DLTRAIN_BINARY) + " train --device cpu --threads 1 --config " +
                         config.string() + " --run-dir " + run_dir.string() + " --deadline none " +
                         extra);
    };
    const fs::path straight = m_dir.path() / "straight";
    const fs::path broken = m_dir.path() / "broken";
    const auto first = train(straight, "");
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_NE(dl_test::read_file(straight / "config.resolved.yaml").find("crop_size: 6"),
              std::string::npos);
    ASSERT_EQ(train(broken, "--max-iter 27").exit_code, 0);
    const auto resumed = train(broken, "--resume auto");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    const std::string a = dl_test::read_file(straight / "checkpoints" / "iter_00000060.ckpt");
    const std::string b = dl_test::read_file(broken / "checkpoints" / "iter_00000060.ckpt");
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << "the resumed run's iteration-60 checkpoint differs";
}

} // namespace
