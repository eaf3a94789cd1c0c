#pragma once
// CIFAR-10's "binary version" (data_batch_1.bin ... data_batch_5.bin, test_batch.bin): records
// of 1 label byte and 3072 pixel bytes (32 x 32 red, then green, then blue, rows top to bottom),
// no header. Read straight into an IdxDataset of 3 x 32 x 32 images, in the channel order of the
// file (RGB; Caffe's convert_cifar_data keeps it too).
//
// A Data layer's source is CIFAR when it ends in ".bin"; its file name may hold a glob
// ("data_batch_*.bin"), whose matches are read in name order as one set. Labels are in the same
// records: label_source is the same string as source, or empty for none.

#include "data/idx_dataset.hpp"

#include <filesystem>

namespace dl::data {

constexpr int k_cifar_side = 32;
constexpr std::size_t k_cifar_image = 3U * k_cifar_side * k_cifar_side;
constexpr std::size_t k_cifar_record = 1 + k_cifar_image;

/// True for a source that names CIFAR-10 binary batches.
bool is_cifar_source(const std::filesystem::path& source);

/// The files a CIFAR source names (a glob expanded, in name order). Throws dl::Error(config)
/// when a glob matches nothing.
std::vector<std::filesystem::path> cifar_files(const std::filesystem::path& source);

/// Every record of every file. Each file's size must be a positive multiple of 3073 bytes and
/// each label 0..9; otherwise dl::Error(config) names the file and what is wrong (a CIFAR-100
/// file, with two label bytes per record, fails one of the two).
IdxDataset load_cifar(const std::filesystem::path& source, bool with_labels);

/// The count and shape without reading the pixels (the sizes are checked all the same).
IdxDataset read_cifar_header(const std::filesystem::path& source);

} // namespace dl::data
