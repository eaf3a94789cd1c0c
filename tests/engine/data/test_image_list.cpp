// Caffe's ImageData source (data/image_list.cpp): `path label` lines under root_folder, each
// image decoded in Caffe's BGR order and resized to new_height x new_width; and a Caffe net that
// trains from such a list through the real dltrain.

#include "data/image_list.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

/// A binary PPM of one colour.
std::string solid_ppm(int width, int height, int red, int green, int blue) {
    std::string bytes = fmt::format("P6 {} {} 255\n", width, height);
    for (int p = 0; p < width * height; ++p) {
        bytes += {static_cast<char>(red), static_cast<char>(green), static_cast<char>(blue)};
    }
    return bytes;
}

class ImageList : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    [[nodiscard]] dl::data::ImageListOptions options(int height = 0, int width = 0) const {
        dl::data::ImageListOptions o;
        o.image_path = [root = m_dir.path() / "imgs/"](const std::string& name) {
            return fs::path(root.string() + name);
        };
        o.new_height = height;
        o.new_width = width;
        return o;
    }

    [[nodiscard]] std::string error_of(const std::string& list_text,
                                       const dl::data::ImageListOptions& o) const {
        dl_test::write_bytes(m_dir.path() / "bad.txt", list_text);
        try {
            (void)dl::data::load_image_list(m_dir.path() / "bad.txt", o);
        } catch (const dl::Error& e) {
            return e.what();
        }
        return "(no error)";
    }

    void SetUp() override {
        fs::create_directories(m_dir.path() / "imgs" / "with space");
        dl_test::write_bytes(m_dir.path() / "imgs" / "red.ppm", solid_ppm(6, 4, 200, 10, 50));
        dl_test::write_bytes(m_dir.path() / "imgs" / "with space" / "green.ppm",
                             solid_ppm(6, 4, 0, 250, 0));
        dl_test::write_bytes(m_dir.path() / "imgs" / "small.ppm", solid_ppm(3, 2, 1, 2, 3));
    }
};

TEST_F(ImageList, LinesAreImagesAndLabelsInBgrResizedWhenAsked) {
    // The label follows the last space, so a path may hold spaces; CRLF and blank lines pass.
    dl_test::write_bytes(m_dir.path() / "list.txt",
                         "red.ppm 7\r\nwith space/green.ppm 1000\n\nsmall.ppm 0\n");
    const auto set = dl::data::load_image_list(m_dir.path() / "list.txt", options(2, 3));
    ASSERT_EQ(set.count, 3U);
    EXPECT_EQ(set.channels, 3);
    EXPECT_EQ(set.height, 2);
    EXPECT_EQ(set.width, 3);
    EXPECT_EQ(set.labels, (std::vector<std::int32_t>{7, 1000, 0}));
    // One colour stays that colour at any size; the planes are blue, green, red.
    const std::vector<std::uint8_t> red(set.pixels.begin(), set.pixels.begin() + 18);
    EXPECT_EQ(red, (std::vector<std::uint8_t>{50, 50, 50, 50, 50, 50, 10, 10, 10, 10, 10, 10, 200,
                                              200, 200, 200, 200, 200}));
    EXPECT_EQ(std::vector<std::uint8_t>(set.pixels.begin() + 36, set.pixels.end()),
              (std::vector<std::uint8_t>{3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1}));
    const auto header = dl::data::read_image_list_header(m_dir.path() / "list.txt", options(2, 3));
    EXPECT_EQ(header.count, 3U);
    EXPECT_EQ(header.height, 2);

    // is_color false: one grey channel.
    auto grey = options();
    grey.is_color = false;
    dl_test::write_bytes(m_dir.path() / "one.txt", "small.ppm 4\n");
    const auto one = dl::data::load_image_list(m_dir.path() / "one.txt", grey);
    EXPECT_EQ(one.channels, 1);
    EXPECT_EQ(one.pixels.size(), 6U);
}

TEST_F(ImageList, BadLinesImagesAndSizesNameTheListAndLine) {
    EXPECT_NE(error_of("red.ppm 1\nsmall.ppm\n", options())
                  .find("bad.txt line 2: 'small.ppm' is not 'PATH LABEL'"),
              std::string::npos);
    EXPECT_NE(error_of("red.ppm -3\n", options()).find("line 1: 'red.ppm -3' is not 'PATH LABEL'"),
              std::string::npos);
    EXPECT_NE(error_of("red.ppm 1\nnone.png 2\n", options()).find("bad.txt line 2: "),
              std::string::npos);
    EXPECT_NE(error_of("red.ppm 1\nnone.png 2\n", options()).find("none.png"), std::string::npos);
    EXPECT_NE(error_of("red.ppm 1\nsmall.ppm 2\n", options())
                  .find("line 2: " + (m_dir.path() / "imgs" / "small.ppm").string() +
                        " is 2x3 but the first image is 4x6: set new_height and new_width"),
              std::string::npos)
        << error_of("red.ppm 1\nsmall.ppm 2\n", options());
    EXPECT_NE(error_of("\n\n", options()).find("names no image"), std::string::npos);
    dl::data::DataBudget budget;
    budget.bytes = 100;
    budget.source = "--max-memory 100";
    dl_test::write_bytes(m_dir.path() / "list.txt", "red.ppm 1\nred.ppm 2\n");
    try {
        (void)dl::data::load_image_list(m_dir.path() / "list.txt", options(), budget);
        ADD_FAILURE() << "a list past its budget was read";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("(2 images of 3x4x6) would take 144 bytes"),
                  std::string::npos)
            << e.what();
    }
}

