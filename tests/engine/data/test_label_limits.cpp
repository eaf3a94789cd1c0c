// Labels against the classifier's outputs: the loss and accuracy index a row of scores by the
// label, so a label at or past the row's end (a 5-way net on 10-class data, an LMDB of labels
// 200-249) is refused with exit 3 naming the record, its label and the outputs, before anything
// reads or writes past a buffer.

#include "data/batch_reader.hpp"
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

class LabelLimits : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    /// The tiny workspace (labels 0 to 2) with a classifier of `outputs` outputs.
    fs::path workspace_with_outputs(int outputs) {
        const fs::path config = dl_test::make_tiny_workspace(m_dir.path(), 20);
        std::ofstream(config) << replaced(dl_test::tiny_net_yaml(20), "top: ip2, num_output: 3",
                                          "top: ip2, num_output: " + std::to_string(outputs));
        return config;
    }
};

TEST_F(LabelLimits, TrainRefusesLabelsPastTheClassifiersOutputsBeforeTheRunStarts) {
    const fs::path config = workspace_with_outputs(2);
    const fs::path run = m_dir.path() / "run";
    const auto result =
        run_shell(std::string(DLTRAIN_BINARY) + " train --device cpu --config " + config.string() +
                  " --run-dir " + run.string() + " --threads 1 --deadline none");
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_NE(result.output.find("tiny.yaml:3: layer 'data': record "), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("train-labels-idx1-ubyte has label 2, but layer 'ip2'"),
              std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("has 2 outputs (labels 0 to 1)"), std::string::npos)
        << result.output;
    EXPECT_FALSE(fs::exists(run)) << "refused before the run directory was written";
}

// `check` is what dljob validate and submit run before a job is queued: a 5-way net on 10-class
// data must fail there, on the login node, not as a crash or a refusal hours later in the job.
TEST_F(LabelLimits, CheckReadsTheLabelsAndRefusesOnesPastTheClassifier) {
    const fs::path config = workspace_with_outputs(2);
    const auto result =
        run_shell(std::string(DLTRAIN_BINARY) + " check --config " + config.string());
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_NE(result.output.find("tiny.yaml:3: layer 'data': record "), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("has 2 outputs (labels 0 to 1)"), std::string::npos)
        << result.output;
    // With outputs for every label the same data checks ok.
    const auto fine = run_shell(std::string(DLTRAIN_BINARY) + " check --config " +
                                workspace_with_outputs(3).string());
    EXPECT_EQ(fine.exit_code, 0) << fine.output;
    EXPECT_NE(fine.output.find(": ok"), std::string::npos) << fine.output;
}

TEST_F(LabelLimits, TestRefusesLabelsPastTheClassifiersOutputs) {
    // The labels are checked before the weights are read: none are needed to see the mismatch.
    const fs::path config = workspace_with_outputs(2);
    const auto result =
        run_shell(std::string(DLTRAIN_BINARY) + " test --device cpu --config " + config.string() +
                  " --weights " + (m_dir.path() / "none.ckpt").string() + " --threads 1");
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_NE(result.output.find("tiny.yaml:5: layer 'data': record "), std::string::npos)
        << result.output;
    EXPECT_NE(result.output.find("test-labels-idx1-ubyte has label 2"), std::string::npos)
        << result.output;
}

