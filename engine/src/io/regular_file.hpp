#pragma once
// Opening the engine's input files (config, data, checkpoints, markers) so that nothing waits on
// them and nothing is sized by what a file claims: a FIFO or a device given as a file is refused
// at once (open with O_NONBLOCK, then fstat), and a read is bounded by the file's real size.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dl::io {

/// An open, regular file: closes on destruction.
class RegularFile {
public:
    /// Throws dl::Error(config) "<what> <path> does not exist" / "is a directory" / "is not a
    /// regular file (a FIFO)", without ever blocking.
    RegularFile(const std::filesystem::path& path, const std::string& what);
    ~RegularFile();
    RegularFile(const RegularFile&) = delete;
    RegularFile& operator=(const RegularFile&) = delete;
    RegularFile(RegularFile&&) = delete;
    RegularFile& operator=(RegularFile&&) = delete;

    [[nodiscard]] int fd() const { return m_fd; }
    /// Hands the descriptor over (to gzdopen); the caller closes it.
    int release();
    /// The size fstat gave when the file was opened.
    [[nodiscard]] std::uint64_t size() const { return m_size; }
    /// Every byte, at most `max_bytes` (more is an error naming the limit); a file that changes
    /// size while read is read as far as it goes.
    std::vector<char> read_all(std::uint64_t max_bytes) const;

private:
    std::filesystem::path m_path;
    std::string m_what;
    int m_fd = -1;
    std::uint64_t m_size = 0;
};

} // namespace dl::io
