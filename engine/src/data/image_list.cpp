#include "data/image_list.hpp"

#include "data/image_decode.hpp"
#include "data/text_lines.hpp"
#include "io/regular_file.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

namespace dl::data {
namespace {

// ImageNet's train.txt is 44 MB; the list is read whole.
constexpr std::uint64_t k_max_list_bytes = std::uint64_t{256} << 20;
// One image file before decoding (decode_image bounds the decoded size).
constexpr std::uint64_t k_max_image_file_bytes = std::uint64_t{256} << 20;

struct Entry {
    std::string name;
    std::int32_t label = 0;
    int line = 0;
};

std::vector<Entry> read_list(const std::filesystem::path& list) {
    std::vector<Entry> entries;
    for (const TextLine& text_line : read_text_lines(list, "image list", k_max_list_bytes)) {
        const std::string& line = text_line.text;
        const int number = text_line.number;
        // Caffe's ImageDataLayer: the label follows the last space, the rest is the path.
        const std::size_t space = line.find_last_of(' ');
        Entry entry;
        entry.line = number;
        const std::string label = space == std::string::npos ? "" : line.substr(space + 1);
        const auto [at, error] =
            std::from_chars(label.data(), label.data() + label.size(), entry.label);
        if (space == std::string::npos || label.empty() || error != std::errc() ||
            at != label.data() + label.size() || entry.label < 0) {
            throw Error(ErrorKind::config,
                        fmt::format("image list {} line {}: '{}' is not 'PATH LABEL' (a label of "
                                    "0 to 2147483647 after the last space, as Caffe's "
                                    "ImageData reads it)",
                                    list.string(), number, line));
        }
        entry.name = line.substr(0, space);
        entries.push_back(std::move(entry));
    }
    if (entries.empty()) {
        throw Error(ErrorKind::config, fmt::format("image list {} names no image", list.string()));
    }
    return entries;
}

DecodedImage read_image(const std::filesystem::path& list, const Entry& entry,
                        const ImageListOptions& options) {
    const std::filesystem::path file = options.image_path(entry.name);
    const std::string what =
        fmt::format("image list {} line {}: {}", list.string(), entry.line, file.string());
    std::vector<char> bytes;
    try {
        bytes = io::RegularFile(file, "image").read_all(k_max_image_file_bytes);
    } catch (const Error& e) {
        throw Error(e.kind(),
                    fmt::format("image list {} line {}: {}", list.string(), entry.line, e.what()));
    }
    DecodedImage image = decode_image(std::vector<std::uint8_t>(bytes.begin(), bytes.end()),
                                      options.is_color ? 3 : 1, what);
    if (options.new_height > 0 && options.new_width > 0) {
        image = resize_bilinear(image, options.new_height, options.new_width);
    }
    return image;
}

} // namespace

IdxDataset read_image_list_header(const std::filesystem::path& list,
                                  const ImageListOptions& options) {
    const std::vector<Entry> entries = read_list(list);
    IdxDataset set;
    set.count = entries.size();
    set.channels = options.is_color ? 3 : 1;
    if (options.new_height > 0 && options.new_width > 0) {
        set.height = options.new_height;
        set.width = options.new_width;
    } else {
        const DecodedImage first = read_image(list, entries.front(), options);
        set.height = first.height;
        set.width = first.width;
    }
    return set;
}

IdxDataset load_image_list(const std::filesystem::path& list, const ImageListOptions& options,
                           const DataBudget& budget) {
    const std::vector<Entry> entries = read_list(list);
    IdxDataset set;
    set.count = entries.size();
    set.labels.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const DecodedImage image = read_image(list, entries[i], options);
        if (i == 0) {
            set.channels = image.channels;
            set.height = image.height;
            set.width = image.width;
            budget.check(static_cast<std::uint64_t>(set.count) * set.image_size(),
                         fmt::format("image list {} ({} images of {}x{}x{})", list.string(),
                                     set.count, set.channels, set.height, set.width));
            set.pixels.reserve(set.count * set.image_size());
        } else if (image.height != set.height || image.width != set.width) {
            throw Error(ErrorKind::config,
                        fmt::format("image list {} line {}: {} is {}x{} but the first image is "
                                    "{}x{}: set new_height and new_width to resize them all",
                                    list.string(), entries[i].line,
                                    options.image_path(entries[i].name).string(), image.height,
                                    image.width, set.height, set.width));
        }
        set.pixels.insert(set.pixels.end(), image.pixels.begin(), image.pixels.end());
        set.labels.push_back(entries[i].label);
    }
    return set;
}

} // namespace dl::data
