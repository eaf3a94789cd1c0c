#pragma once
// The lines of Caffe's list files (an ImageData source, an HDF5Data source): a regular file of
// bounded size, read whole; each non-empty line with its 1-based number, trailing CR and spaces
// trimmed.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dl::data {

struct TextLine {
    std::string text;
    int number = 0;
};

/// Throws dl::Error(config) naming `what` and the file when it is missing, not a regular file,
/// or larger than `max_bytes`.
std::vector<TextLine> read_text_lines(const std::filesystem::path& file, const char* what,
                                      std::uint64_t max_bytes);

} // namespace dl::data
