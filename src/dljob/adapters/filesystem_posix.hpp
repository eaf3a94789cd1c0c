#pragma once
// POSIX file-system primitives for packing and staging: owned descriptors, read-only maps,
// free space and file-system type, flock, tree removal that never follows links, and a writer
// that creates files relative to one directory descriptor (openat with O_EXCL|O_NOFOLLOW).

#include <dljob/domain/result.hpp>
#include <dljob/domain/stage.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dljob::adapters {

/// Owns a file descriptor; closes it on destruction.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : m_fd(fd) {}
    ~UniqueFd();
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    UniqueFd(UniqueFd&& other) noexcept : m_fd(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept;

    [[nodiscard]] int get() const noexcept { return m_fd; }
    int release() noexcept;
    explicit operator bool() const noexcept { return m_fd >= 0; }

private:
    int m_fd = -1;
};

/// "No such file or directory" and friends, for messages.
std::string errno_text(int error_number);

/// An Error for a failed system call on `path` (ENOSPC and EDQUOT get a hint about space).
Error system_error(const std::string& what, const std::string& path, int error_number);

/// "regular file", "FIFO", "symbolic link"... for an st_mode, in messages.
const char* file_type_name(std::uint32_t mode);

/// Opens a regular file for reading. Anything else (a FIFO, whose open and reads would wait
/// forever for a writer; a device; a directory) is refused, naming `path` and what it is.
Result<UniqueFd> open_for_reading(const std::string& path);
/// Opens the regular file `relative` below the directory `root` without following a symbolic
/// link in any component of `relative` (root itself may be one): a link is refused, named.
Result<UniqueFd> open_regular_below(const std::string& root, const std::string& relative);
/// Creates `path` exclusively (O_EXCL), mode 0644.
Result<UniqueFd> create_file(const std::string& path);
Result<void> write_all(int fd, const char* data, std::size_t size, const std::string& path);
/// Reads up to `size` bytes; fewer only at the end of the file.
Result<std::size_t> read_full(int fd, char* data, std::size_t size, const std::string& path);

/// One read(2): what is there now, up to `size` (pipes and FIFOs deliver data as it comes).
Result<std::size_t> read_some(int fd, char* data, std::size_t size, const std::string& path);

/// A read-only map of part of a file, unmapped on destruction. Its pages are the page cache's
/// own: a write(2) from them copies each byte once, where read(2) then write(2) copies it twice.
/// Read it in this process only inside guard_mapped_reads; system calls may take it anywhere
/// (the kernel reports a page it cannot read as EFAULT, not SIGBUS).
class MappedRange {
public:
    /// `offset` must be a multiple of the page size; `length` > 0.
    static Result<MappedRange> map(int fd, std::uint64_t offset, std::size_t length,
                                   const std::string& path);
    ~MappedRange();
    MappedRange(const MappedRange&) = delete;
    MappedRange& operator=(const MappedRange&) = delete;
    MappedRange(MappedRange&& other) noexcept;
    MappedRange& operator=(MappedRange&& other) noexcept;

    [[nodiscard]] const char* data() const noexcept { return m_data; }
    [[nodiscard]] std::size_t size() const noexcept { return m_size; }

private:
    MappedRange(const char* data, std::size_t size) : m_data(data), m_size(size) {}
    const char* m_data = nullptr;
    std::size_t m_size = 0;
};

/// Runs `reads`, which reads from a MappedRange of `path`. A page that cannot be read (the file
/// shrank under the map, or its file system failed: a Lustre eviction, an NFS timeout) raises
/// SIGBUS, which would kill the process; here it ends `reads` and becomes an io error naming
/// `path`. `reads` is left by a jump: it must own nothing that needs destroying.
Result<void> guard_mapped_reads(const std::function<void()>& reads, const std::string& path);

/// Reads a whole (small) file; fails beyond `max_bytes`.
Result<std::string> read_text_file(const std::string& path, std::size_t max_bytes = 1U << 24U);
/// Writes `text` to a temporary name beside `path` and renames it into place.
Result<void> write_text_file(const std::string& path, const std::string& text);

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);

/// Creates `path` with mode 0700 if missing; fails unless it then is a directory owned by us
/// (node-local /tmp is shared between users).
Result<void> make_private_directory(const std::string& path);

/// Removes a tree without following symbolic links (unlinkat, depth first). Missing: ok.
Result<void> remove_tree(const std::string& path);

Result<void> rename_path(const std::string& from, const std::string& to);

/// Free space, inodes and type of the file system holding `path`.
Result<FilesystemSpace> filesystem_space(const std::string& path);

/// The file system a path is on, by statfs magic (util/filesystem_types.hpp's one table).
struct FilesystemKind {
    bool known = false;           // statfs answered
    bool network = false;         // shared between nodes: NFS, Lustre, GPFS, BeeGFS, CephFS, SMB...
    std::string name = "unknown"; // "lustre", "ext4", or the magic in hex when not in the table
};

/// The file system holding `path`, or, for a path not made yet (a store, a pack about to be
/// written), the nearest existing directory above it. When statfs cannot tell, `known` is false
/// and each caller picks its own cautious answer.
FilesystemKind filesystem_kind(const std::string& path);

/// An exclusive flock on a lock file (created if missing), released on destruction or when the
/// process dies. flock works on node-local file systems; on many Lustre/NFS mounts it does not,
/// which is why staging locks live in the (node-local) target.
class FileLock {
public:
    /// Blocks until the lock is held; calls `on_wait` once if another process holds it.
    static Result<FileLock> acquire(const std::string& path, const std::function<void()>& on_wait);
    /// The lock if nobody holds it, nullopt if somebody does; never waits.
    static Result<std::optional<FileLock>> try_acquire(const std::string& path);

private:
    explicit FileLock(UniqueFd fd) : m_fd(std::move(fd)) {}
    UniqueFd m_fd;
};

/// Creates directories and files below one root directory, never following links.
class TreeWriter {
public:
    /// `root` must exist and be a directory.
    static Result<TreeWriter> open(const std::string& root);

    /// mkdir -p of a validated relative path; fails when a component exists and is not a
    /// directory.
    Result<void> make_directories(const std::string& relative) const;
    /// Creates a new file (fails if the path exists) and returns its descriptor.
    Result<UniqueFd> create_file(const std::string& relative, std::uint32_t mode) const;
    /// A descriptor (O_PATH) of a directory made by make_directories; "" is the root.
    Result<UniqueFd> open_directory(const std::string& relative) const;
    /// create_file of `relative`, whose directory is `dir_fd` (from open_directory) and whose
    /// last component starts at `name_offset`: the kernel looks up one name, not the path.
    Result<UniqueFd> create_file_in(int dir_fd, const std::string& relative,
                                    std::size_t name_offset, std::uint32_t mode) const;
    Result<void> make_symlink(const std::string& relative, const std::string& target) const;
    [[nodiscard]] const std::string& root() const { return m_root; }

private:
    TreeWriter(UniqueFd fd, std::string root) : m_fd(std::move(fd)), m_root(std::move(root)) {}
    UniqueFd m_fd;
    std::string m_root;
};

} // namespace dljob::adapters
