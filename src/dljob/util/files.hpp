#pragma once
// Small file helpers: atomic replacement (temp file, fsync, rename) and whole-file reads.

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

/// The whole file, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::filesystem::path& path);

/// Seconds since the epoch.
std::int64_t unix_now();

/// A random lower-case hex string of `length` characters (from std::random_device).
std::string random_hex(std::size_t length);

} // namespace dljob::util
