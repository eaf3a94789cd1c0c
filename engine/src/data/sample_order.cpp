#include "data/sample_order.hpp"

#include <utility>

namespace dl::data {

void shuffled_epoch(std::uint32_t seed, std::uint64_t epoch, std::vector<std::uint32_t>& order) {
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = static_cast<std::uint32_t>(i);
    }
    SplitMix64 rng((static_cast<std::uint64_t>(seed) << 32U) + epoch);
    for (std::size_t i = order.size(); i > 1; --i) {
        std::swap(order[i - 1], order[rng.below(i)]);
    }
}

SampleOrder::SampleOrder(std::uint64_t count, std::optional<std::uint32_t> shuffle_seed)
    : m_count(count), m_seed(shuffle_seed) {
    if (m_seed) {
        m_order.resize(count);
    }
}

std::uint32_t SampleOrder::at(std::uint64_t position) {
    if (!m_seed) {
        return static_cast<std::uint32_t>(position % m_count);
    }
    const std::uint64_t epoch = position / m_count;
    if (epoch != m_epoch) {
        shuffled_epoch(*m_seed, epoch, m_order);
        m_epoch = epoch;
    }
    return m_order[position % m_count];
}

} // namespace dl::data
