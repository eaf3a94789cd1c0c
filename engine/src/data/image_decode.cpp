#include "data/image_decode.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <png.h>
// jpeglib.h needs FILE and size_t declared before it.
#include <jpeglib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

namespace dl::data {
namespace {

// The most bytes one decoded image may take: an image header's width and height are the file's
// claim (libpng allows 10^6 x 10^6, JPEG 65535 x 65535), checked before the pixels are
// allocated. 256 MiB is a 9000 x 9000 colour image, far beyond what a Data layer trains on.
constexpr std::uint64_t k_max_image_bytes = std::uint64_t{256} << 20;

/// Nothing when width x height x channels fits the cap, else the error to give.
std::optional<std::string> too_large(std::uint64_t width, std::uint64_t height, int channels,
                                     const std::string& what) {
    const std::uint64_t bytes = width * height * static_cast<std::uint64_t>(channels);
    if (bytes <= k_max_image_bytes) {
        return std::nullopt;
    }
    return fmt::format("{}: a {}x{} image of {} channel(s) is {} bytes decoded, more than the "
                       "{} bytes one image may have",
                       what, width, height, channels, bytes, k_max_image_bytes);
}

// Interleaved HxWxC (what the decoders produce) to CxHxW.
void to_planar(const std::vector<std::uint8_t>& interleaved, DecodedImage& image) {
    const std::size_t plane = static_cast<std::size_t>(image.height) * image.width;
    image.pixels.resize(plane * image.channels);
    for (std::size_t p = 0; p < plane; ++p) {
        for (int c = 0; c < image.channels; ++c) {
            image.pixels[c * plane + p] = interleaved[p * image.channels + c];
        }
    }
}

DecodedImage decode_png(const std::vector<std::uint8_t>& bytes, int channels,
                        const std::string& what) {
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    if (png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()) == 0) {
        throw Error(ErrorKind::config, fmt::format("{}: bad PNG ({})", what, png.message));
    }
    if (channels == 0) {
        channels = (png.format & PNG_FORMAT_FLAG_COLOR) != 0 ? 3 : 1;
    }
    png.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    DecodedImage image;
    image.channels = channels;
    image.height = static_cast<int>(png.height);
    image.width = static_cast<int>(png.width);
    if (auto problem = too_large(png.width, png.height, channels, what)) {
        png_image_free(&png);
        throw Error(ErrorKind::config, *problem);
    }
    std::vector<std::uint8_t> interleaved(PNG_IMAGE_SIZE(png));
    if (png_image_finish_read(&png, nullptr, interleaved.data(), 0, nullptr) == 0) {
        throw Error(ErrorKind::config, fmt::format("{}: bad PNG ({})", what, png.message));
    }
    to_planar(interleaved, image);
    return image;
}

struct JpegError {
    jpeg_error_mgr manager{};
    std::jmp_buf jump{};
    std::array<char, JMSG_LENGTH_MAX> message{};
};

extern "C" void on_jpeg_error(j_common_ptr info) {
    auto* error = reinterpret_cast<JpegError*>(info->err); // NOLINT: libjpeg's documented idiom
    (*info->err->format_message)(info, error->message.data());
    std::longjmp(error->jump, 1); // NOLINT(cert-err52-cpp): libjpeg reports errors only this way
}

// Everything libjpeg touches lives here, reached through one reference: after a longjmp, no
// local variable of the function that called setjmp has changed (-Wclobbered).
struct JpegJob {
    const std::vector<std::uint8_t>* bytes = nullptr;
    int channels = 0;
    DecodedImage image;
    std::vector<std::uint8_t> interleaved;
    jpeg_decompress_struct info{};
    JpegError error;
    bool created = false;
    std::optional<std::string> too_large; // set instead of decoding
};

bool run_jpeg(JpegJob& job) {
    if (setjmp(job.error.jump) != 0) { // NOLINT(cert-err52-cpp)
        return false;
    }
    jpeg_decompress_struct& info = job.info;
    jpeg_create_decompress(&info);
    job.created = true;
    jpeg_mem_src(&info, job.bytes->data(), static_cast<unsigned long>(job.bytes->size()));
    jpeg_read_header(&info, TRUE);
    if (job.channels == 0) {
        job.channels = info.num_components == 1 ? 1 : 3;
    }
    info.out_color_space = job.channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    job.too_large = too_large(info.image_width, info.image_height, job.channels, "");
    if (job.too_large) {
        return false;
    }
    jpeg_start_decompress(&info);
    job.image.channels = job.channels;
    job.image.height = static_cast<int>(info.output_height);
    job.image.width = static_cast<int>(info.output_width);
    const std::size_t stride = static_cast<std::size_t>(job.image.width) * job.channels;
    job.interleaved.resize(stride * job.image.height);
    while (info.output_scanline < info.output_height) {
        JSAMPROW row = job.interleaved.data() + info.output_scanline * stride;
        jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
    return true;
}

DecodedImage decode_jpeg(const std::vector<std::uint8_t>& bytes, int channels,
                         const std::string& what) {
    JpegJob job;
    job.bytes = &bytes;
    job.channels = channels;
    job.info.err = jpeg_std_error(&job.error.manager);
    job.error.manager.error_exit = on_jpeg_error;
    const bool ok = run_jpeg(job);
    if (job.created) {
        jpeg_destroy_decompress(&job.info);
    }
    if (job.too_large) {
        throw Error(ErrorKind::config, what + *job.too_large);
    }
    if (!ok) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: bad JPEG ({})", what, job.error.message.data()));
    }
    to_planar(job.interleaved, job.image);
    return std::move(job.image);
}

// Binary PGM (P5) and PPM (P6), 8-bit: "P5 <w> <h> <max>\n" then the bytes.
DecodedImage decode_pnm(const std::vector<std::uint8_t>& bytes, int channels,
                        const std::string& what) {
    std::size_t pos = 2;
    const auto number = [&]() {
        while (pos < bytes.size() && (std::isspace(bytes[pos]) != 0 || bytes[pos] == '#')) {
            if (bytes[pos] == '#') {
                while (pos < bytes.size() && bytes[pos] != '\n') {
                    ++pos;
                }
            } else {
                ++pos;
            }
        }
        long value = 0;
        const std::size_t start = pos;
        while (pos < bytes.size() && std::isdigit(bytes[pos]) != 0 && value < 1'000'000) {
            value = value * 10 + (bytes[pos++] - '0');
        }
        if (pos == start) {
            throw Error(ErrorKind::config, fmt::format("{}: bad PNM header", what));
        }
        return static_cast<int>(value);
    };
    const int own = bytes[1] == '6' ? 3 : 1;
    DecodedImage image;
    image.width = number();
    image.height = number();
    const int max = number();
    ++pos; // the one whitespace byte before the pixels
    const std::size_t plane = static_cast<std::size_t>(image.width) * image.height;
    if (max != 255 || bytes.size() < pos + plane * own) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: PNM must be 8-bit and complete ({}x{}, max {})", what,
                                image.width, image.height, max));
    }
    std::vector<std::uint8_t> interleaved(bytes.begin() + static_cast<std::ptrdiff_t>(pos),
                                          bytes.begin() +
                                              static_cast<std::ptrdiff_t>(pos + plane * own));
    image.channels = own;
    to_planar(interleaved, image);
    if (channels == 0 || channels == own) {
        return image;
    }
    DecodedImage converted = image;
    converted.channels = channels;
    converted.pixels.assign(plane * channels, 0);
    for (std::size_t p = 0; p < plane; ++p) {
        if (channels == 3) { // grey to RGB: copy the plane
            for (int c = 0; c < 3; ++c) {
                converted.pixels[c * plane + p] = image.pixels[p];
            }
        } else { // RGB to grey: ITU-R BT.601 luma, as libjpeg and libpng compute it
            const double y = 0.299 * image.pixels[p] + 0.587 * image.pixels[plane + p] +
                             0.114 * image.pixels[2 * plane + p];
            converted.pixels[p] = static_cast<std::uint8_t>(std::lround(y));
        }
    }
    return converted;
}