TEST_F(LabelLimits, ABatchWithABadLabelNamesItsRecordAndIsNotHandedOut) {
    dl::data::IdxDataset set;
    set.count = 6;
    set.height = 1;
    set.width = 1;
    set.pixels = {10, 11, 12, 13, 14, 15};
    set.labels = {0, 1, 2, 0, 7, 1};
    const dl::data::LabelLimit limit{3, "net.yaml:4: layer 'd'", "labels.idx", "layer 'ip'"};
    dl::data::BatchReader reader(set, 3, 1.0F, dl::data::SampleOrder(set.count, std::nullopt), 0, 2,
                                 0, 1, {}, {}, limit);
    std::vector<float> data(3, -1.0F);
    std::vector<float> labels(3, -1.0F);
    reader.next(data.data(), labels.data());
    EXPECT_EQ(labels, (std::vector<float>{0.0F, 1.0F, 2.0F}));
    std::fill(labels.begin(), labels.end(), -1.0F);
    try {
        reader.next(data.data(), labels.data());
        ADD_FAILURE() << "a batch with label 7 of 3 classes was handed out";
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::config);
        EXPECT_EQ(std::string(e.what()),
                  "net.yaml:4: layer 'd': record 4 of labels.idx has label 7, but layer 'ip' has "
                  "3 outputs (labels 0 to 2): give the classifier one output per class of the "
                  "data");
    }
    EXPECT_EQ(labels, (std::vector<float>(3, -1.0F))) << "nothing copied";
    // The whole set at once, as train and test check it before they start.
    const auto bad = dl::data::first_bad_label(set, limit);
    ASSERT_TRUE(bad.has_value());
    EXPECT_NE(bad->find("record 4 of labels.idx has label 7"), std::string::npos) << *bad;
    EXPECT_FALSE(dl::data::first_bad_label(set, {8, "", "", ""}).has_value());
    EXPECT_FALSE(dl::data::first_bad_label(set, {}).has_value()) << "no layer reads the labels";
}

TEST_F(LabelLimits, TheNetNamesTheFewestOutputsThatReadItsLabels) {
    dl::NetConfig config = dl::parse_config(dl_test::tiny_net_yaml(10), "tiny.yaml");
    for (auto& layer : config.layers) {
        if (layer.type == "Data") {
            layer.shape = {1, 8, 8};
        }
    }
    auto backend = dl::make_backend("cpu", 1);
    dl::Net train(config, dl::Phase::train, *backend, 1);
    ASSERT_EQ(train.inputs().size(), 1U);
    EXPECT_EQ(train.inputs()[0].label_classes, 3);
    EXPECT_NE(train.inputs()[0].label_reader.find("layer 'ip2'"), std::string::npos)
        << train.inputs()[0].label_reader;
    EXPECT_NE(train.inputs()[0].label_reader.find("'loss'"), std::string::npos)
        << train.inputs()[0].label_reader;
}

TEST_F(LabelLimits, TheCpuLossAndAccuracyStayInTheirRowsForALabelPastThem) {
    // The reader refuses such labels; called directly, the ops still write and read only their
    // rows (a guard value after the last row stays as it was) and ignore the bad row.
    auto backend = dl::make_backend("cpu", 1);
    constexpr int rows = 2;
    constexpr int classes = 3;
    constexpr float guard = 12345.0F;
    const std::vector<float> logits = {1.0F, 2.0F, 3.0F, 0.5F, 0.25F, 0.125F};
    const std::vector<float> labels = {2.0F, 3.0F}; // the second is past its row
    std::vector<float> prob(rows * classes + 1, guard);
    std::vector<float> loss(1, 0.0F);
    backend->softmax_loss_forward(rows, classes, logits.data(), labels.data(), prob.data(),
                                  loss.data());
    EXPECT_EQ(prob.back(), guard);
    EXPECT_TRUE(std::isfinite(loss[0]));
    std::vector<float> dlogits(rows * classes + 1, guard);
    backend->softmax_loss_backward(rows, classes, prob.data(), labels.data(), 1.0F, dlogits.data());
    EXPECT_EQ(dlogits.back(), guard) << "d[label] -= scale wrote past the last row";
    std::vector<float> accuracy(1, -1.0F);
    const std::vector<float> far_labels = {2.0F, 1e9F};
    backend->accuracy(rows, classes, 1, logits.data(), far_labels.data(), accuracy.data());
    EXPECT_FLOAT_EQ(accuracy[0], 0.5F) << "the bad row counts as wrong";
}

} // namespace
