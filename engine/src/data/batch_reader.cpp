#include "data/batch_reader.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace dl::data {

std::string label_error(const LabelLimit& limit, std::size_t index, int label) {
    return fmt::format("{}: record {} of {} has label {}, but {} has {} outputs (labels 0 to {}): "
                       "give the classifier one output per class of the data",
                       limit.where, index, limit.source, label, limit.reader, limit.classes,
                       limit.classes - 1);
}

std::optional<std::string> first_bad_label(const IdxDataset& set, const LabelLimit& limit) {
    if (limit.classes <= 0) {
        return std::nullopt;
    }
    for (std::size_t i = 0; i < set.labels.size(); ++i) {
        if (set.labels[i] >= limit.classes) {
            return label_error(limit, i, set.labels[i]);
        }
    }
    return std::nullopt;
}

CropDraw crop_draw(const CropMirror& transform, std::uint64_t position, int height, int width) {
    CropDraw draw;
    const int crop = transform.crop_size;
    if (crop > 0 && !transform.train) {
        draw.row = (height - crop) / 2;
        draw.column = (width - crop) / 2;
    }
    if (!transform.mirror && (crop == 0 || !transform.train)) {
        return draw;
    }
    const std::uint64_t key =
        SplitMix64(2 * static_cast<std::uint64_t>(transform.seed) + (transform.train ? 0 : 1))
            .next();
    SplitMix64 rng(SplitMix64(key + position).next());
    if (transform.mirror) {
        draw.flip = rng.below(2) == 1;
    }
    if (crop > 0 && transform.train) {
        // crop <= height and width (checked when the net is built), so these are at least 1.
        const auto rows = static_cast<std::uint64_t>(height - crop) + 1;
        const auto columns = static_cast<std::uint64_t>(width - crop) + 1;
        draw.row = static_cast<int>(rng.below(rows));
        draw.column = static_cast<int>(rng.below(columns));
    }
    return draw;
}

BatchReader::BatchReader(const IdxDataset& set, int batch, float scale, SampleOrder order,
                         std::uint64_t cursor, int depth, int rank, int ranks,
                         std::vector<float> mean, CropMirror crop, LabelLimit labels)
    : m_set(set), m_batch(batch),
      m_offset(static_cast<std::uint64_t>(rank) * static_cast<std::uint64_t>(batch)),
      m_stride(static_cast<std::uint64_t>(ranks) * static_cast<std::uint64_t>(batch)),
      m_scale(scale),
      m_mean(mean.size() == 1 ? std::vector<float>(static_cast<std::size_t>(set.channels), mean[0])
                              : std::move(mean)),
      m_crop(crop), m_labels(std::move(labels)), m_order(std::move(order)),
      m_consumer_cursor(cursor), m_producer_cursor(cursor),
      m_slots(static_cast<std::size_t>(std::max(depth, 1))) {
    for (auto& slot : m_slots) {
        const std::size_t side = static_cast<std::size_t>(crop.crop_size);
        slot.data.resize(static_cast<std::size_t>(batch) *
                         (crop.crop_size > 0 ? static_cast<std::size_t>(set.channels) * side * side
                                             : set.image_size()));
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

template <typename Pixel>
void BatchReader::transform(const Pixel* pixels, float* out, std::uint64_t position) const {
    const std::size_t image = m_set.image_size();
    // Per channel: planes of H x W values; a mean image is planes of one value.
    const std::size_t plane = m_mean.empty() ? image : image / m_mean.size();
    if (m_crop.crop_size == 0 && !m_crop.mirror) {
        if (m_mean.empty()) {
            for (std::size_t p = 0; p < image; ++p) {
                out[p] = static_cast<float>(pixels[p]) * m_scale;
            }
            return;
        }
        // Plane by plane: a division per pixel to find its mean cost the reader thread 3 ms
        // per cifar10_quick batch, CPU the training threads then lacked.
        for (std::size_t m = 0; m < m_mean.size(); ++m) {
            const float mean = m_mean[m];
            const std::size_t first = m * plane;
            for (std::size_t p = first; p < first + plane; ++p) {
                out[p] = (static_cast<float>(pixels[p]) - mean) * m_scale;
            }
        }
        return;
    }
    // Caffe's DataTransformer::Transform: the mean is taken at the pixel's place in the whole
    // image, and a flip mirrors the place it is written to.
    const auto channels = static_cast<std::size_t>(m_set.channels);
    const auto height = static_cast<std::size_t>(m_set.height);
    const auto width = static_cast<std::size_t>(m_set.width);
    const std::size_t out_height =
        m_crop.crop_size > 0 ? static_cast<std::size_t>(m_crop.crop_size) : height;
    const std::size_t out_width =
        m_crop.crop_size > 0 ? static_cast<std::size_t>(m_crop.crop_size) : width;
    const CropDraw draw = crop_draw(m_crop, position, m_set.height, m_set.width);
    for (std::size_t c = 0; c < channels; ++c) {
        for (std::size_t h = 0; h < out_height; ++h) {
            const std::size_t from = (c * height + h + static_cast<std::size_t>(draw.row)) * width +
                                     static_cast<std::size_t>(draw.column);
            float* row = out + (c * out_height + h) * out_width;
            for (std::size_t w = 0; w < out_width; ++w) {
                const std::size_t p = from + w;
                // p / plane without a division: the channel, or the pixel itself.
                const float mean = m_mean.empty() ? 0.0F : plane == 1 ? m_mean[p] : m_mean[c];
                row[draw.flip ? out_width - 1 - w : w] =
                    (static_cast<float>(pixels[p]) - mean) * m_scale;
            }
        }
    }
}

void BatchReader::fill(Slot& slot) {
    const std::size_t image = m_set.image_size();
    const auto side = static_cast<std::size_t>(m_crop.crop_size);
    const std::size_t out_image =
        m_crop.crop_size > 0 ? static_cast<std::size_t>(m_set.channels) * side * side : image;
    slot.error.clear();
    for (int i = 0; i < m_batch; ++i) {
        const std::uint64_t position = m_producer_cursor + m_offset + static_cast<std::uint64_t>(i);
        const std::size_t index = m_order.at(position);
        float* out = slot.data.data() + static_cast<std::size_t>(i) * out_image;
        if (!m_set.float_pixels.empty()) {
            transform(m_set.float_pixels.data() + index * image, out, position);
        } else {
            transform(m_set.pixels.data() + index * image, out, position);
        }
        const int label = m_set.labels.empty() ? 0 : m_set.labels[index];
        slot.labels[static_cast<std::size_t>(i)] = static_cast<float>(label);
        // Here, on the host and before any upload, so one check serves every backend: the loss
        // and accuracy index each row of scores by its label.
        if (m_labels.classes > 0 && label >= m_labels.classes && slot.error.empty()) {
            slot.error = label_error(m_labels, index, label);
        }
    }
}

void BatchReader::run() {
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
        fill(m_slots[tail]);
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
    if (!slot.error.empty()) {
        throw Error(ErrorKind::config, slot.error);
    }
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
