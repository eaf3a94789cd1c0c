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

/// The same for a file written in pieces (a checkpoint of hundreds of MB is not built in memory
/// first): write() appends to the temporary file, commit() fsyncs it and renames it into place.
/// Destroyed without commit(), the temporary file is removed and `path` is as it was.
class AtomicFile {
public:
    explicit AtomicFile(std::filesystem::path path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    AtomicFile(AtomicFile&&) = delete;
    AtomicFile& operator=(AtomicFile&&) = delete;
    void write(const void* data, std::size_t size);
    void commit();

private:
    std::filesystem::path m_path;
    std::filesystem::path m_tmp;
    int m_fd = -1;
};

} // namespace dl::io
