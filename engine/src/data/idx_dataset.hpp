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

#include <cstdint>
#include <filesystem>
#include <vector>

namespace dl::data {

struct IdxDataset {
    std::size_t count = 0;
    int channels = 1;
    int height = 0;
    int width = 0;
    std::vector<std::uint8_t> pixels; // count x channels x height x width
    std::vector<std::uint8_t> labels; // count, empty when no label file
    [[nodiscard]] std::size_t image_size() const {
        return static_cast<std::size_t>(channels) * height * width;
    }
};

/// Throws dl::Error(config) naming the path for a missing, unreadable or malformed file.
IdxDataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels);

/// Reads only the header: count, channels, height, width.
IdxDataset read_idx_header(const std::filesystem::path& images);

} // namespace dl::data
