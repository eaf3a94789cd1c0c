#pragma once
// Caffe's Datum records (the values of its LMDBs) as pack members: what `dljob pack` writes for
// each record of an LMDB source, so dltrain reads the pack's images as it reads the LMDB.

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace dljob::app {

/// One Datum as a pack member: the file's bytes, the extension its name takes and the label.
struct DatumMember {
    std::string bytes;
    std::string extension; // "pgm", "ppm", "png", "jpg"
    std::int64_t label = 0;
};

/// Decodes a Datum (the engine's reader, adapters/caffe_records.hpp). A raw Datum becomes a binary
/// PGM (1 channel) or PPM (3 channels, Caffe's channel order kept: the planes are interleaved as
/// they are); an encoded one is its image file itself, named by its magic bytes (PNG, JPEG,
/// PGM/PPM). A float_data Datum, another channel count, data of another length than the shape says,
/// or a malformed record is an error whose message the caller prefixes with the record's place.
Result<DatumMember> datum_member(std::string_view value);

} // namespace dljob::app