// The decoders' RGB planes in OpenCV's order.
DecodedImage to_bgr(DecodedImage image) {
    if (image.channels == 3) {
        const auto plane = static_cast<std::ptrdiff_t>(image.height) * image.width;
        std::swap_ranges(image.pixels.begin(), image.pixels.begin() + plane,
                         image.pixels.begin() + 2 * plane);
    }
    return image;
}

} // namespace

DecodedImage decode_image(const std::vector<std::uint8_t>& bytes, int channels,
                          const std::string& what) {
    if (bytes.size() >= 8 && std::memcmp(bytes.data(), "\x89PNG\r\n\x1a\n", 8) == 0) {
        return to_bgr(decode_png(bytes, channels, what));
    }
    if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
        return to_bgr(decode_jpeg(bytes, channels, what));
    }
    if (bytes.size() >= 3 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '6')) {
        return to_bgr(decode_pnm(bytes, channels, what));
    }
    throw Error(ErrorKind::config,
                fmt::format("{}: not a PNG, JPEG or binary PGM/PPM image", what));
}

namespace {

/// For each output coordinate, the source index below it and the weight of the one above.
struct Taps {
    std::vector<int> low;
    std::vector<float> weight;
};

Taps taps(int from, int to) {
    Taps t;
    t.low.resize(static_cast<std::size_t>(to));
    t.weight.resize(static_cast<std::size_t>(to));
    const double scale = static_cast<double>(from) / to;
    for (int i = 0; i < to; ++i) {
        const double at = (i + 0.5) * scale - 0.5;
        int low = static_cast<int>(std::floor(at));
        double weight = at - low;
        if (low < 0) {
            low = 0;
            weight = 0.0;
        }
        if (low >= from - 1) {
            low = from - 1;
            weight = 0.0;
        }
        t.low[static_cast<std::size_t>(i)] = low;
        t.weight[static_cast<std::size_t>(i)] = static_cast<float>(weight);
    }
    return t;
}

} // namespace

