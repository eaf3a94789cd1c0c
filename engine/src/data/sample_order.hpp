#pragma once
// The order a Data layer hands out its images in. Unshuffled: file order, wrapping around (what
// Caffe's Data layer does over an LMDB). Shuffled: every epoch is a fresh permutation and a pure
// function of (seed, epoch), so a checkpoint needs only the position in the stream to resume
// mid-epoch bit for bit, and bench/lenet_cpu/sample_order.py can give PyTorch the same order.

#include <cstdint>
#include <optional>
#include <vector>

namespace dl::data {

/// Steele, Lea and Flood's SplitMix64: the draws behind the shuffles and the crops, cheap to
/// start anywhere, so a draw can be a function of a stream position.
class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t state) : m_state(state) {}
    std::uint64_t next() {
        m_state += 0x9E3779B97F4A7C15ULL;
        std::uint64_t z = m_state;
        z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31U);
    }
    /// Uniform in [0, bound): draws below 2^64 mod bound are thrown away, so that every value
    /// is equally likely (a plain modulo would favour the small ones).
    std::uint64_t below(std::uint64_t bound) {
        const std::uint64_t threshold = (0 - bound) % bound;
        while (true) {
            const std::uint64_t draw = next();
            if (draw >= threshold) {
                return draw % bound;
            }
        }
    }

private:
    std::uint64_t m_state;
};

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
