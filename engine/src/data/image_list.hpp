#pragma once
// Caffe's ImageData source: a text file of `path label` lines (the label after the last space,
// so paths may hold spaces), each path after `root_folder` (joined as Caffe joins them, by
// concatenation). Every image is decoded (data/image_decode.hpp: colour in Caffe's BGR, or grey
// with is_color false) and resized to new_height x new_width when both are set, else all must
// share the first image's size; the set is kept in memory as the other readers keep theirs.

#include "data/data_budget.hpp"
#include "data/idx_dataset.hpp"

#include <filesystem>
#include <functional>

namespace dl::data {

struct ImageListOptions {
    /// The file of one image: root_folder + the line's path, resolved as the config's data paths.
    std::function<std::filesystem::path(const std::string& name)> image_path;
    int new_height = 0; // with new_width: every image resized to it; 0: kept as it is
    int new_width = 0;
    bool is_color = true;
};

/// The images and labels of `list`; throws dl::Error(config) naming the list, the line and the
/// image for a missing label, an unreadable image or one of another size, and a set that would
/// pass `budget`.
IdxDataset load_image_list(const std::filesystem::path& list, const ImageListOptions& options,
                           const DataBudget& budget = {});

/// The count and one image's shape, decoding at most the first image.
IdxDataset read_image_list_header(const std::filesystem::path& list,
                                  const ImageListOptions& options);

} // namespace dl::data
