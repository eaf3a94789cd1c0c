#pragma once
// Caffe's LevelDB databases (its older datasets, `convert_imageset -backend leveldb`,
// create_mnist.sh with BACKEND=leveldb): one Datum per record (data/datum_dataset.hpp), read in
// key order into an IdxDataset, as LMDBs are. The only file that sees LevelDB's headers.
//
// LevelDB is optional at build time (libleveldb-dev; DLJOB_LEVELDB=AUTO finds it): a dltrain
// built without it still knows a LevelDB when it sees one and says that it cannot read it.
//
// A Data layer's source is a LevelDB when it is a directory holding CURRENT (LevelDB's pointer
// to its manifest) and no data.mdb. Its labels are in the Datums, as an LMDB's.

#include "data/data_budget.hpp"
#include "data/idx_dataset.hpp"

#include <filesystem>

namespace dl::data {

/// True when `source` is a directory with a LevelDB CURRENT file and no LMDB data file.
bool is_leveldb_source(const std::filesystem::path& source);

/// Every record in key order (LevelDB's default bytewise order, LMDB's too), by DatumSet's rules.
/// Nothing in the database's directory is written, renamed or removed (LevelDB's own writes stay
/// in memory). A database LevelDB cannot open (missing, damaged, a damaged log record included,
/// held by a LevelDB writer for longer than a minute) or a build without LevelDB is a
/// dl::Error(config) naming the database and why.
IdxDataset load_leveldb(const std::filesystem::path& source, bool with_labels,
                        const DataBudget& budget);

/// The count and the shape of the first record (LevelDB keeps no count: the keys are walked).
IdxDataset read_leveldb_header(const std::filesystem::path& source);

} // namespace dl::data
