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

struct PackRequest {
    std::string source;    // a directory, or a list file of `path [label]` lines
    std::string output;    // the dataset directory to create (must not exist)
    std::string list_root; // for a list: where its paths start (default: the list's directory)
};

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
