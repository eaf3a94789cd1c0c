#pragma once
// `dljob pack SOURCE -o DATASET`: one tar + index + manifest from a directory tree or an image
// list (Caffe's train.txt: `relative/path label` per line).

#include <dljob/domain/dataset.hpp>
#include <dljob/domain/result.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dljob::app {

/// Uncompressed tar bytes per zstd frame: large enough that zstd's ratio is close to that of
/// one stream, small enough that reading one member in place decompresses little extra.
inline constexpr std::uint64_t pack_chunk_bytes = std::uint64_t{4} << 20U;

struct PackRequest {
    std::string source;    // a directory, or a list file of `path [label]` lines
    std::string output;    // the dataset directory to create (must not exist)
    std::string list_root; // for a list: where its paths start (default: the list's directory)
    std::string compression = "none"; // or "zstd": seekable zstd frames (format version 2)
    int compression_level = 3;        // zstd's own default
    std::uint64_t shard_bytes = 0;    // split into data files of at most this much tar; 0: one
};

/// Reads `--compress` ("none", "zstd" or "zstd:LEVEL") into `request`.
Result<void> parse_compression(const std::string& spec, PackRequest& request);

struct PackProgress {
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;
};

struct PackSummary {
    std::string output;
    DatasetManifest manifest;
    std::string striping; // on Lustre: the layout set, or why none was; empty elsewhere
};

/// On Lustre, the `lfs setstripe` command that lays out a new pack directory for large
/// sequential reads (1 MiB stripes over 4 OSTs; the seeds measured 1 MiB over 4-8 OSTs best);
/// empty on every other file system. `filesystem` is the statfs name ("lustre", "ext4"...).
std::vector<std::string> lustre_stripe_command(const std::string& filesystem,
                                               const std::string& directory);

/// Streams SOURCE into OUTPUT.partial.<pid>/ and renames it to OUTPUT when complete; on any
/// error the partial directory is removed. Memory does not grow with the dataset: only one
/// directory listing and one 1 MiB buffer are held at a time. `progress` (may be empty) is
/// called after each file.
Result<PackSummary> pack_dataset(const PackRequest& request,
                                 const std::function<void(const PackProgress&)>& progress);

} // namespace dljob::app
