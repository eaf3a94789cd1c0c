// `dltrain predict` (train/predict.cpp): a deploy net and a .caffemodel over image files, as
// Caffe's classification example. The net's one layer averages each channel, so each image's
// scores, and their order, follow from its colour: BGR order, the mean, the resize, the batches
// and the labels are all seen in the printed lines. Also the bilinear resize, by OpenCV's rule.

#include "data/image_decode.hpp"
#include "engine_test_support.hpp"
#include "io/caffemodel.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

constexpr const char* k_deploy = R"(name: "colours"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc"
        inner_product_param { num_output: 3 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
)";

/// Class k's score is plane k's average over 100: blue, green, red in Caffe's BGR order.
void write_model(const fs::path& deploy, const fs::path& caffemodel) {
    dl_test::write_bytes(deploy, k_deploy);
    const dl::NetConfig config = dl::load_config(deploy);
    const auto backend = dl::make_backend("cpu", 1);
    dl::Net net(config, dl::Phase::test, *backend, 1);
    std::vector<float> weights(3 * 48, 0.0F);
    for (int k = 0; k < 3; ++k) {
        for (int p = 0; p < 16; ++p) {
            weights[static_cast<std::size_t>(k * 48 + k * 16 + p)] = 1.0F / 1600.0F;
        }
    }
    const std::vector<float> bias(3, 0.0F);
    net.params()[0].tensor->write_data(weights.data());
    net.params()[1].tensor->write_data(bias.data());
    dl::io::write_caffemodel(caffemodel, config, net);
}

/// A binary PPM of one colour, width x height.
std::string ppm(int width, int height, int red, int green, int blue) {
    std::string bytes = fmt::format("P6 {} {} 255\n", width, height);
    for (int p = 0; p < width * height; ++p) {
        bytes += {static_cast<char>(red), static_cast<char>(green), static_cast<char>(blue)};
    }
    return bytes;
}

/// Caffe's line for class `cls` of scores (b, g, r) / 100, each less its mean.
std::string line(const std::vector<double>& planes, int cls, const std::string& label) {
    double total = 0.0;
    for (const double v : planes) {
        total += std::exp(v / 100.0);
    }
    return fmt::format("{:.4f} - \"{}\"",
                       std::exp(planes[static_cast<std::size_t>(cls)] / 100.0) / total, label);
}

class Predict : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;
    fs::path m_deploy = m_dir.path() / "deploy.prototxt";
    fs::path m_weights = m_dir.path() / "colours.caffemodel";

    void SetUp() override {
        write_model(m_deploy, m_weights);
        dl_test::write_bytes(m_dir.path() / "labels.txt", "b0 blue\ng0 green\nr0 red\n");
        dl_test::write_bytes(m_dir.path() / "red.ppm", ppm(8, 8, 200, 10, 50));
        dl_test::write_bytes(m_dir.path() / "green.ppm", ppm(6, 5, 0, 250, 0));
        dl_test::write_bytes(m_dir.path() / "blue.ppm", ppm(4, 4, 20, 30, 240));
    }

    std::string predict(const std::string& args, const std::string& device = "cpu") const {
        return "cd " + m_dir.path().string() + " && " + std::string(DLTRAIN_BINARY) +
               " predict --device " + device +
               " --threads 1 --model deploy.prototxt --weights colours.caffemodel " + args +
               " 2>&1";
    }
};

// The same on a GPU (Caffe's classification example with Caffe::set_mode(GPU)): the same lines.
class GpuPredict : public Predict {
protected:
    void SetUp() override {
        if (const std::string why = dl_test::why_no_gpu(); !why.empty()) {
            GTEST_SKIP() << "no GPU test: " << why;
        }
        Predict::SetUp();
    }
};

TEST_F(GpuPredict, PrintsTheCpusLinesOnTheGpu) {
    dl_test::write_bytes(m_dir.path() / "list.txt", "green.ppm 1\nblue.ppm 0\n");
    const std::string args = "--labels labels.txt --mean-value 10,20,30 --top-k 3 red.ppm "
                             "--list list.txt";
    const auto cpu = run_shell(predict(args));
    const auto gpu = run_shell(predict(args, "cuda:0"));
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    EXPECT_EQ(gpu.output, cpu.output);
}

