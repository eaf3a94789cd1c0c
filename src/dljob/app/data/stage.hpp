#pragma once
// `dljob stage-data DATASET --to tmp|ramdisk|PATH [--extract] [--keep]`: copies a packed
// dataset onto node-local storage, verified, once per node.
//
// Layout on the target (one cache per user, keyed by stage_cache_key):
//   <target>/dljob-cache-<uid>/<key>.lock          flock: one stager per node at a time
//   <target>/dljob-cache-<uid>/<key>/pack/         data.tar, index.tsv, manifest.json
//   <target>/dljob-cache-<uid>/<key>/pack.complete marker, written last
//   <target>/dljob-cache-<uid>/<key>/tree/         the extracted files (--extract)
//   <target>/dljob-cache-<uid>/<key>/tree.complete marker, written last
//   <target>/dljob-cache-<uid>/<key>/keep          present when staged with --keep
//   <target>/dljob-cache-<uid>/<key>/users/<pid>   a job using the copy (--user-pid)
// Work happens in `*.partial.<pid>` directories renamed into place; a marker is written only
// after its rename, so a killed stage is never taken for a complete one.

#include <dljob/app/sites/resolve_site.hpp>
#include <dljob/domain/dataset.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/stage.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dljob::app {

struct StageRequest {
    std::string dataset;                  // a directory made by `dljob pack`
    std::string to = "tmp";               // tmp, ramdisk or a directory
    bool extract = false;                 // also unpack the tree
    bool keep = false;                    // leave it in place for `--cleanup`
    bool skip_space_check = false;        // for file systems whose statvfs is wrong
    std::optional<std::uint64_t> reserve; // bytes to leave free (default: 0, RAM disks more)
    unsigned threads = 2;                 // extraction writers
    /// A site whose storage tiers `node-local` (tmp) and `ramdisk` come first (docs/data.md),
    /// found as every verb finds one (--site-file profiles included); none named: only the
    /// environment and the defaults. Never detected by host name: inside a job the node's name
    /// says nothing of the site.
    SiteChoice where;
    /// A process (a job's shell) using the staged copy: staging registers it, and --cleanup
    /// unregisters it and removes the copy only when no live user is left. Two jobs on one
    /// node share a staged dataset, and the first to end must not pull it from under the other.
    std::optional<long> user_pid;
};

struct CleanupResult {
    bool removed = false;
    bool kept = false;  // staged with --keep
    int users_left = 0; // live processes still registered (their jobs still run here)
    bool found = true;  // there was a staged copy at all
};

struct StageResult {
    std::string path;       // the staged pack directory, or the tree with --extract
    bool cache_hit = false; // nothing was copied
    std::uint64_t bytes_copied = 0;
    std::string target_note; // why this target ("$SLURM_TMPDIR", ...)
};

/// Progress and waiting messages (empty: silent).
using StageNotice = std::function<void(const std::string& line)>;

Result<StageResult> stage_dataset(const StageRequest& request, const GetEnv& getenv,
                                  const StageNotice& notice);

/// Removes this dataset's staged copy from the target (for a job's exit trap or epilog) unless
/// it was staged with --keep or another live process is registered as its user; unregisters
/// request.user_pid first and forgets users that no longer run (killed jobs).
Result<CleanupResult> cleanup_staged_dataset(const StageRequest& request, const GetEnv& getenv);

/// The per-node cache entry of a pack: XXH3-128 (32 hex digits) of its manifest without the
/// fields no reader uses (source, created_by). The manifest hashes the data files, index.tsv
/// and chunks.tsv, so packs that differ in anything a reader sees never share an entry.
std::string stage_cache_key(const DatasetManifest& manifest);

/// The environment of this process.
GetEnv process_environment();

} // namespace dljob::app
