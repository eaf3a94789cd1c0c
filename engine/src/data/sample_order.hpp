#pragma once
// The order a Data layer hands out its images in. Unshuffled: file order, wrapping around (what
// Caffe's Data layer does over an LMDB). Shuffled: every epoch is a fresh permutation and a pure
// function of (seed, epoch), so a checkpoint needs only the position in the stream to resume
// mid-epoch bit for bit, and bench/lenet_cpu/sample_order.py can give PyTorch the same order.

#include <cstdint>
#include <optional>
#include <vector>

namespace dl::data {

/// Epoch `epoch`'s order of images 0..order.size()-1: Fisher-Yates from the last position down,
/// each swap partner drawn uniformly (by rejection, no modulo bias) from SplitMix64 started at
/// seed * 2^32 + epoch.
void shuffled_epoch(std::uint32_t seed, std::uint64_t epoch, std::vector<std::uint32_t>& order);

class SampleOrder {
public:
    /// No seed: file order.
    SampleOrder(std::uint64_t count, std::optional<std::uint32_t> shuffle_seed);
    /// The image at `position` in the stream of all epochs (epoch = position / count). Computes
    /// an epoch's permutation when the position enters it, in the buffer made here.
    std::uint32_t at(std::uint64_t position);

private:
    std::uint64_t m_count;
    std::optional<std::uint32_t> m_seed;
    std::vector<std::uint32_t> m_order;
    std::uint64_t m_epoch = UINT64_MAX; // the epoch m_order holds
};

} // namespace dl::data
