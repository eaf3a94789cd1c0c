#pragma once
// A packed dataset ("DATASET" in `dljob pack SOURCE -o DATASET`): a directory holding
//   data.tar       the members, a plain tar (ustar, pax headers only where ustar cannot say it),
//                  sorted and with normalised metadata so the same files give the same bytes;
//   index.tsv      one line per member: type, data offset in data.tar, size, label, path;
//   manifest.json  totals and XXH3-128 hashes of data.tar and index.tsv. `stage-data` reads
//                  only this file before deciding anything, and keys its per-node cache on
//                  all of it (app::stage_cache_key), not on the content hash alone.
// That is format version 1, still what a plain unsharded pack writes. Version 2 (written with
// --compress or --shard-size) stores the tar as one or more data files, each a complete tar
// (`data.tar.zst`, or `data-00000.tar[.zst]`...), lists them in the manifest, gives index.tsv a
// shard column (offsets stay offsets into the shard's uncompressed tar) and, when compressed,
// adds chunks.tsv: where each independent zstd frame sits (docs/data.md).

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob {

inline constexpr const char* dataset_archive_name = "data.tar";
inline constexpr const char* dataset_index_name = "index.tsv";
inline constexpr const char* dataset_manifest_name = "manifest.json";
inline constexpr const char* dataset_chunks_name = "chunks.tsv";
/// A plain pack: one data.tar, the index without a shard column.
inline constexpr int dataset_format_version = 1;
/// Compressed or sharded: data files listed in the manifest, a shard column, chunks.tsv.
inline constexpr int dataset_layout_format_version = 2;

/// One stored data file of a pack.
struct DatasetShard {
    std::string file;            // a name inside the dataset directory, e.g. data-00001.tar.zst
    std::uint64_t bytes = 0;     // as stored (compressed when compressed)
    std::string hash;            // XXH3-128 of the stored bytes
    std::uint64_t tar_bytes = 0; // of the uncompressed tar
};

/// Name of data file `shard`: data.tar[.zst] for an unsharded pack, data-NNNNN.tar[.zst] else.
std::string dataset_shard_file_name(std::uint32_t shard, bool sharded, bool compressed);

/// Block size used for the space totals recorded at pack time (ext4, xfs and tmpfs all
/// allocate at least one 4 KiB block or page per non-empty file).
inline constexpr std::uint64_t dataset_accounting_block = 4096;

struct DatasetManifest {
    int version = dataset_format_version;
    // XXH3-128 of what is stored, 32 hex digits. Version 1: of data.tar; version 2: of every
    // data file's stored bytes, concatenated in shard order.
    std::string content_hash;
    std::uint64_t archive_bytes = 0; // every data file's stored bytes
    std::string index_hash;          // XXH3-128 of index.tsv
    std::uint64_t index_bytes = 0;
    std::uint64_t files = 0;
    std::uint64_t directories = 0;
    std::uint64_t payload_bytes = 0;   // sum of member sizes
    std::uint64_t allocated_bytes = 0; // sum of sizes rounded up to 4 KiB per file
    std::uint64_t max_path_length = 0;
    bool labelled = false;  // packed from an image list with labels
    std::string source;     // what was packed (informational)
    std::string created_by; // "dljob 0.1.0"
    // Version 2 (parse_manifest fills `shards` for version 1 too: data.tar alone).
    std::vector<DatasetShard> shards;
    std::string compression = "none"; // or "zstd"
    int compression_level = 0;
    std::uint64_t chunk_bytes = 0;  // uncompressed bytes per zstd frame (the last may be fewer)
    std::uint64_t shard_bytes = 0;  // --shard-size, 0 when unsharded
    std::uint64_t chunks_bytes = 0; // of chunks.tsv (compressed packs only)
    std::string chunks_hash;        // XXH3-128 of chunks.tsv
    [[nodiscard]] bool compressed() const { return compression != "none"; }
};

std::string to_json(const DatasetManifest& manifest);

/// Parses manifest.json; `origin` names the file in error messages.
Result<DatasetManifest> parse_manifest(std::string_view text, const std::string& origin);

enum class IndexEntryType { file, directory };

struct IndexEntry {
    IndexEntryType type = IndexEntryType::file;
    std::uint64_t offset = 0; // of the member's data in its shard's tar (0 for directories)
    std::uint64_t size = 0;
    std::optional<std::int64_t> label;
    std::string path;
    std::uint32_t shard = 0; // index of the data file (version 2 only)
};

/// One line of index.tsv, without the newline. Paths are validated member paths, so they hold
/// no tab or newline. `version` is the manifest's: version 2 has a shard column after the type.
std::string format_index_line(const IndexEntry& entry, int version = dataset_format_version);
Result<IndexEntry> parse_index_line(std::string_view line, const std::string& origin,
                                    std::uint64_t line_number,
                                    int version = dataset_format_version);

/// The first line of index.tsv.
inline constexpr const char* index_header_line =
    "# dljob-index v1\ttype\toffset\tsize\tlabel\tpath";
inline constexpr const char* index_header_line_v2 =
    "# dljob-index v2\ttype\tshard\toffset\tsize\tlabel\tpath";

/// chunks.tsv: one line per zstd frame, in shard order then offset order. Offsets are into the
/// shard's uncompressed tar (raw) and into its stored file (stored).
struct ChunkEntry {
    std::uint32_t shard = 0;
    std::uint64_t raw_offset = 0;
    std::uint64_t raw_size = 0;
    std::uint64_t stored_offset = 0;
    std::uint64_t stored_size = 0;
};
inline constexpr const char* chunks_header_line =
    "# dljob-chunks v1\tshard\traw_offset\traw_size\tstored_offset\tstored_size";
std::string format_chunk_line(const ChunkEntry& chunk);
Result<ChunkEntry> parse_chunk_line(std::string_view line, const std::string& origin,
                                    std::uint64_t line_number);

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
