#pragma once
// Caffe's LMDB databases (convert_imageset, convert_mnist_data, convert_cifar_data): one Datum per
// record (data/datum_dataset.hpp), read in key order into an IdxDataset; the database itself is
// read by dl_records (dl/records.hpp).
//
// A Data layer's source is an LMDB when it is a directory holding data.mdb. Its labels are in the
// Datums: label_source is the same path, or empty for none.

#include "data/data_budget.hpp"
#include "data/datum_dataset.hpp"
#include "data/idx_dataset.hpp"

#include <filesystem>

namespace dl::data {

/// True when `source` is a directory with an LMDB data file (data.mdb).
bool is_lmdb_source(const std::filesystem::path& source);

/// Every record in key order (DatumSet's rules); a database LMDB cannot open or read is a
/// dl::Error(config) naming it and the LMDB call that failed.
IdxDataset load_lmdb(const std::filesystem::path& source, bool with_labels,
                     const DataBudget& budget);

/// The count (LMDB's own) and the shape of the first record.
IdxDataset read_lmdb_header(const std::filesystem::path& source);

} // namespace dl::data