TEST_F(ImageList, ACaffeNetTrainsFromAnImageListAsCaffesExamplesAre) {
    // finetune_flickr_style's form: ImageData with root_folder, new_height/new_width, a crop,
    // a mirror and per-channel means, run from the folder its relative paths start at.
    std::string train;
    std::string test;
    for (int i = 0; i < 12; ++i) {
        const std::string name = fmt::format("img{}.ppm", i);
        dl_test::write_bytes(m_dir.path() / "imgs" / name,
                             solid_ppm(10 + i % 3, 9, 20 * i, 255 - 20 * i, (i % 2) * 200));
        (i < 8 ? train : test) += fmt::format("{} {}\n", name, i % 2);
    }
    dl_test::write_bytes(m_dir.path() / "train.txt", train);
    dl_test::write_bytes(m_dir.path() / "test.txt", test);
    const std::string data_layer =
        R"(layer { name: "data" type: "ImageData" top: "data" top: "label"
  include { phase: PHASE }
  transform_param { mirror: MIRROR crop_size: 6 mean_value: 104 mean_value: 117 mean_value: 123
                    scale: 0.01 }
  image_data_param { source: "LIST" root_folder: "imgs/" batch_size: 4 new_height: 8
                     new_width: 8 shuffle: SHUFFLE } }
)";
    const auto with = [&](const std::string& phase, const std::string& list, bool train_phase) {
        std::string text = data_layer;
        text.replace(text.find("PHASE"), 5, phase);
        text.replace(text.find("MIRROR"), 6, train_phase ? "true" : "false");
        text.replace(text.find("LIST"), 4, list);
        text.replace(text.find("SHUFFLE"), 7, train_phase ? "true" : "false");
        return text;
    };
    dl_test::write_bytes(m_dir.path() / "net.prototxt",
                         "name: \"tiny\"\n" + with("TRAIN", "train.txt", true) +
                             with("TEST", "test.txt", false) +
                             R"(layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc"
  inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
layer { name: "acc" type: "Accuracy" bottom: "fc" bottom: "label" top: "acc"
  include { phase: TEST } }
)");
    dl_test::write_bytes(m_dir.path() / "solver.prototxt",
                         "net: \"net.prototxt\"\nbase_lr: 0.01\nmax_iter: 10\nlr_policy: "
                         "\"fixed\"\ntest_iter: 1\ntest_interval: 5\ndisplay: 5\n");
    const std::string dltrain =
        "cd " + m_dir.path().string() + " && " + std::string(DLTRAIN_BINARY);
    const auto check = run_shell(dltrain + " check -solver solver.prototxt 2>&1");
    ASSERT_EQ(check.exit_code, 0) << check.output;
    EXPECT_NE(check.output.find("solver.prototxt: ok"), std::string::npos) << check.output;
    const auto run = run_shell(dltrain + " train -solver solver.prototxt --run-dir run --device "
                                         "cpu --threads 1 --deadline none 2>&1");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::ifstream metrics(m_dir.path() / "run" / "metrics.jsonl");
    nlohmann::json last;
    int tests = 0;
    for (std::string line; std::getline(metrics, line);) {
        last = nlohmann::json::parse(line);
        tests += last["type"] == "test" ? 1 : 0;
    }
    EXPECT_EQ(last["type"], "final");
    EXPECT_EQ(last["iter"], 10);
    EXPECT_GE(tests, 2);

    // A list entry whose image is gone stops the run before its first step, naming it.
    dl_test::write_bytes(m_dir.path() / "train.txt", train + "gone.png 1\n");
    const auto gone = run_shell(dltrain + " train -solver solver.prototxt --run-dir run2 "
                                          "--device cpu --deadline none 2>&1");
    EXPECT_EQ(gone.exit_code, 3) << gone.output;
    EXPECT_NE(gone.output.find("train.txt line 9"), std::string::npos) << gone.output;
    EXPECT_NE(gone.output.find("gone.png"), std::string::npos) << gone.output;
}

} // namespace
