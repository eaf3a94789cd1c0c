#pragma once
// A reader thread that turns bytes into scaled float batches ahead of the training loop, with a
// bounded queue (depth batches); next() measures how long the loop waited.

#include "data/idx_dataset.hpp"
#include "data/sample_order.hpp"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace dl::data {

/// Caffe's crop_size and mirror (its DataTransformer): a crop_size x crop_size square of each
/// image, at a random offset in the train phase and in the centre in the test phase, flipped
/// left-right with probability 1/2 where `mirror` is set (in either phase, as Caffe does).
struct CropMirror {
    int crop_size = 0; // 0: whole images
    bool mirror = false;
    bool train = true;
    std::uint32_t seed = 0; // solver.random_seed
};

/// Where the image at stream position `position` is cut and whether it is flipped. A pure
/// function of (seed, phase, position), so a resumed run and every rank of a data-parallel run
/// draw what an unbroken single run draws: key = SplitMix64(2 seed + test).next(); the image's
/// draws come from SplitMix64(SplitMix64(key + position).next()): mirror (below(2) == 1, only
/// when mirroring), then the row and the column offset (below(H - crop + 1), below(W - crop + 1),
/// only when cropping in the train phase). Caffe draws in the same order, from its own stream.
struct CropDraw {
    int row = 0;
    int column = 0;
    bool flip = false;
};
CropDraw crop_draw(const CropMirror& transform, std::uint64_t position, int height, int width);

class BatchReader {
public:
    /// Batches start at `cursor`, a position in the stream of all epochs, and go on in
    /// `order`'s order (file order with wrap-around when it has no seed). Data parallel: the
    /// stream is cut into global batches of `ranks` x `batch`, and this reader hands out slice
    /// `rank` of each (positions cursor + rank*batch ... + batch - 1); the cursor counts global
    /// positions, so every rank's is the same and a checkpoint's holds for every N. Each value
    /// becomes (pixel - mean) * scale, Caffe's transform; `mean` holds one value per channel, or
    /// one for all, or one per pixel (a mean image, C x H x W, indexed by the pixel's place in
    /// the whole image, as Caffe's), or none (0); then `crop` cuts and flips (CropMirror).
    BatchReader(const IdxDataset& set, int batch, float scale, SampleOrder order,
                std::uint64_t cursor, int depth = 4, int rank = 0, int ranks = 1,
                std::vector<float> mean = {}, CropMirror crop = {});
    ~BatchReader();
    BatchReader(const BatchReader&) = delete;
    BatchReader& operator=(const BatchReader&) = delete;
    BatchReader(BatchReader&&) = delete;
    BatchReader& operator=(BatchReader&&) = delete;

    /// Copies the next batch into data (batch x image) and labels (batch; may be null).
    /// Returns the seconds spent waiting for it.
    double next(float* data, float* labels);
    /// The stream position the next batch handed out starts at (saved in checkpoints).
    [[nodiscard]] std::uint64_t cursor() const { return m_consumer_cursor; }
    /// Stream positions one next() moves the cursor by (the global batch).
    [[nodiscard]] std::uint64_t stride() const { return m_stride; }

private:
    struct Slot {
        std::vector<float> data;
        std::vector<float> labels;
    };
    void run();

    const IdxDataset& m_set;
    int m_batch;
    std::uint64_t m_offset; // rank x batch
    std::uint64_t m_stride; // ranks x batch
    float m_scale;
    std::vector<float> m_mean; // per channel, or per pixel
    CropMirror m_crop;
    SampleOrder m_order; // used by the reader thread only
    std::uint64_t m_consumer_cursor;
    std::uint64_t m_producer_cursor;
    std::vector<Slot> m_slots;
    std::size_t m_head = 0; // next slot to hand out
    std::size_t m_filled = 0;
    bool m_stop = false;
    std::mutex m_mutex;
    std::condition_variable m_ready;
    std::condition_variable m_space;
    std::thread m_thread;
};

} // namespace dl::data
