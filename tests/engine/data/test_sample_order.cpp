// The order Data layers hand out images in: file order with wrap-around, or with `shuffle: true`
// a fresh permutation every epoch that a resumed run (and the PyTorch twin in bench/lenet_cpu)
// reproduces from the stream position alone.

#include "data/batch_reader.hpp"
#include "data/sample_order.hpp"
#include "support/run_process.hpp"
#include "test_paths.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace {

using dl::data::SampleOrder;

std::vector<std::uint32_t> epoch(std::uint32_t seed, std::uint64_t index, std::size_t count) {
    std::vector<std::uint32_t> order(count);
    dl::data::shuffled_epoch(seed, index, order);
    return order;
}

bool is_permutation_of_indices(std::vector<std::uint32_t> order) {
    std::sort(order.begin(), order.end());
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (order[i] != i) {
            return false;
        }
    }
    return true;
}

TEST(SampleOrder, WithoutSeedIsFileOrderWrappingAround) {
    SampleOrder order(5, std::nullopt);
    std::vector<std::uint32_t> seen;
    for (std::uint64_t position = 0; position < 12; ++position) {
        seen.push_back(order.at(position));
    }
    EXPECT_EQ(seen, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1}));
}

TEST(SampleOrder, EveryEpochIsAFreshPermutationOfTheSeed) {
    const auto first = epoch(1701, 0, 1000);
    const auto second = epoch(1701, 1, 1000);
    EXPECT_TRUE(is_permutation_of_indices(first));
    EXPECT_TRUE(is_permutation_of_indices(second));
    std::vector<std::uint32_t> identity(1000);
    std::iota(identity.begin(), identity.end(), 0U);
    EXPECT_NE(first, identity);
    EXPECT_NE(first, second);
    EXPECT_EQ(first, epoch(1701, 0, 1000));
    EXPECT_NE(first, epoch(1702, 0, 1000));

    // Through SampleOrder: positions 1000..1999 are epoch 1, whichever epoch came before.
    SampleOrder order(1000, 1701U);
    EXPECT_EQ(order.at(1500), second[500]);
    EXPECT_EQ(order.at(2), first[2]);
    EXPECT_EQ(order.at(1999), second[999]);
}

TEST(SampleOrder, AllOrdersOfThreeImagesAreEquallyLikely) {
    // 6000 epochs of 3 images: each of the 6 orders about 1000 times. A swap partner drawn from
    // the wrong range (Sattolo's cycles, or a partner from the whole array) fails this.
    std::map<std::vector<std::uint32_t>, int> counts;
    for (std::uint64_t e = 0; e < 6000; ++e) {
        ++counts[epoch(42, e, 3)];
    }
    ASSERT_EQ(counts.size(), 6U);
    for (const auto& [order, count] : counts) {
        EXPECT_GT(count, 880) << order[0] << order[1] << order[2];
        EXPECT_LT(count, 1120) << order[0] << order[1] << order[2];
    }
}

TEST(SampleOrder, MatchesThePythonTwinThatPyTorchRunsUse) {
    const std::string command = std::string("/usr/bin/python3 ") + DLJOB_SOURCE_DIR +
                                "/bench/lenet_cpu/sample_order.py 1701 3 60000";
    const auto result = dljob::test::run_shell(command);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::istringstream lines(result.output);
    std::vector<std::uint32_t> python;
    for (std::uint32_t index = 0; lines >> index;) {
        python.push_back(index);
    }
    EXPECT_EQ(python, epoch(1701, 3, 60000));
}

dl::data::IdxDataset labelled_by_index(std::size_t count) {
    dl::data::IdxDataset set;
    set.count = count;
    set.channels = 1;
    set.height = 1;
    set.width = 1;
    for (std::size_t i = 0; i < count; ++i) {
        set.pixels.push_back(static_cast<std::uint8_t>(i));
        set.labels.push_back(static_cast<std::uint8_t>(i));
    }
    return set;
}

std::vector<float> next_labels(dl::data::BatchReader& reader, int batch) {
    std::vector<float> data(static_cast<std::size_t>(batch));
    std::vector<float> labels(static_cast<std::size_t>(batch));
    reader.next(data.data(), labels.data());
    return labels;
}

TEST(SampleOrder, ShuffledBatchesCrossEpochsAndResumeFromTheCursor) {
    const auto set = labelled_by_index(10);
    dl::data::BatchReader reader(set, 4, 1.0F, SampleOrder(10, 7U), 0);
    std::vector<float> stream;
    for (int b = 0; b < 5; ++b) {
        const auto labels = next_labels(reader, 4);
        stream.insert(stream.end(), labels.begin(), labels.end());
    }
    EXPECT_EQ(reader.cursor(), 20U);
    // Two whole epochs, each every image once, in the order SampleOrder gives.
    SampleOrder expected(10, 7U);
    for (std::size_t position = 0; position < stream.size(); ++position) {
        EXPECT_EQ(stream[position], static_cast<float>(expected.at(position))) << position;
    }
    std::vector<std::uint32_t> first(stream.begin(), stream.begin() + 10);
    EXPECT_TRUE(is_permutation_of_indices(first));
    std::vector<std::uint32_t> second(stream.begin() + 10, stream.end());
    EXPECT_TRUE(is_permutation_of_indices(second));
    EXPECT_NE(first, second);

    // A reader started at position 8 (mid-epoch, as a checkpoint records it) goes on the same.
    dl::data::BatchReader resumed(set, 4, 1.0F, SampleOrder(10, 7U), 8);
    for (std::size_t from = 8; from < 20; from += 4) {
        const auto labels = next_labels(resumed, 4);
        EXPECT_EQ(labels, std::vector<float>(stream.begin() + static_cast<long>(from),
                                             stream.begin() + static_cast<long>(from) + 4))
            << "batch from " << from;
    }
}

TEST(SampleOrder, ABatchLargerThanTheSetSpansSeveralEpochs) {
    // 3 images, batches of 8: one batch holds parts of three epochs, each a permutation.
    const auto set = labelled_by_index(3);
    dl::data::BatchReader reader(set, 8, 1.0F, SampleOrder(3, 11U), 0);
    std::vector<float> stream;
    for (int b = 0; b < 3; ++b) {
        const auto labels = next_labels(reader, 8);
        stream.insert(stream.end(), labels.begin(), labels.end());
    }
    for (std::size_t e = 0; e < 8; ++e) {
        const std::vector<std::uint32_t> window(stream.begin() + static_cast<long>(3 * e),
                                                stream.begin() + static_cast<long>(3 * e + 3));
        EXPECT_TRUE(is_permutation_of_indices(window)) << "epoch " << e;
        EXPECT_EQ(window, epoch(11, e, 3)) << "epoch " << e;
    }
}

} // namespace