DecodedImage resize_bilinear(const DecodedImage& image, int height, int width) {
    if (image.height == height && image.width == width) {
        return image;
    }
    const Taps rows = taps(image.height, height);
    const Taps cols = taps(image.width, width);
    DecodedImage out;
    out.channels = image.channels;
    out.height = height;
    out.width = width;
    out.pixels.resize(static_cast<std::size_t>(image.channels) * height * width);
    const auto in_plane = static_cast<std::size_t>(image.height) * image.width;
    const auto out_plane = static_cast<std::size_t>(height) * width;
    for (int c = 0; c < image.channels; ++c) {
        const std::uint8_t* in = image.pixels.data() + c * in_plane;
        std::uint8_t* dst = out.pixels.data() + c * out_plane;
        for (int y = 0; y < height; ++y) {
            const int y0 = rows.low[static_cast<std::size_t>(y)];
            const int y1 = std::min(y0 + 1, image.height - 1);
            const float wy = rows.weight[static_cast<std::size_t>(y)];
            for (int x = 0; x < width; ++x) {
                const int x0 = cols.low[static_cast<std::size_t>(x)];
                const int x1 = std::min(x0 + 1, image.width - 1);
                const float wx = cols.weight[static_cast<std::size_t>(x)];
                const auto at = [&](int yy, int xx) {
                    return static_cast<float>(in[static_cast<std::size_t>(yy) * image.width + xx]);
                };
                const float top = (1.0F - wx) * at(y0, x0) + wx * at(y0, x1);
                const float bottom = (1.0F - wx) * at(y1, x0) + wx * at(y1, x1);
                const float value = (1.0F - wy) * top + wy * bottom;
                dst[static_cast<std::size_t>(y) * width + x] =
                    static_cast<std::uint8_t>(std::clamp(std::lround(value), 0L, 255L));
            }
        }
    }
    return out;
}

} // namespace dl::data
