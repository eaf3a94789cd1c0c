#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/adapters/hash_xxhash.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/app/data/stage_extract.hpp>
#include <dljob/app/data/stage_read.hpp>
#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/domain/dataset.hpp>
#include <dljob/util/cpus.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

namespace dljob::app {
namespace {

struct CachePaths {
    std::string root;
    std::string entry;
    std::string lock;
    std::string pack;
    std::string pack_marker;
    std::string tree;
    std::string tree_marker;
    std::string keep;
    std::string users;
};

CachePaths cache_paths(const std::string& target, const std::string& id) {
    CachePaths paths;
    paths.root = fmt::format("{}/dljob-cache-{}", target, geteuid());
    paths.entry = paths.root + "/" + id;
    paths.lock = paths.entry + ".lock";
    paths.pack = paths.entry + "/pack";
    paths.pack_marker = paths.entry + "/pack.complete";
    paths.tree = paths.entry + "/tree";
    paths.tree_marker = paths.entry + "/tree.complete";
    paths.keep = paths.entry + "/keep";
    paths.users = paths.entry + "/users";
    return paths;
}

/// Registers `pid` as a user of the staged copy. Called with the entry's lock held, as is
/// cleanup, so a stage that registers and a cleanup that counts users never interleave.
Result<void> register_user(const CachePaths& paths, long pid) {
    DLJOB_TRY(adapters::make_private_directory(paths.users));
    return adapters::write_text_file(fmt::format("{}/{}", paths.users, pid), "");
}

/// Removes `own` (when set) and every registered user that no longer runs; returns how many
/// live ones are left. A pid reused by an unrelated process keeps the copy: the safe mistake.
Result<int> prune_users(const CachePaths& paths, std::optional<long> own) {
    std::vector<std::string> names;
    if (DIR* dir = opendir(paths.users.c_str())) {
        while (const dirent* entry = readdir(dir)) {
            const std::string name = entry->d_name;
            if (name != "." && name != "..") {
                names.push_back(name);
            }
        }
        closedir(dir);
    }
    int live = 0;
    for (const std::string& name : names) {
        char* end = nullptr;
        const long pid = std::strtol(name.c_str(), &end, 10);
        const bool valid = end != name.c_str() && *end == '\0' && pid > 0;
        const bool gone = !valid || (own && pid == *own) ||
                          (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
        if (gone) {
            DLJOB_TRY(adapters::remove_tree(paths.users + "/" + name));
        } else {
            ++live;
        }
    }
    return live;
}

Result<DatasetManifest> load_manifest(const std::string& dataset) {
    const std::string path = dataset + "/" + dataset_manifest_name;
    auto text = adapters::read_text_file(path);
    if (!text) {
        if (text.error().code == ErrorCode::not_found) {
            return fail(ErrorCode::not_found,
                        fmt::format("{} is not a packed dataset: {} is missing", dataset, path),
                        fmt::format("make one with `dljob pack SOURCE -o {}`", dataset));
        }
        return fail(text.error());
    }
    return parse_manifest(*text, path);
}

std::string marker_text(const DatasetManifest& manifest) {
    return fmt::format("{}\nfiles {}\nbytes {}\n", stage_cache_key(manifest), manifest.files,
                       manifest.payload_bytes);
}

bool marker_matches(const std::string& marker, const DatasetManifest& manifest) {
    auto text = adapters::read_text_file(marker, 4096);
    return text && *text == marker_text(manifest);
}

/// Removes a whole entry, markers first: a reader that races the removal sees an incomplete
/// entry, never a complete one with files missing. With the entry's lock held.
Result<void> remove_entry(const CachePaths& paths) {
    DLJOB_TRY(adapters::remove_tree(paths.pack_marker));
    DLJOB_TRY(adapters::remove_tree(paths.tree_marker));
    return adapters::remove_tree(paths.entry);
}

/// The cleanup that `other`'s jobs missed, if they all ended without it: whether it removed
/// the entry. A kept entry, one no job ever registered with (staged by hand), and one whose
/// lock is held (being staged or cleaned up right now) are left alone.
Result<bool> remove_if_abandoned(const CachePaths& other) {
    if (!adapters::is_directory(other.users) || adapters::path_exists(other.keep)) {
        return false;
    }
    auto lock = adapters::FileLock::try_acquire(other.lock);
    if (!lock) {
        return fail(lock.error());
    }
    if (!lock->has_value()) {
        return false;
    }
    auto live = prune_users(other, std::nullopt);
    if (!live) {
        return fail(live.error());
    }
    if (*live > 0) {
        return false;
    }
    DLJOB_TRY(remove_entry(other));
    return true;
}

/// Removes the copies of other datasets in this target's cache whose registered jobs have all
/// ended without their cleanup (killed with SIGKILL, a node-level kill, an epilogue that never
/// ran), before the space check of a stage that copies. Housekeeping for others: what it
/// cannot remove is a warning, never the failure of this stage.
void remove_abandoned(const std::string& target, const std::string& own_id,
                      const StageNotice& notice) {
    const std::string root = cache_paths(target, own_id).root;
    std::vector<std::string> ids;
    if (DIR* dir = opendir(root.c_str())) {
        while (const dirent* entry = readdir(dir)) {
            const std::string name = entry->d_name;
            // Entries are named by content hash; "<hash>.lock" and ".", ".." are not entries.
            if (name.find('.') == std::string::npos && name != own_id) {
                ids.push_back(name);
            }
        }
        closedir(dir);
    }
    for (const std::string& id : ids) {
        const CachePaths other = cache_paths(target, id);
        auto removed = remove_if_abandoned(other);
        if (!notice) {
            continue;
        }
        if (!removed) {
            notice(fmt::format("warning: could not remove the abandoned staged copy {}: {}",
                               other.entry, removed.error().message));
        } else if (*removed) {
            notice(fmt::format("removed {}: a staged copy whose jobs all ended without cleaning up",
                               other.entry));
        }
    }
}

/// Removes what a killed stage left: partial directories, and a published directory whose
/// marker was never written. Called with the lock held, so no live stager owns them.
Result<void> remove_leftovers(const CachePaths& paths, const DatasetManifest& manifest) {
    if (DIR* dir = opendir(paths.entry.c_str())) {
        std::vector<std::string> partials;
        while (const dirent* entry = readdir(dir)) {
            const std::string name = entry->d_name;
            if (name.find(".partial.") != std::string::npos) {
                partials.push_back(paths.entry + "/" + name);
            }
        }
        closedir(dir);
        for (const std::string& partial : partials) {
            DLJOB_TRY(adapters::remove_tree(partial));
        }
    }
    if (!marker_matches(paths.pack_marker, manifest)) {
        DLJOB_TRY(adapters::remove_tree(paths.pack_marker));
        DLJOB_TRY(adapters::remove_tree(paths.pack));
    }
    if (!marker_matches(paths.tree_marker, manifest)) {
        DLJOB_TRY(adapters::remove_tree(paths.tree_marker));
        DLJOB_TRY(adapters::remove_tree(paths.tree));
    }
    return {};
}

/// Space for the extracted tree on this file system: every file rounded up to its block, one
/// block per directory, one inode each.
Result<SpaceNeed> tree_need(const std::string& dataset, std::uint64_t block_size, int version) {
    const std::string index_path = dataset + "/" + dataset_index_name;
    auto fd = adapters::open_for_reading(index_path);
    if (!fd) {
        return fail(fd.error());
    }
    SpaceNeed need{block_size, 1};
    std::vector<char> buffer(std::size_t{1} << 20U);
    std::string pending;
    std::uint64_t line_number = 0;
    auto take_line = [&](const std::string& line) -> Result<void> {
        ++line_number;
        if (line.empty() || line.front() == '#') {
            return {};
        }
        auto entry = parse_index_line(line, index_path, line_number, version);
        if (!entry) {
            return fail(entry.error());
        }
        need.bytes +=
            entry->type == IndexEntryType::file ? round_up(entry->size, block_size) : block_size;
        need.inodes += 1;
        return {};
    };
    for (;;) {
        auto n = adapters::read_full(fd->get(), buffer.data(), buffer.size(), index_path);
        if (!n) {
            return fail(n.error());
        }
        if (*n == 0) {
            break;
        }
        pending.append(buffer.data(), *n);
        std::size_t start = 0;
        for (std::size_t newline = pending.find('\n'); newline != std::string::npos;
             newline = pending.find('\n', start)) {
            DLJOB_TRY(take_line(pending.substr(start, newline - start)));
            start = newline + 1;
        }
        pending.erase(0, start);
    }
    if (!pending.empty()) {
        DLJOB_TRY(take_line(pending));
    }
    return need;
}

bool is_hit(const CachePaths& paths, const DatasetManifest& manifest, bool extract) {
    return marker_matches(extract ? paths.tree_marker : paths.pack_marker, manifest);
}

Result<StageResult> hit_result(const CachePaths& paths, const StageRequest& request,
                               const StageTarget& target) {
    if (request.keep && !adapters::path_exists(paths.keep)) {
        DLJOB_TRY(adapters::write_text_file(paths.keep, "staged with --keep\n"));
    }
    if (request.user_pid) { // only reached with the entry's lock held
        DLJOB_TRY(register_user(paths, *request.user_pid));
    }
    return StageResult{request.extract ? paths.tree : paths.pack, true, 0, target.chosen_because};
}

Result<StageTarget> existing_target(const StageRequest& request, const GetEnv& getenv) {
    std::optional<SiteProfile> site;
    if (!request.where.site.empty()) {
        auto loaded = resolve_site(request.where);
        if (!loaded) {
            return fail(loaded.error());
        }
        site = std::move(*loaded);
    }
    auto target = resolve_stage_target(request.to, getenv, site ? &*site : nullptr);
    if (!target) {
        return target;
    }
    if (!adapters::is_directory(target->directory)) {
        return fail(ErrorCode::not_found,
                    fmt::format("stage target {} (from {}) is not a directory", target->directory,
                                target->chosen_because),
                    "create it, or choose another --to (tmp, ramdisk or a directory)");
    }
    return target;
}

} // namespace

std::string stage_cache_key(const DatasetManifest& manifest) {
    // Everything a reader of the staged copy uses, not the data files alone: two packs of one
    // data.tar with other labels in index.tsv shared an entry, and the second stage handed the
    // first pack's labels to the training. The manifest's hashes cover index.tsv and
    // chunks.tsv, its fields the layout readers rely on (shards, compression, tar sizes). Where
    // and by which dljob it was packed changes nothing a reader sees, so it is left out.
    DatasetManifest keyed = manifest;
    keyed.source.clear();
    keyed.created_by.clear();
    return adapters::xxh3_128_hex(to_json(keyed));
}

namespace {

// The bytes and inodes a stage writes: the pack's files when it copies them, the tree's
// when it extracts.
Result<SpaceNeed> space_needed(const StageRequest& request, const DatasetManifest& manifest,
                               std::size_t manifest_bytes, std::uint64_t block, bool copy_needed) {
    SpaceNeed need;
    if (copy_needed) {
        for (const DatasetShard& shard : manifest.shards) {
            need.bytes += round_up(shard.bytes, block);
            need.inodes += 1;
        }
        need.bytes += round_up(manifest.index_bytes, block) +
                      round_up(manifest.chunks_bytes, block) + round_up(manifest_bytes, block) +
                      3 * block;
        need.inodes += 5;
    }
    if (request.extract) {
        auto tree = tree_need(request.dataset, block, manifest.version);
        if (!tree) {
            return fail(tree.error());
        }
        need.bytes += tree->bytes;
        need.inodes += tree->inodes;
    }
    return need;
}

// Copies the pack into the cache entry (under a partial name, renamed when whole) and marks
// it staged; returns the bytes copied.
Result<std::uint64_t> stage_pack_copy(const std::string& dataset, const CachePaths& paths,
                                      const DatasetManifest& manifest,
                                      const std::string& manifest_text) {
    const std::string partial = fmt::format("{}.partial.{}", paths.pack, getpid());
    if (mkdir(partial.c_str(), 0700) != 0) {
        return fail(adapters::system_error("cannot create directory", partial, errno));
    }
    auto copied = copy_pack(dataset, partial, manifest, manifest_text);
    if (!copied) {
        (void)adapters::remove_tree(partial);
        return fail(copied.error());
    }
    if (auto renamed = adapters::rename_path(partial, paths.pack); !renamed) {
        (void)adapters::remove_tree(partial);
        return fail(renamed.error());
    }
    DLJOB_TRY(adapters::write_text_file(paths.pack_marker, marker_text(manifest)));
    return *copied;
}

// Extracts the dataset's tree into the cache entry, from the staged pack when there is one
// (faster to read) else from the source, and marks it staged; returns the bytes read from the
// source.
Result<std::uint64_t> stage_tree(const std::string& dataset, bool have_pack,
                                 const CachePaths& paths, const DatasetManifest& manifest,
                                 unsigned threads) {
    const std::string source = have_pack ? paths.pack : dataset;
    ExtractLimits limits;
    limits.max_bytes = manifest.payload_bytes;
    limits.max_entries = manifest.files + manifest.directories;
    limits.threads = threads;
    // One reading thread per shard up to the usable cores when the members are large: their
    // decompression and reading then run in parallel (4 x 256 MiB zstd shards to /dev/shm:
    // 0.67 -> 0.39 s on 2 cores). Small members are bound by file creation in the writer
    // pool, and more readers only took CPU from it (70,000 images: 0.76 -> 0.86 s). Shard i
    // goes to reader i mod n, each reader verifying the shards it reads.
    constexpr std::uint64_t parallel_member_bytes = std::uint64_t{64} << 10U;
    const bool large_members = manifest.payload_bytes >=
                               parallel_member_bytes * std::max<std::uint64_t>(1, manifest.files);
    const std::size_t reader_count =
        large_members ? std::max<std::size_t>(
                            1, std::min<std::size_t>(manifest.shards.size(), util::usable_cpus()))
                      : 1;
    std::vector<std::vector<PackFile>> assigned(reader_count);
    const std::vector<PackFile> files = data_files(manifest);
    for (std::size_t i = 0; i < files.size(); ++i) {
        assigned[i % reader_count].push_back(files[i]);
    }
    std::vector<std::unique_ptr<PackArchiveReader>> readers;
    std::vector<ArchiveReader*> reader_views;
    for (std::vector<PackFile>& subset : assigned) {
        readers.push_back(
            open_pack_archive(source, std::move(subset), source + "/" + dataset_manifest_name));
        reader_views.push_back(readers.back().get());
    }
    const std::string shown =
        manifest.shards.size() == 1
            ? source + "/" + manifest.shards.front().file
            : fmt::format("{}/data-*.tar ({} shards)", source, manifest.shards.size());
    auto summary = extract_archives(reader_views, paths.tree, limits, shown);
    if (!summary) {
        return fail(summary.error());
    }
    if (summary->files != manifest.files || summary->bytes != manifest.payload_bytes) {
        (void)adapters::remove_tree(paths.tree);
        return fail(ErrorCode::io,
                    fmt::format("{} held {} files and {} bytes, its manifest says {} and {}", shown,
                                summary->files, summary->bytes, manifest.files,
                                manifest.payload_bytes),
                    "pack the dataset again");
    }
    std::uint64_t read_from_source = 0;
    if (!have_pack) {
        for (const auto& reader : readers) {
            read_from_source += reader->bytes_read();
        }
    }
    // Not a hit, so remove_leftovers took any old marker: the tree was built just now.
    DLJOB_TRY(adapters::write_text_file(paths.tree_marker, marker_text(manifest)));
    return read_from_source;
}

// Room on the target for what this stage writes, less the reserve (RAM disks keep some free
// by default); --skip-space-check trusts the user over a statvfs that lies.
Result<void> check_stage_space(const StageRequest& request, const DatasetManifest& manifest,
                               std::size_t manifest_bytes, const std::string& directory,
                               bool copy_needed) {
    auto space = adapters::filesystem_space(directory);
    if (!space) {
        return fail(space.error());
    }
    auto need = space_needed(request, manifest, manifest_bytes, space->block_size, copy_needed);
    if (!need) {
        return fail(need.error());
    }
    const std::uint64_t reserve = request.reserve.value_or(
        space->ram_disk ? default_ram_disk_reserve(*space) : std::uint64_t{0});
    if (!request.skip_space_check) {
        DLJOB_TRY(check_space(*need, *space, reserve, directory));
    }
    return {};
}

// The dataset's manifest, as text (copied with the pack) and parsed; a directory that is not a
// pack says so.
Result<std::pair<std::string, DatasetManifest>> read_manifest(const std::string& dataset) {
    const std::string manifest_path = dataset + "/" + dataset_manifest_name;
    auto text = adapters::read_text_file(manifest_path);
    if (!text) {
        auto missing = load_manifest(dataset);
        return fail(missing ? text.error() : missing.error());
    }
    auto manifest = parse_manifest(*text, manifest_path);
    if (!manifest) {
        return fail(manifest.error());
    }
    return std::pair{std::move(*text), std::move(*manifest)};
}

} // namespace

GetEnv process_environment() {
    return [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str()); // NOLINT(concurrency-mt-unsafe)
        return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
    };
}

Result<StageResult> stage_dataset(const StageRequest& request, const GetEnv& getenv,
                                  const StageNotice& notice) {
    auto read = read_manifest(request.dataset);
    if (!read) {
        return fail(read.error());
    }
    const std::string& manifest_text = read->first;
    const DatasetManifest& manifest = read->second;
    auto target = existing_target(request, getenv);
    if (!target) {
        return fail(target.error());
    }
    if (notice && !target->warning.empty()) {
        notice(target->warning);
    }
    const std::string key = stage_cache_key(manifest);
    const CachePaths paths = cache_paths(target->directory, key);
    // The cache hit needs no lock: markers are written after their directory is complete. A
    // user to register takes the lock, so that no cleanup can count users in between.
    if (!request.user_pid && is_hit(paths, manifest, request.extract)) {
        DLJOB_TRY(verify_pack_tables(request.dataset, manifest));
        return hit_result(paths, request, *target);
    }
    DLJOB_TRY(adapters::make_private_directory(paths.root));
    auto lock = adapters::FileLock::acquire(paths.lock, [&] {
        if (notice) {
            notice(
                fmt::format("waiting for another dljob staging {} on this node", request.dataset));
        }
    });
    if (!lock) {
        return fail(lock.error());
    }
    if (is_hit(paths, manifest, request.extract)) {
        DLJOB_TRY(verify_pack_tables(request.dataset, manifest));
        return hit_result(paths, request, *target);
    }
    DLJOB_TRY(adapters::make_private_directory(paths.entry));
    DLJOB_TRY(remove_leftovers(paths, manifest));
    remove_abandoned(target->directory, key, notice);

    // After remove_leftovers a pack or tree on disk is a complete one. --extract reads the
    // pack where it lies (the source, or a copy staged earlier, which is faster to read) and
    // writes only the tree: a copy first would double the writes and the RAM disk it takes.
    const bool have_pack = adapters::path_exists(paths.pack);
    const bool copy_needed = !request.extract && !have_pack;
    DLJOB_TRY(
        check_stage_space(request, manifest, manifest_text.size(), target->directory, copy_needed));

    StageResult result{request.extract ? paths.tree : paths.pack, false, 0, target->chosen_because};
    if (copy_needed) {
        auto copied = stage_pack_copy(request.dataset, paths, manifest, manifest_text);
        if (!copied) {
            return fail(copied.error());
        }
        result.bytes_copied = *copied;
    }
    if (request.extract) {
        auto from_source = stage_tree(request.dataset, have_pack, paths, manifest, request.threads);
        if (!from_source) {
            return fail(from_source.error());
        }
        result.bytes_copied += *from_source;
    }
    if (request.keep && !adapters::path_exists(paths.keep)) {
        DLJOB_TRY(adapters::write_text_file(paths.keep, "staged with --keep\n"));
    }
    if (request.user_pid) {
        DLJOB_TRY(register_user(paths, *request.user_pid));
    }
    return result;
}

Result<CleanupResult> cleanup_staged_dataset(const StageRequest& request, const GetEnv& getenv) {
    auto manifest = load_manifest(request.dataset);
    if (!manifest) {
        return fail(manifest.error());
    }
    auto target = existing_target(request, getenv);
    if (!target) {
        return fail(target.error());
    }
    const CachePaths paths = cache_paths(target->directory, stage_cache_key(*manifest));
    CleanupResult result;
    if (!adapters::is_directory(paths.entry)) {
        result.found = false;
        return result;
    }
    auto lock = adapters::FileLock::acquire(paths.lock, {});
    if (!lock) {
        return fail(lock.error());
    }
    auto live = prune_users(paths, request.user_pid);
    if (!live) {
        return fail(live.error());
    }
    result.users_left = *live;
    result.kept = adapters::path_exists(paths.keep);
    if (result.kept || result.users_left > 0) {
        return result;
    }
    DLJOB_TRY(remove_entry(paths));
    result.removed = true;
    return result;
}

} // namespace dljob::app
