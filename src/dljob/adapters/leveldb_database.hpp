#pragma once
// LevelDB databases (libleveldb), read-only, behind a header that shows no LevelDB type: what
// `dljob pack` needs to pack Caffe's older databases of Datums (convert_imageset -backend
// leveldb, create_mnist.sh with BACKEND=leveldb). LevelDB is optional at build time
// (DLJOB_LEVELDB): without it a LevelDB is still recognised, and reading one says how to.

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dljob::adapters {

/// Whether `directory` is a LevelDB (it holds CURRENT, and no LMDB data.mdb).
bool is_leveldb_directory(const std::string& directory);

/// Calls `visit` for every record of the LevelDB in `directory`, in key order (bytewise, as
/// LMDB's), stopping at the first error it returns. Nothing in `directory` is written (LevelDB
/// works in a temporary shadow of links), so a read-only database reads too. A database that
/// cannot be opened or read (damaged: a bad log record is an error, never dropped; held by a
/// writer for over a minute), or a build without LevelDB, is a config_invalid error naming it.
/// The views live until `visit` returns.
Result<void>
for_each_leveldb_record(const std::string& directory,
                        const std::function<Result<void>(std::uint64_t index, std::string_view key,
                                                         std::string_view value)>& visit);

} // namespace dljob::adapters
