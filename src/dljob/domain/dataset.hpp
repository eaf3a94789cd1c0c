#pragma once
// A packed dataset ("DATASET" in `dljob pack SOURCE -o DATASET`): a directory holding
//   data.tar       the members, a plain tar (ustar, pax headers only where ustar cannot say it),
//                  sorted and with normalised metadata so the same files give the same bytes;
//   index.tsv      one line per member: type, data offset in data.tar, size, label, path;
//   manifest.json  totals and XXH3-128 hashes of data.tar and index.tsv. `stage-data` reads
//                  only this file before deciding anything, and the content hash is the
//                  per-node cache key.

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dljob {

inline constexpr const char* dataset_archive_name = "data.tar";
inline constexpr const char* dataset_index_name = "index.tsv";
inline constexpr const char* dataset_manifest_name = "manifest.json";
inline constexpr int dataset_format_version = 1;

/// Block size used for the space totals recorded at pack time (ext4, xfs and tmpfs all
/// allocate at least one 4 KiB block or page per non-empty file).
inline constexpr std::uint64_t dataset_accounting_block = 4096;

struct DatasetManifest {
    int version = dataset_format_version;
    std::string content_hash; // XXH3-128 of data.tar, 32 hex digits: the cache key
    std::uint64_t archive_bytes = 0;
    std::string index_hash; // XXH3-128 of index.tsv
    std::uint64_t index_bytes = 0;
    std::uint64_t files = 0;
    std::uint64_t directories = 0;
    std::uint64_t payload_bytes = 0;   // sum of member sizes
    std::uint64_t allocated_bytes = 0; // sum of sizes rounded up to 4 KiB per file
    std::uint64_t max_path_length = 0;
    bool labelled = false;  // packed from an image list with labels
    std::string source;     // what was packed (informational)
    std::string created_by; // "dljob 0.1.0"
};

std::string to_json(const DatasetManifest& manifest);

/// Parses manifest.json; `origin` names the file in error messages.
Result<DatasetManifest> parse_manifest(std::string_view text, const std::string& origin);

enum class IndexEntryType { file, directory };

struct IndexEntry {
    IndexEntryType type = IndexEntryType::file;
    std::uint64_t offset = 0; // of the member's data in data.tar (0 for directories)
    std::uint64_t size = 0;
    std::optional<std::int64_t> label;
    std::string path;
};

/// One line of index.tsv, without the newline. Paths are validated member paths, so they hold
/// no tab or newline.
std::string format_index_line(const IndexEntry& entry);
Result<IndexEntry> parse_index_line(std::string_view line, const std::string& origin,
                                    std::uint64_t line_number);

/// The first line of index.tsv.
inline constexpr const char* index_header_line =
    "# dljob-index v1\ttype\toffset\tsize\tlabel\tpath";

/// A member path as it will be written to or read from an archive: relative, '/'-separated,
/// without `.`/empty components (they are dropped) and without `..`, control characters, more
/// than 1024 bytes or more than 64 components (refused). Returns the normalised path.
Result<std::string> normalize_member_path(std::string_view raw);

/// Whether a symlink at member path `link_path` with target `target` stays inside the tree:
/// the target is relative, its `..` components come first and climb no higher than the link's
/// own directory, and the rest descends (no `..` after a name: a name may itself be a link).
Result<void> check_symlink_target(std::string_view link_path, std::string_view target);

/// `size` rounded up to a multiple of `block` (0 stays 0).
constexpr std::uint64_t round_up(std::uint64_t size, std::uint64_t block) {
    return block == 0 ? size : (size + block - 1) / block * block;
}

} // namespace dljob
