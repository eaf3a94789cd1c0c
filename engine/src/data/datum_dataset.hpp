#pragma once
// Caffe's Datum records, the values of its LMDB and LevelDB databases (convert_imageset,
// convert_mnist_data, convert_cifar_data), turned into an IdxDataset (all in memory, as the IDX and
// CIFAR readers do). The databases' own files are read by lmdb_dataset.cpp and
// leveldb_dataset.cpp; what a record means is decided here once, so both give the same images.
//
// Datum (caffe.proto): channels = 1, height = 2, width = 3 (varints), data = 4 (bytes:
// C x H x W uint8, or a whole PNG/JPEG/PPM file when encoded), label = 5 (varint),
// float_data = 6 (repeated float: C x H x W values used instead of data), encoded = 7 (bool).
// Decoded here by hand (the wire format of seven fields), so reading data needs no protobuf
// library. float_data is read packed (one length-delimited run of fixed32s, what protobuf 3 and
// [packed = true] write) and unpacked (one fixed32 field per value, protobuf 2's default for
// caffe.proto): both are in Caffe databases in the wild.

#include "data/data_budget.hpp"
#include "data/idx_dataset.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl::data {

struct Datum {
    int channels = 0;
    int height = 0;
    int width = 0;
    std::vector<std::uint8_t> data;
    std::vector<float> float_data;
    std::int64_t label = 0;
    bool encoded = false;
};

/// Parses one serialized Datum; throws dl::Error(config) naming `what` and the byte offset for a
/// truncated or malformed message.
Datum parse_datum(const std::uint8_t* bytes, std::size_t size, const std::string& what);

/// A database's records, added in key order, as one IdxDataset. Each Datum must have the first
/// one's shape and kind (bytes or float_data), C x H x W values (bytes after decoding, when
/// encoded) and a label 0 to 2^31 - 1 when labels are read; otherwise dl::Error(config) names the
/// database (`database`, e.g. "LMDB path"), the record's number and key, and what is wrong.
class DatumSet {
public:
    /// `header_only`: the first record's shape is kept, no values (read_idx_header). The
    /// records' values are held to `budget` as they are added.
    DatumSet(std::string database, bool with_labels, bool header_only, DataBudget budget);

    void add(std::size_t index, std::string_view key, std::string_view value);

    /// The set of the records added; `count` is the number of records (the database's own
    /// count when header_only, where the rest were not read). Refuses an empty database.
    IdxDataset finish(std::size_t count);

private:
    std::string m_database;
    bool m_with_labels;
    bool m_header_only;
    DataBudget m_budget;
    bool m_floats = false;
    std::size_t m_seen = 0;
    IdxDataset m_set;
};

/// A record's key as text for messages: at most 64 bytes, unprintable bytes as '?'.
std::string key_text(std::string_view key);

} // namespace dl::data
