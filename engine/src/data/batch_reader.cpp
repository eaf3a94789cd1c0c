#include "data/batch_reader.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace dl::data {

BatchReader::BatchReader(const IdxDataset& set, int batch, float scale, SampleOrder order,
                         std::uint64_t cursor, int depth, int rank, int ranks,
                         std::vector<float> mean)
    : m_set(set), m_batch(batch),
      m_offset(static_cast<std::uint64_t>(rank) * static_cast<std::uint64_t>(batch)),
      m_stride(static_cast<std::uint64_t>(ranks) * static_cast<std::uint64_t>(batch)),
      m_scale(scale),
      m_mean(mean.size() == 1 ? std::vector<float>(static_cast<std::size_t>(set.channels), mean[0])
                              : std::move(mean)),
      m_order(std::move(order)), m_consumer_cursor(cursor), m_producer_cursor(cursor),
      m_slots(static_cast<std::size_t>(std::max(depth, 1))) {
    for (auto& slot : m_slots) {
        slot.data.resize(static_cast<std::size_t>(batch) * set.image_size());
        slot.labels.resize(static_cast<std::size_t>(batch));
    }
    m_thread = std::thread([this] { run(); });
}

BatchReader::~BatchReader() {
    {
        const std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_space.notify_all();
    m_thread.join();
}

void BatchReader::run() {
    const std::size_t image = m_set.image_size();
    std::size_t tail = 0;
    while (true) {
        {
            std::unique_lock lock(m_mutex);
            m_space.wait(lock, [this] { return m_stop || m_filled < m_slots.size(); });
            if (m_stop) {
                return;
            }
        }
        // The slot at tail is free: only this thread writes it until it is counted as filled.
        Slot& slot = m_slots[tail];
        for (int i = 0; i < m_batch; ++i) {
            const std::size_t index =
                m_order.at(m_producer_cursor + m_offset + static_cast<std::uint64_t>(i));
            const std::uint8_t* pixels = m_set.pixels.data() + index * image;
            float* out = slot.data.data() + static_cast<std::size_t>(i) * image;
            if (m_mean.empty()) {
                for (std::size_t p = 0; p < image; ++p) {
                    out[p] = static_cast<float>(pixels[p]) * m_scale;
                }
            } else {
                // Per channel: planes of H x W values; a mean image is planes of one value.
                const std::size_t plane = image / m_mean.size();
                for (std::size_t p = 0; p < image; ++p) {
                    out[p] = (static_cast<float>(pixels[p]) - m_mean[p / plane]) * m_scale;
                }
            }
            slot.labels[static_cast<std::size_t>(i)] =
                m_set.labels.empty() ? 0.0F : static_cast<float>(m_set.labels[index]);
        }
        m_producer_cursor += m_stride;
        tail = (tail + 1) % m_slots.size();
        {
            const std::lock_guard lock(m_mutex);
            ++m_filled;
        }
        m_ready.notify_one();
    }
}

double BatchReader::next(float* data, float* labels) {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(m_mutex);
    m_ready.wait(lock, [this] { return m_filled > 0; });
    const auto waited = std::chrono::steady_clock::now() - start;
    const Slot& slot = m_slots[m_head];
    lock.unlock();
    std::copy(slot.data.begin(), slot.data.end(), data);
    if (labels != nullptr) {
        std::copy(slot.labels.begin(), slot.labels.end(), labels);
    }
    lock.lock();
    m_head = (m_head + 1) % m_slots.size();
    --m_filled;
    lock.unlock();
    m_space.notify_one();
    m_consumer_cursor += m_stride;
    return std::chrono::duration<double>(waited).count();
}

} // namespace dl::data
