#include "data/mean_file.hpp"

#include "io/regular_file.hpp"
#include "records/protobuf_wire.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

namespace dl::data {
namespace {

using records::WireReader;

// A mean holds one value per pixel of the images; the largest encoding of one is an unpacked
// double (a tag byte and 8 bytes). The file may hold that and a little more (its shape, a tag or
// two), never megabytes beyond: a 100 MB mean file for 28x28 images once took 1.5 GB to refuse.
constexpr std::uint64_t k_max_bytes_per_value = 9;
constexpr std::uint64_t k_mean_overhead_bytes = 4096;
// Caffe writes 1 x C x H x W (or the legacy num, channels, height, width).
constexpr std::size_t k_max_mean_dims = 4;

template <typename T> T read_le(const std::uint8_t* bytes) {
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return value; // x86-64 and every target dltrain builds for are little-endian, as the format
}

// Floats (fixed32) or doubles (fixed64) of a repeated field, packed or not; more than `max`
// values in all is malformed (the images' pixel count).
template <typename T>
void read_reals(WireReader& in, std::uint32_t wire, std::vector<float>& out, std::size_t max) {
    if (wire == 2) {
        const auto [start, length] = in.bytes();
        if (length % sizeof(T) != 0) {
            in.malformed(fmt::format("a packed field of {} bytes", length));
        }
        if (out.size() + length / sizeof(T) > max) {
            in.malformed(fmt::format("more than the {} values of its images", max));
        }
        for (std::size_t i = 0; i < length; i += sizeof(T)) {
            out.push_back(static_cast<float>(read_le<T>(start + i)));
        }
    } else {
        if (out.size() >= max) {
            in.malformed(fmt::format("more than the {} values of its images", max));
        }
        out.push_back(static_cast<float>(read_le<T>(in.fixed(sizeof(T)))));
    }
}

std::vector<std::int64_t> read_shape(const std::uint8_t* bytes, std::size_t size,
                                     const std::string& what) {
    WireReader in(bytes, size, what, "BlobShape");
    std::vector<std::int64_t> dims;
    while (!in.done()) {
        const std::uint64_t tag = in.varint();
        const auto field = static_cast<std::uint32_t>(tag >> 3U);
        const auto wire = static_cast<std::uint32_t>(tag & 7U);
        if (field == 1 && wire == 2) {
            const auto [start, length] = in.bytes();
            WireReader packed(start, length, what, "BlobShape");
            while (!packed.done()) {
                dims.push_back(static_cast<std::int64_t>(packed.varint()));
                if (dims.size() > k_max_mean_dims) {
                    packed.malformed(fmt::format("more than {} dimensions", k_max_mean_dims));
                }
            }
        } else if (field == 1 && wire == 0) {
            dims.push_back(static_cast<std::int64_t>(in.varint()));
            if (dims.size() > k_max_mean_dims) {
                in.malformed(fmt::format("more than {} dimensions", k_max_mean_dims));
            }
        } else {
            in.skip(wire, field);
        }
    }
    return dims;
}

} // namespace

namespace {

struct MeanBlob {
    std::vector<std::int64_t> shape; // C x H x W (a leading 1 dropped)
    std::vector<float> data;
    std::string what;
};

/// The BlobProto's shape and values, reading at most `max_count` of them.
MeanBlob read_mean_blob(const std::filesystem::path& file, std::size_t max_count) {
    const std::vector<char> raw =
        io::RegularFile(file, "mean file")
            .read_all(max_count * k_max_bytes_per_value + k_mean_overhead_bytes);
    MeanBlob blob;
    blob.what = "mean file " + file.string();
    WireReader in(reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size(), blob.what,
                  "BlobProto");
    std::vector<std::int64_t> legacy(4, 0);
    bool has_legacy = false;
    std::vector<float> doubles;
    while (!in.done()) {
        const std::uint64_t tag = in.varint();
        const auto field = static_cast<std::uint32_t>(tag >> 3U);
        const auto wire = static_cast<std::uint32_t>(tag & 7U);
        if (field >= 1 && field <= 4 && wire == 0) {
            legacy[field - 1] = static_cast<std::int64_t>(in.varint());
            has_legacy = true;
        } else if (field == 5 && (wire == 2 || wire == 5)) {
            read_reals<float>(in, wire, blob.data, max_count);
        } else if (field == 7 && wire == 2) {
            const auto [start, length] = in.bytes();
            blob.shape = read_shape(start, length, blob.what);
        } else if (field == 8 && (wire == 2 || wire == 1)) {
            read_reals<double>(in, wire, doubles, max_count);
        } else if (field >= 1 && field <= 9 && field != 6 && field != 9) {
            in.malformed(fmt::format("field {} has wire type {} at byte {}", field, wire, in.at()));
        } else {
            in.skip(wire, field);
        }
    }
    if (!doubles.empty()) {
        blob.data = std::move(doubles);
    }
    if (has_legacy) {
        blob.shape = legacy;
    }
    if (blob.shape.size() == 4 && blob.shape[0] == 1) {
        blob.shape.erase(blob.shape.begin());
    }
    return blob;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    return shape.empty() ? "(none)" : fmt::format("{}", fmt::join(shape, "x"));
}

} // namespace

std::vector<float> load_mean_file(const std::filesystem::path& file, int channels, int height,
                                  int width) {
    const std::size_t count = static_cast<std::size_t>(channels) * height * width;
    MeanBlob blob = read_mean_blob(file, count);
    const std::vector<std::int64_t> expected = {channels, height, width};
    if (blob.shape != expected) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: a mean of shape {} for images of {}x{}x{} (Caffe's "
                                "compute_image_mean writes 1 x C x H x W)",
                                blob.what, shape_text(blob.shape), channels, height, width));
    }
    if (blob.data.size() != count) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: {} values for its shape {}x{}x{} ({} expected)", blob.what,
                                blob.data.size(), channels, height, width, count));
    }
    return std::move(blob.data);
}

std::vector<float> load_channel_means(const std::filesystem::path& file, int channels) {
    MeanBlob blob = read_mean_blob(file, static_cast<std::size_t>(channels) * k_max_mean_plane);
    if (blob.shape.size() != 3 || blob.shape[0] != channels || blob.shape[1] < 1 ||
        blob.shape[2] < 1 || blob.shape[1] > k_max_mean_plane || blob.shape[2] > k_max_mean_plane ||
        blob.shape[1] * blob.shape[2] > k_max_mean_plane) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: a mean of shape {} for images of {} channel(s) (Caffe's "
                                "compute_image_mean writes 1 x C x H x W, H x W at most {})",
                                blob.what, shape_text(blob.shape), channels, k_max_mean_plane));
    }
    const auto plane = static_cast<std::size_t>(blob.shape[1] * blob.shape[2]);
    if (blob.data.size() != plane * static_cast<std::size_t>(channels)) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: {} values for its shape {} ({} expected)", blob.what,
                                blob.data.size(), shape_text(blob.shape),
                                plane * static_cast<std::size_t>(channels)));
    }
    std::vector<float> means(static_cast<std::size_t>(channels));
    for (std::size_t c = 0; c < means.size(); ++c) {
        double sum = 0.0;
        for (std::size_t p = 0; p < plane; ++p) {
            sum += blob.data[c * plane + p];
        }
        means[c] = static_cast<float>(sum / static_cast<double>(plane));
    }
    return means;
}

} // namespace dl::data
