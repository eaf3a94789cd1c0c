#pragma once
// Files the engine writes whole or not at all: checkpoints and their markers, exported
// .caffemodel weights, converted configs.

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace dl::io {

/// Writes `data` to a temporary file beside `path`, fsyncs it, renames it into place and fsyncs
/// the directory: `path` is the old file or the whole new one, never a part. On any failure the
/// temporary file is removed and dl::Error(training) names the file and the reason.
void write_atomically(const std::filesystem::path& path, const char* data, std::size_t size);
inline void write_atomically(const std::filesystem::path& path, std::string_view text) {
    write_atomically(path, text.data(), text.size());
}

} // namespace dl::io
