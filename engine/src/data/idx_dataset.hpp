#pragma once
// IDX (MNIST-format) images and labels, .gz or raw, kept as bytes in memory (47 MB for the
// 60,000 MNIST training images) and scaled to float one batch at a time.
//
// The same calls read packed datasets (`dljob pack`, data/pack_reader.hpp) in place:
//   - a path inside a pack directory that does not exist as a file names a member
//     (`<pack>/train-images-idx3-ubyte.gz`), read with one pread and gunzipped in memory;
//   - a pack directory itself, or a directory inside one (`<pack>/train`), is a set of image
//     members (PNG, JPEG, binary PGM/PPM) decoded in index order; their labels come from the
//     index when label_source names the same path (or the pack, or its index.tsv).

#include "data/data_budget.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dl::data {

struct IdxDataset {
    std::size_t count = 0;
    int channels = 1;
    int height = 0;
    int width = 0;
    std::vector<std::uint8_t> pixels; // count x channels x height x width
    // Instead of pixels, for Caffe's float_data Datums (data/datum_dataset.hpp): the same layout,
    // transformed as bytes are ((value - mean) * scale). Never both.
    std::vector<float> float_pixels;
    // count, empty when no label file. Caffe's labels are int32 (ImageNet's go to 999); IDX
    // and CIFAR files hold bytes.
    std::vector<std::int32_t> labels;
    [[nodiscard]] std::size_t image_size() const {
        return static_cast<std::size_t>(channels) * height * width;
    }
};

/// Throws dl::Error(config) naming the path for a missing, unreadable or malformed file, and for
/// one whose images (or whose gzip stream) would pass `budget` in memory.
IdxDataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                    const DataBudget& budget = {});

/// Reads only the header: count, channels, height, width (a gzipped member of a pack is
/// inflated whole to read it, within `budget`).
IdxDataset read_idx_header(const std::filesystem::path& images, const DataBudget& budget = {});

/// A Caffe Data layer's `backend` (data_param: "lmdb" or "leveldb"; empty: none said, the
/// source's files decide) against what `source` is: a mismatch, or a source that is no
/// database, is a dl::Error(config) saying which backend to name.
void check_backend(const std::filesystem::path& source, const std::string& backend);

} // namespace dl::data
