#pragma once
// A reader thread that turns bytes into scaled float batches ahead of the training loop, with a
// bounded queue (depth batches); next() measures how long the loop waited.

#include "data/idx_dataset.hpp"
#include "data/sample_order.hpp"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
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

/// The labels a Data layer's records may have: 0 to classes - 1, the outputs of the classifier
/// that reads them (SoftmaxWithLoss, Accuracy), which index a row of scores by the label: a
/// larger one would read and write past the row. classes 0: no layer reads them, no limit.
struct LabelLimit {
    int classes = 0;
    std::string where;  // "config:line: layer 'name'" of the Data layer, for messages
    std::string source; // the file or database the labels come from, for messages
    std::string reader; // the layer whose outputs set the limit, for messages
};

/// The message for record `index` (in file or key order, from 0) whose label is past `limit`.
std::string label_error(const LabelLimit& limit, std::size_t index, int label);

/// The first record of `set` whose label is past `limit`, as label_error's message: one pass
/// over the labels in memory, so a bad record anywhere is refused before the run starts.
std::optional<std::string> first_bad_label(const IdxDataset& set, const LabelLimit& limit);

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
    /// Each batch's labels are checked against `labels` as the batch is made.
    BatchReader(const IdxDataset& set, int batch, float scale, SampleOrder order,
                std::uint64_t cursor, int depth = 4, int rank = 0, int ranks = 1,
                std::vector<float> mean = {}, CropMirror crop = {}, LabelLimit labels = {});
    ~BatchReader();
    BatchReader(const BatchReader&) = delete;
    BatchReader& operator=(const BatchReader&) = delete;
    BatchReader(BatchReader&&) = delete;
    BatchReader& operator=(BatchReader&&) = delete;

    /// Copies the next batch into data (batch x image) and labels (batch; may be null).
    /// Returns the seconds spent waiting for it. A batch with a label past the LabelLimit is
    /// dl::Error(config) naming the first such record, and nothing is copied.
    double next(float* data, float* labels);
    /// The stream position the next batch handed out starts at (saved in checkpoints).
    [[nodiscard]] std::uint64_t cursor() const { return m_consumer_cursor; }
    /// Stream positions one next() moves the cursor by (the global batch).
    [[nodiscard]] std::uint64_t stride() const { return m_stride; }

private:
    struct Slot {
        std::vector<float> data;
        std::vector<float> labels;
        std::string error; // label_error's message for the batch's first bad label, if any
    };
    void run();
    /// Makes the batch at the producer cursor in `slot`: values, labels, a label error.
    void fill(Slot& slot);
    /// One image into `out`, transformed: bytes or Caffe's float_data values alike.
    template <typename Pixel>
    void transform(const Pixel* pixels, float* out, std::uint64_t position) const;

    const IdxDataset& m_set;
    int m_batch;
    std::uint64_t m_offset; // rank x batch
    std::uint64_t m_stride; // ranks x batch
    float m_scale;
    std::vector<float> m_mean; // per channel, or per pixel
    CropMirror m_crop;
    LabelLimit m_labels;
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
