#pragma once
// Caffe's LMDB databases (convert_imageset, convert_mnist_data, convert_cifar_data): one Datum per
// record, read in key order into an IdxDataset (all in memory, as the IDX and CIFAR readers do).
// The only file that sees <lmdb.h>.
//
// Datum (caffe.proto): channels = 1, height = 2, width = 3 (varints), data = 4 (bytes:
// C x H x W uint8, or a whole PNG/JPEG/PPM file when encoded), label = 5 (varint), float_data = 6,
// encoded = 7 (bool). Decoded here by hand (the wire format of seven fields), so reading data needs
// no protobuf library. Raw and encoded Datums are read; float_data Datums are refused by name.
//
// A Data layer's source is an LMDB when it is a directory holding data.mdb. Its labels are in the
// Datums: label_source is the same path, or empty for none.

#include "data/idx_dataset.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dl::data {

struct Datum {
    int channels = 0;
    int height = 0;
    int width = 0;
    std::vector<std::uint8_t> data;
    std::int64_t label = 0;
    bool encoded = false;
    bool has_float_data = false;
};

/// Parses one serialized Datum; throws dl::Error(config) naming `what` and the byte offset for a
/// truncated or malformed message.
Datum parse_datum(const std::uint8_t* bytes, std::size_t size, const std::string& what);

/// True when `source` is a directory with an LMDB data file (data.mdb).
bool is_lmdb_source(const std::filesystem::path& source);

/// Every record in key order. Each Datum must have the first one's shape and C x H x W bytes of
/// data (after decoding, when encoded) and a label 0..255 when labels are read; otherwise
/// dl::Error(config) names the database, the record's number and key, and what is wrong.
IdxDataset load_lmdb(const std::filesystem::path& source, bool with_labels);

/// The count (LMDB's own) and the shape of the first record.
IdxDataset read_lmdb_header(const std::filesystem::path& source);

} // namespace dl::data
