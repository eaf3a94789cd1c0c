#pragma once
// Small file helpers: atomic replacement (temp file, fsync, rename) and whole-file reads.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace dljob::util {

/// Writes `content` to a temporary file next to `path`, fsyncs it and renames it over `path`,
/// so readers see the old or the new file, never a torn one (and NFS sees a flushed script
/// before sbatch reads it). Returns an error message, empty on success.
std::string write_file_atomic(const std::filesystem::path& path, std::string_view content,
                              bool executable = false);

/// The most read_file reads unless told otherwise: far above any file dljob writes or reads
/// whole (run-directory records, scripts, recipes), far below what would hurt a login node.
inline constexpr std::size_t default_max_read = std::size_t{16} << 20U;

/// The whole file, or nullopt when it cannot be read, is not a regular file (a FIFO would block
/// the read, /dev/zero never end it) or is larger than `max_bytes` (read_regular_file).
std::optional<std::string> read_file(const std::filesystem::path& path,
                                     std::size_t max_bytes = default_max_read);

/// The outcome of read_regular_file.
struct BoundedRead {
    enum class Status { ok, missing, not_regular, too_large, unreadable };
    Status status = Status::ok;
    std::string content;    // ok: the whole file
    std::string what;       // not_regular: what it is ("a FIFO (named pipe)"); unreadable: why
    std::uint64_t size = 0; // too_large: the size stat gave, or the bytes read before stopping
};

/// Reads a regular file of at most `max_bytes`, never blocking and never reading without end.
/// A directory, FIFO, device or socket is refused by stat before it is opened (opening a FIFO
/// waits for a writer, /dev/zero never ends, opening some devices has side effects), and so is
/// a file stat says is too large (a sparse file costs nothing to make at any size). The open is
/// O_NONBLOCK and checked again with fstat, in case the path was swapped in between, and at
/// most max_bytes + 1 bytes are read, so a file that grows after the stat is refused too.
BoundedRead read_regular_file(const std::filesystem::path& path, std::size_t max_bytes);

/// What a file of this st_mode is when it is not a regular file, for messages: "a directory",
/// "a FIFO (named pipe)", "a character device", "a block device", "a socket"; empty for a
/// regular file.
std::string non_regular_kind(unsigned int st_mode);
/// The same for what `path` names (after symlinks), by stat alone, so nothing is opened or
/// waited on; empty for a regular file and for a path that does not exist.
std::string non_regular_kind(const std::filesystem::path& path);

/// Seconds since the epoch.
std::int64_t unix_now();

/// A random lower-case hex string of `length` characters (from std::random_device).
std::string random_hex(std::size_t length);

} // namespace dljob::util
