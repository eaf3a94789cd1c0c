#include "data/idx_dataset.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <zlib.h>

#include <array>
#include <memory>

namespace dl::data {
namespace {

struct GzClose {
    void operator()(gzFile file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

// gzread also reads uncompressed files as they are, so .gz and raw need no distinction.
GzFile open_file(const std::filesystem::path& path) {
    if (!std::filesystem::exists(path)) {
        throw Error(ErrorKind::config, fmt::format("data file {} does not exist", path.string()));
    }
    GzFile file(gzopen(path.c_str(), "rb"));
    if (!file) {
        throw Error(ErrorKind::config, fmt::format("cannot open data file {}", path.string()));
    }
    return file;
}

void read_exact(gzFile file, void* out, std::size_t size, const std::filesystem::path& path) {
    auto* bytes = static_cast<char*>(out);
    while (size > 0) {
        const unsigned chunk = size > (1U << 30) ? (1U << 30) : static_cast<unsigned>(size);
        const int n = gzread(file, bytes, chunk);
        if (n <= 0) {
            throw Error(ErrorKind::config,
                        fmt::format("data file {} is truncated or corrupt", path.string()));
        }
        bytes += n;
        size -= static_cast<std::size_t>(n);
    }
}

std::uint32_t big_endian(const std::array<std::uint8_t, 4>& b) {
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
           std::uint32_t{b[3]};
}

// Header: magic 0x0000 08 <rank>, then <rank> big-endian u32 dimensions; returns the dims.
std::vector<std::uint32_t> read_header(gzFile file, const std::filesystem::path& path) {
    std::array<std::uint8_t, 4> word{};
    read_exact(file, word.data(), 4, path);
    if (word[0] != 0 || word[1] != 0 || word[2] != 0x08 || word[3] < 1 || word[3] > 4) {
        throw Error(ErrorKind::config,
                    fmt::format("data file {} is not an IDX file of unsigned bytes (magic "
                                "{:02x}{:02x}{:02x}{:02x})",
                                path.string(), word[0], word[1], word[2], word[3]));
    }
    std::vector<std::uint32_t> dims(word[3]);
    for (auto& dim : dims) {
        read_exact(file, word.data(), 4, path);
        dim = big_endian(word);
    }
    return dims;
}

IdxDataset header_of(gzFile file, const std::filesystem::path& path) {
    const auto dims = read_header(file, path);
    if (dims.size() < 3) {
        throw Error(ErrorKind::config,
                    fmt::format("data file {} holds {}-D data, images need 3 or 4 dimensions",
                                path.string(), dims.size()));
    }
    IdxDataset set;
    set.count = dims[0];
    set.channels = dims.size() == 4 ? static_cast<int>(dims[1]) : 1;
    set.height = static_cast<int>(dims[dims.size() - 2]);
    set.width = static_cast<int>(dims[dims.size() - 1]);
    return set;
}

} // namespace

IdxDataset read_idx_header(const std::filesystem::path& images) {
    const GzFile file = open_file(images);
    return header_of(file.get(), images);
}

IdxDataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels) {
    IdxDataset set;
    {
        const GzFile file = open_file(images);
        set = header_of(file.get(), images);
        set.pixels.resize(set.count * set.image_size());
        read_exact(file.get(), set.pixels.data(), set.pixels.size(), images);
    }
    if (!labels.empty()) {
        const GzFile file = open_file(labels);
        const auto dims = read_header(file.get(), labels);
        if (dims.size() != 1 || dims[0] != set.count) {
            throw Error(ErrorKind::config,
                        fmt::format("label file {} has {} labels but {} has {} images",
                                    labels.string(), dims.empty() ? 0 : dims[0], images.string(),
                                    set.count));
        }
        set.labels.resize(set.count);
        read_exact(file.get(), set.labels.data(), set.labels.size(), labels);
    }
    if (set.count == 0) {
        throw Error(ErrorKind::config, fmt::format("data file {} has no images", images.string()));
    }
    return set;
}

} // namespace dl::data
