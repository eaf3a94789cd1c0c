#pragma once
// Caffe's HDF5Data source: a text file naming one HDF5 file per line, each holding a dataset
// per top of the layer (`data`: N x C x H x W, or N x D; `label`: N, or N x 1, of whole
// numbers), read whole through Debian's libhdf5 and kept as float values in file order, as the
// other readers keep theirs. The one file that includes hdf5.h is hdf5_dataset.cpp; a build
// without libhdf5 (DLJOB_HDF5=OFF) refuses the source, saying so.

#include "data/data_budget.hpp"
#include "data/idx_dataset.hpp"

#include <filesystem>
#include <functional>
#include <string>

namespace dl::data {

struct Hdf5Options {
    /// The file of one list line, resolved as the config's data paths.
    std::function<std::filesystem::path(const std::string& name)> file_path;
    std::string data_name;  // the layer's first top: the dataset of the values
    std::string label_name; // its second top, or empty: the dataset of the labels
};

/// Whether this dltrain was built with libhdf5.
bool hdf5_available();

/// Every file of `list` in order, as one set; throws dl::Error(config) naming the list, its
/// line, the file and the dataset for a missing or unreadable one, one of another shape than the
/// first file's, a label that is not a whole number from 0 to 2^31 - 1, and a set that would
/// pass `budget`.
IdxDataset load_hdf5_list(const std::filesystem::path& list, const Hdf5Options& options,
                          const DataBudget& budget = {});

/// The count (every file's) and one item's shape, reading only the datasets' dimensions.
IdxDataset read_hdf5_list_header(const std::filesystem::path& list, const Hdf5Options& options);

} // namespace dl::data
