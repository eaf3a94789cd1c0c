#pragma once
// Values and interfaces of data staging: archive entries as a reader reports them, where a
// stage goes (tiers), and whether it fits (space with per-file block rounding and inodes).

#include <dljob/domain/result.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dljob {

struct SiteProfile;

enum class ArchiveEntryType {
    file,
    directory,
    symlink,
    hardlink,
    character_device,
    block_device,
    fifo,
    socket,
    other
};

const char* to_string(ArchiveEntryType type) noexcept;

/// One member of an archive, as declared by its header (nothing is trusted yet).
struct ArchiveEntry {
    std::string path; // as stored, not yet validated
    ArchiveEntryType type = ArchiveEntryType::other;
    std::uint64_t size = 0;  // declared data size
    std::uint32_t mode = 0;  // permission bits including setuid/setgid/sticky
    std::string link_target; // for symlinks and hard links
};

/// Reads an archive member by member (libarchive in production; tests may feed entries).
class ArchiveReader {
public:
    virtual ~ArchiveReader() = default;
    /// The next entry's header, or nullopt at the end of the archive.
    virtual Result<std::optional<ArchiveEntry>> next() = 0;
    /// Reads up to `size` bytes of the current entry's data; 0 at its end.
    virtual Result<std::size_t> read(char* buffer, std::size_t size) = 0;
};

/// Where `--to` points: a named tier or an explicit directory.
enum class StageTierKind { tmp, ramdisk, path };

/// Looks up an environment variable (std::getenv in production, a map in tests).
using GetEnv = std::function<std::optional<std::string>(const std::string& name)>;

/// The directory a stage goes to. `tmp`: $SLURM_TMPDIR, $TMPDIR, $LSCRATCH, /tmp (first set and
/// non-empty); `ramdisk`: $RAMDISK, /dev/shm; anything else is a path. When a site profile is
/// given and has a tier named "node-local" (tmp) or "ramdisk", its path comes first, with
/// `$VAR`/`${VAR}` expanded (a tier whose variables are unset is skipped).
struct StageTarget {
    StageTierKind kind = StageTierKind::path;
    std::string directory;
    std::string chosen_because; // "$SLURM_TMPDIR", "site tier node-local", "--to PATH"
    /// Set when a site was named but the target is not its tier: `--to ramdisk` on a site with
    /// no ramdisk tier (or one whose variables are unset) falls back to $RAMDISK or /dev/shm,
    /// memory the site's profile says nothing about. Empty otherwise.
    std::string warning;
};
Result<StageTarget> resolve_stage_target(const std::string& to, const GetEnv& getenv,
                                         const SiteProfile* site = nullptr);

/// Expands $VAR and ${VAR}; nullopt when a variable is unset or empty.
std::optional<std::string> expand_variables(const std::string& text, const GetEnv& getenv);

/// What a target file system offers (statvfs/statfs).
struct FilesystemSpace {
    std::uint64_t block_size = 4096;
    std::uint64_t bytes_total = 0;
    std::uint64_t bytes_available = 0;
    std::uint64_t inodes_available = 0;
    bool inodes_reported = true; // some file systems (btrfs, some NFS) report no inode limit
    bool ram_disk = false;       // tmpfs/ramfs: pages count against the job's memory
    std::string type_name;       // "ext4", "tmpfs", "nfs", "lustre", ...
};

/// What a stage will consume.
struct SpaceNeed {
    std::uint64_t bytes = 0;
    std::uint64_t inodes = 0;
};

/// Bytes a RAM disk keeps free for shared memory (DataLoader workers, NCCL) unless told
/// otherwise: max(256 MiB, 5% of its size).
std::uint64_t default_ram_disk_reserve(const FilesystemSpace& space);

/// Fails (ErrorCode::io) with what is needed and what is free when `need` plus `reserve` does
/// not fit; `target` names the directory in the message.
Result<void> check_space(const SpaceNeed& need, const FilesystemSpace& space, std::uint64_t reserve,
                         const std::string& target);

std::string human_bytes(std::uint64_t bytes);

} // namespace dljob
