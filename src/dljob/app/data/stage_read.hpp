#pragma once
// Reading a pack's data files for stage-data: every byte counted and hashed (XXH3-128) as it
// arrives and checked against the manifest at the end of each file, whether the bytes are
// copied onto the target (copy_pack) or parsed as tar where they lie (open_pack_archive, for
// --extract). Nothing is trusted before its file has passed.

#include <dljob/domain/dataset.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/stage.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dljob::app {

/// A data file of a pack with what its manifest says of it.
struct PackFile {
    std::string name;
    std::uint64_t bytes = 0;
    std::string hash;
};

/// The pack's data files (data.tar, or its shards) in manifest order.
std::vector<PackFile> data_files(const DatasetManifest& manifest);

/// Copies the pack in `dataset` (data files, index, chunk table) into the existing directory
/// `destination`, verifying each file as it is copied, and writes `manifest_text` last.
/// Returns the bytes written.
Result<std::uint64_t> copy_pack(const std::string& dataset, const std::string& destination,
                                const DatasetManifest& manifest, const std::string& manifest_text);

/// Reads the index and chunk table of the pack in `dataset` and checks them against its
/// manifest. A cache hit copies neither, so without this an index edited after packing would
/// be used unseen by a hit and refused by a fresh stage.
Result<void> verify_pack_tables(const std::string& dataset, const DatasetManifest& manifest);

/// Some of a pack's data files read one after the other as one archive.
class PackArchiveReader : public ArchiveReader {
public:
    /// Bytes of pack files read and verified so far.
    [[nodiscard]] virtual std::uint64_t bytes_read() const = 0;
};

/// `files` in `directory`, read as one archive: one extraction with one set of safety checks
/// (two entries with one path are refused across shards too). A file that fails to parse and
/// also fails its hash is reported as corrupted, the cause, rather than as whatever libarchive
/// tripped over. `manifest_path` is named in those messages.
std::unique_ptr<PackArchiveReader>
open_pack_archive(std::string directory, std::vector<PackFile> files, std::string manifest_path);

} // namespace dljob::app
