#pragma once
// Caffe's databases of Datums, LMDB and LevelDB (convert_imageset, convert_mnist_data,
// convert_cifar_data), read record by record in key order, and a Datum decoded: the one reader
// of them that dltrain's Data layer (data/lmdb_dataset.cpp, data/leveldb_dataset.cpp) and
// `dljob pack` share. Built as its own small library, dl_records (engine/src/records/), which
// dljob links: the single place where dljob uses engine code, so that a record packs as it
// trains (tests/arch/include_rules.txt).
//
// Errors are dl::Error(config) naming the database and the failing call: a database that cannot
// be opened or read, a damaged one (a LevelDB's damaged log record is an error, never dropped),
// a LevelDB held by a writer for over a minute, a LevelDB in a build without LevelDB. Nothing in
// a database's directory is written, renamed or removed.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

/// A directory holding an LMDB data file (data.mdb).
bool is_lmdb(const std::filesystem::path& source);
/// A directory holding a LevelDB's CURRENT file and no LMDB data file.
bool is_leveldb(const std::filesystem::path& source);
/// Whether this build reads LevelDB (libleveldb was found when it was configured).
bool leveldb_available();

/// Called with each record's index, key and value; the views live until it returns. Returning
/// false stops the walk there.
using RecordVisitor =
    std::function<bool(std::size_t index, std::string_view key, std::string_view value)>;

/// Every record of the LMDB in key order (LMDB's byte order, as Caffe's Data layer reads it),
/// opened as Caffe opens it (read-only, no thread-local reader slots), again without the lock
/// file where that cannot be created (a read-only file system). Returns the records visited.
std::size_t for_each_lmdb_record(const std::filesystem::path& source, const RecordVisitor& visit);
/// The number of records LMDB counts, without reading them.
std::size_t lmdb_record_count(const std::filesystem::path& source);
/// Every record of the LevelDB in key order (bytewise, LMDB's too). Returns the records visited.
/// A database a writer holds is waited for up to a minute, or until `give_up` says (dltrain's
/// stop signal).
std::size_t for_each_leveldb_record(const std::filesystem::path& source, const RecordVisitor& visit,
                                    const std::function<bool()>& give_up = {});

/// One Datum (caffe.proto): channels = 1, height = 2, width = 3, data = 4 (C x H x W bytes, or a
/// whole PNG/JPEG/PPM file when encoded), label = 5, float_data = 6 (C x H x W floats used
/// instead of data; packed or not: both are in Caffe databases in the wild), encoded = 7.
struct Datum {
    int channels = 0;
    int height = 0;
    int width = 0;
    std::vector<std::uint8_t> data;
    std::vector<float> float_data;
    std::int64_t label = 0;
    bool encoded = false;
};

/// Decodes one serialized Datum by hand (seven fields of protobuf's wire format: no protobuf
/// library needed); throws dl::Error(config) naming `what` and the byte offset for a truncated
/// or malformed message.
Datum parse_datum(const std::uint8_t* bytes, std::size_t size, const std::string& what);

} // namespace dl