TEST_F(Predict, PrintsCaffesTopKPerImageInBatchesOfTheDeployNets) {
    // Three images through a batch of 2: the last batch is half full. Means are BGR.
    dl_test::write_bytes(m_dir.path() / "list.txt", "# image list\ngreen.ppm 1\n\nblue.ppm 0\n");
    const auto run = run_shell(predict("--labels labels.txt --mean-value 10,20,30 --top-k 2 "
                                       "red.ppm --list list.txt"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::vector<double> red = {50 - 10, 10 - 20, 200 - 30};
    const std::vector<double> green = {0 - 10, 250 - 20, 0 - 30};
    const std::vector<double> blue = {240 - 10, 30 - 20, 20 - 30};
    const std::string expected = "---------- Prediction for red.ppm ----------\n" +
                                 line(red, 2, "r0 red") + "\n" + line(red, 0, "b0 blue") +
                                 "\n---------- Prediction for green.ppm ----------\n" +
                                 line(green, 1, "g0 green") + "\n" + line(green, 0, "b0 blue") +
                                 "\n---------- Prediction for blue.ppm ----------\n" +
                                 line(blue, 0, "b0 blue") + "\n" + line(blue, 1, "g0 green") + "\n";
    EXPECT_EQ(run.output, expected);

    // Without labels, the class numbers; five asked of three classes shows the three.
    const auto plain = run_shell(predict("--top-k 5 green.ppm"));
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    const std::vector<double> unmeaned = {0, 250, 0};
    EXPECT_EQ(plain.output, "---------- Prediction for green.ppm ----------\n" +
                                line(unmeaned, 1, "1") + "\n" + line(unmeaned, 0, "0") + "\n" +
                                line(unmeaned, 2, "2") + "\n");
}

TEST_F(Predict, BadInputsAreClearErrors) {
    const auto labels = run_shell(predict("--labels deploy.prototxt red.ppm"));
    EXPECT_EQ(labels.exit_code, 3) << labels.output;
    EXPECT_NE(labels.output.find("labels file deploy.prototxt has 6 lines; the net's output "
                                 "'prob' has 3 classes"),
              std::string::npos)
        << labels.output;
    const auto missing = run_shell(predict("red.ppm nowhere.png"));
    EXPECT_EQ(missing.exit_code, 3) << missing.output;
    EXPECT_NE(missing.output.find("nowhere.png"), std::string::npos) << missing.output;
    const auto none = run_shell(predict(""));
    EXPECT_EQ(none.exit_code, 2) << none.output;
    EXPECT_NE(none.output.find("no images"), std::string::npos) << none.output;
    dl_test::write_bytes(m_dir.path() / "notimage.png", "not an image");
    const auto garbage = run_shell(predict("notimage.png"));
    EXPECT_EQ(garbage.exit_code, 3) << garbage.output;
    EXPECT_NE(garbage.output.find("image notimage.png: not a PNG, JPEG or binary PGM/PPM image"),
              std::string::npos)
        << garbage.output;
    const auto means = run_shell(predict("--mean-value 1,2 red.ppm"));
    EXPECT_EQ(means.exit_code, 2) << means.output;
    EXPECT_NE(means.output.find("--mean-value gives 2 values for images of 3 channel(s)"),
              std::string::npos)
        << means.output;

    // A train_val net is not a deploy net.
    const fs::path corpus = fs::path(DLJOB_SOURCE_DIR) / "tests" / "engine" / "prototxt";
    const auto train_val =
        run_shell("cd " + m_dir.path().string() + " && " + std::string(DLTRAIN_BINARY) +
                  " predict --model " + (corpus / "lenet_train_test.prototxt").string() +
                  " --weights colours.caffemodel red.ppm 2>&1");
    EXPECT_EQ(train_val.exit_code, 3) << train_val.output;
    EXPECT_NE(train_val.output.find("layer 'mnist' (Data) reads a data set: predict takes a "
                                    "deploy net"),
              std::string::npos)
        << train_val.output;
}

TEST(ResizeBilinear, FollowsOpenCvsInterLinearSampling) {
    // [[0, 100], [200, 255]] to 4x4 by INTER_LINEAR's rule: pixel centres aligned, the outer
    // rows and columns clamped to the edge (OpenCV's 11-bit fixed point may differ by 1).
    dl::data::DecodedImage image;
    image.channels = 1;
    image.height = 2;
    image.width = 2;
    image.pixels = {0, 100, 200, 255};
    const auto up = dl::data::resize_bilinear(image, 4, 4);
    EXPECT_EQ(up.pixels, (std::vector<std::uint8_t>{0, 25, 75, 100,     //
                                                    50, 72, 117, 139,   //
                                                    150, 167, 200, 216, //
                                                    200, 214, 241, 255}));
    // Halving averages each 2x2 block (the source points fall between its pixels).
    dl::data::DecodedImage four;
    four.channels = 1;
    four.height = 2;
    four.width = 4;
    four.pixels = {0, 10, 20, 40, 100, 110, 120, 140};
    EXPECT_EQ(dl::data::resize_bilinear(four, 1, 2).pixels, (std::vector<std::uint8_t>{55, 80}));
}

} // namespace
