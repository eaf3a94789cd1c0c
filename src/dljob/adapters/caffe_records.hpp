#pragma once
// Caffe's databases of Datums (LMDB, LevelDB) for `dljob pack`, through the engine's record
// reader (dl_records, engine/include/dl/records.hpp): the same code reads a record when dljob
// packs it and when dltrain trains on it. The only dljob file that sees that header.

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dljob::adapters {

/// Whether `directory` is an LMDB environment (it holds data.mdb), as Caffe's LMDBs are.
bool is_lmdb_directory(const std::string& directory);
/// Whether `directory` is a LevelDB (it holds CURRENT, and no LMDB data.mdb).
bool is_leveldb_directory(const std::string& directory);

using RecordVisit =
    std::function<Result<void>(std::uint64_t index, std::string_view key, std::string_view value)>;

/// Calls `visit` for every record in key order, stopping at the first error it returns. Nothing
/// in `directory` is written. A database that cannot be opened or read (damaged: a bad LevelDB
/// log record is an error, never dropped; a LevelDB held by a writer for over a minute), or a
/// LevelDB in a build without LevelDB, is a config_invalid error naming it. The views live until
/// `visit` returns.
Result<void> for_each_lmdb_record(const std::string& directory, const RecordVisit& visit);
Result<void> for_each_leveldb_record(const std::string& directory, const RecordVisit& visit);

/// One Datum's fields (caffe.proto), decoded by the engine's reader.
struct CaffeDatum {
    std::uint64_t channels = 0;
    std::uint64_t height = 0;
    std::uint64_t width = 0;
    std::string data; // C x H x W bytes, or a whole image file when encoded
    std::int64_t label = 0;
    bool encoded = false;
    bool float_data = false; // the values are floats (float_data), not bytes
};

/// A malformed or truncated Datum is a config_invalid error saying where.
Result<CaffeDatum> decode_datum(std::string_view value);

} // namespace dljob::adapters
