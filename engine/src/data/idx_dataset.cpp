#include "data/idx_dataset.hpp"

#include "data/cifar_dataset.hpp"
#include "data/image_decode.hpp"
#include "data/leveldb_dataset.hpp"
#include "data/lmdb_dataset.hpp"
#include "data/pack_reader.hpp"
#include "io/regular_file.hpp"

#include <dl/error.hpp>
#include <dl/stop.hpp>

#include <fmt/format.h>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <limits>
#include <memory>

namespace dl::data {
namespace {

struct GzClose {
    void operator()(gzFile file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

// gzread also reads uncompressed files as they are, so .gz and raw need no distinction. A FIFO
// or a device is refused, not waited on.
GzFile open_file(const std::filesystem::path& path) {
    io::RegularFile regular(path, "data file");
    GzFile file(gzdopen(regular.fd(), "rb"));
    if (!file) {
        throw Error(ErrorKind::config, fmt::format("cannot open data file {}", path.string()));
    }
    regular.release(); // gzclose closes it now
    return file;
}

// Reads of a few MB between looks at the stop flag: a data set of GBs takes minutes to read,
// and a stop signal must not wait for it (dltrain train leaves with exit 75).
constexpr std::size_t k_read_chunk = std::size_t{4} << 20;

void leave_if_stopped(const std::string& what) {
    if (stop_requested()) {
        throw Error(ErrorKind::stopped,
                    fmt::format("stopped by a signal while reading {}, before the first step; "
                                "resume with --resume auto",
                                what));
    }
}

void read_exact(gzFile file, void* out, std::size_t size, const std::filesystem::path& path) {
    auto* bytes = static_cast<char*>(out);
    while (size > 0) {
        leave_if_stopped("data file " + path.string());
        const auto chunk = static_cast<unsigned>(std::min(size, k_read_chunk));
        const int n = gzread(file, bytes, chunk);
        if (n <= 0) {
            throw Error(ErrorKind::config,
                        fmt::format("data file {} is truncated or corrupt", path.string()));
        }
        bytes += n;
        size -= static_cast<std::size_t>(n);
    }
}

/// `size` bytes, allocated as they arrive: a header's counts are the file's claim, so a crafted
/// one (4 x 10^9 images) ends as "truncated" after reading what is there, not as GBs reserved.
std::vector<std::uint8_t> read_claimed(gzFile file, std::uint64_t size,
                                       const std::filesystem::path& path) {
    std::vector<std::uint8_t> out;
    while (out.size() < size) {
        const std::size_t at = out.size();
        const auto chunk =
            static_cast<std::size_t>(std::min<std::uint64_t>(size - at, k_read_chunk));
        out.resize(at + chunk);
        read_exact(file, out.data() + at, chunk, path);
    }
    return out;
}

/// The product of a header's dimensions, or a config error when it does not fit in memory
/// arithmetic (a crafted header).
std::uint64_t checked_product(const std::vector<std::uint32_t>& dims, const std::string& what) {
    std::uint64_t total = 1;
    for (const std::uint32_t dim : dims) {
        if (__builtin_mul_overflow(total, std::uint64_t{dim}, &total) ||
            total > static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max())) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: its header's dimensions multiply beyond 2^63 bytes (a "
                                    "corrupt header?)",
                                    what));
        }
    }
    return total;
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

/// An image set's count and C x H x W from IDX dimensions; each of C, H, W must be a positive int
/// and one image at most 2^31 bytes (what the nets' int shapes hold).
IdxDataset image_set(const std::vector<std::uint32_t>& dims, const std::string& what) {
    IdxDataset set;
    const std::vector<std::uint32_t> image(dims.begin() + 1, dims.end());
    const std::uint64_t image_bytes = checked_product(image, what);
    if (image_bytes == 0 || image_bytes > static_cast<std::uint64_t>(INT32_MAX)) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: images of {} bytes (expected 1 to 2^31 - 1 bytes each)", what,
                                image_bytes));
    }
    checked_product(dims, what);
    set.count = dims[0];
    set.channels = dims.size() == 4 ? static_cast<int>(dims[1]) : 1;
    set.height = static_cast<int>(dims[dims.size() - 2]);
    set.width = static_cast<int>(dims[dims.size() - 1]);
    return set;
}

IdxDataset header_of(gzFile file, const std::filesystem::path& path) {
    const auto dims = read_header(file, path);
    if (dims.size() < 3) {
        throw Error(ErrorKind::config,
                    fmt::format("data file {} holds {}-D data, images need 3 or 4 dimensions",
                                path.string(), dims.size()));
    }
    return image_set(dims, "data file " + path.string());
}

std::vector<std::uint8_t> load_idx_labels(const std::filesystem::path& labels,
                                          const DataBudget& budget) {
    const GzFile file = open_file(labels);
    const auto dims = read_header(file.get(), labels);
    if (dims.size() != 1) {
        throw Error(ErrorKind::config, fmt::format("label file {} is not 1-D", labels.string()));
    }
    // A byte each in the file, an int32 each in memory.
    budget.check(std::uint64_t{dims[0]} * (1 + sizeof(std::int32_t)),
                 "label file " + labels.string());
    return read_claimed(file.get(), dims[0], labels);
}

// ---- IDX held in memory (a member of a pack, gunzipped) ------------------------------------

struct MemoryIdx {
    std::vector<std::uint32_t> dims;
    std::size_t data_offset = 0;
};

MemoryIdx parse_memory_idx(const std::vector<std::uint8_t>& bytes, const std::string& what) {
    if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] < 1 ||
        bytes[3] > 4) {
        throw Error(ErrorKind::config,
                    fmt::format("{} is not an IDX file of unsigned bytes", what));
    }
    MemoryIdx idx;
    idx.dims.resize(bytes[3]);
    idx.data_offset = 4 + 4 * idx.dims.size();
    if (bytes.size() < idx.data_offset) {
        throw Error(ErrorKind::config, fmt::format("{} is truncated", what));
    }
    for (std::size_t i = 0; i < idx.dims.size(); ++i) {
        idx.dims[i] =
            big_endian({bytes[4 + 4 * i], bytes[5 + 4 * i], bytes[6 + 4 * i], bytes[7 + 4 * i]});
    }
    const std::uint64_t total = checked_product(idx.dims, what);
    if (bytes.size() - idx.data_offset < total) {
        throw Error(ErrorKind::config, fmt::format("{} is truncated or corrupt", what));
    }
    return idx;
}

std::string member_name(const PackMemberPath& member) {
    return fmt::format("{} (member {} of the pack {})", (member.pack / member.member).string(),
                       member.member, member.pack.string());
}

std::vector<std::uint8_t> read_member(const PackMemberPath& member, const DataBudget& budget) {
    const Pack pack(member.pack);
    const PackEntry* entry = pack.find(member.member);
    if (entry == nullptr) {
        throw Error(ErrorKind::config, fmt::format("data file {} does not exist: the pack {} has "
                                                   "no member {}",
                                                   (member.pack / member.member).string(),
                                                   member.pack.string(), member.member));
    }
    // The index's size is a claim: held to the budget before anything is read.
    budget.check(entry->size, member_name(member));
    return maybe_gunzip(pack.read(*entry), member_name(member), budget);
}

IdxDataset images_from_member(const PackMemberPath& member, bool with_pixels,
                              const DataBudget& budget) {
    const std::string what = member_name(member);
    const auto bytes = read_member(member, budget);
    const MemoryIdx idx = parse_memory_idx(bytes, what);
    if (idx.dims.size() < 3) {
        throw Error(ErrorKind::config,
                    fmt::format("data file {} holds {}-D data, images need 3 or 4 dimensions", what,
                                idx.dims.size()));
    }
    IdxDataset set = image_set(idx.dims, what);
    if (with_pixels) {
        const auto first = bytes.begin() + static_cast<std::ptrdiff_t>(idx.data_offset);
        set.pixels.assign(first, first + static_cast<std::ptrdiff_t>(set.count * set.image_size()));
    }
    return set;
}

std::vector<std::uint8_t> labels_from_member(const PackMemberPath& member,
                                             const DataBudget& budget) {
    const std::string what = member_name(member);
    const auto bytes = read_member(member, budget);
    const MemoryIdx idx = parse_memory_idx(bytes, what);
    if (idx.dims.size() != 1) {
        throw Error(ErrorKind::config, fmt::format("label file {} is not 1-D", what));
    }
    const auto first = bytes.begin() + static_cast<std::ptrdiff_t>(idx.data_offset);
    return {first, first + static_cast<std::ptrdiff_t>(idx.dims[0])};
}

// ---- image members with labels (a pack made from an image list) ---------------------------

// The image members under `prefix` ("" for all), in index order.
std::vector<const PackEntry*> image_members(const Pack& pack, const std::string& prefix) {
    std::vector<const PackEntry*> members;
    for (const auto& entry : pack.files()) {
        if (prefix.empty() || entry.path.rfind(prefix + "/", 0) == 0) {
            members.push_back(&entry);
        }
    }
    if (members.empty()) {
        throw Error(ErrorKind::config,
                    fmt::format("the pack {} has no member {}", pack.dir().string(),
                                prefix.empty() ? std::string("files") : prefix));
    }
    return members;
}

IdxDataset load_pack_images(const Pack& pack, const std::string& prefix, bool with_labels,
                            bool with_pixels, const DataBudget& budget) {
    const auto members = image_members(pack, prefix);
    IdxDataset set;
    set.count = members.size();
    int channels = 0; // the first image decides; the others are converted to it
    for (std::size_t i = 0; i < members.size(); ++i) {
        const PackEntry& entry = *members[i];
        const std::string what = fmt::format("{} (member {})", pack.dir().string(), entry.path);
        leave_if_stopped(what);
        budget.check(entry.size, what);
        const DecodedImage image = decode_image(pack.read(entry), channels, what);
        if (i == 0) {
            channels = image.channels;
            set.channels = image.channels;
            set.height = image.height;
            set.width = image.width;
            if (with_pixels) {
                // Every image is converted to the first one's size: a small PNG that decodes
                // large, times the members, is what the set takes.
                budget.check(static_cast<std::uint64_t>(set.count) * set.image_size(),
                             fmt::format("{} ({} images of {}x{}x{})", pack.dir().string(),
                                         set.count, set.channels, set.height, set.width));
                set.pixels.resize(set.count * set.image_size());
            }
        } else if (image.height != set.height || image.width != set.width) {
            throw Error(ErrorKind::config,
                        fmt::format("{} is {}x{} but {} is {}x{}: a Data layer's images must "
                                    "all have one size",
                                    what, image.width, image.height, members[0]->path, set.width,
                                    set.height));
        }
        if (with_pixels) {
            std::copy(image.pixels.begin(), image.pixels.end(),
                      set.pixels.begin() + static_cast<std::ptrdiff_t>(i * set.image_size()));
        }
        if (with_labels) {
            if (!entry.label || *entry.label < 0 || *entry.label > INT32_MAX) {
                throw Error(ErrorKind::config,
                            fmt::format("{} has {} (labels must be 0 to 2147483647; pack an "
                                        "image list of 'path label' lines)",
                                        what,
                                        entry.label ? fmt::format("label {}", *entry.label)
                                                    : std::string("no label")));
            }
            set.labels.push_back(static_cast<std::int32_t>(*entry.label));
        }
        if (!with_pixels) {
            break; // the header only needs the first image
        }
    }
    return set;
}

/// A source that is a pack of images, or a directory inside one: the pack and the prefix.
std::optional<std::pair<std::filesystem::path, std::string>>
image_pack_source(const std::filesystem::path& source) {
    if (Pack::is_pack(source)) {
        return std::make_pair(source, std::string());
    }
    if (auto member = find_pack_member(source)) {
        const Pack pack(member->pack);
        if (pack.find(member->member) == nullptr) {
            return std::make_pair(member->pack, member->member);
        }
    }
    return std::nullopt;
}

// label_source for an image pack: the pack itself, its index.tsv, or the source again.
bool labels_from_index(const std::filesystem::path& source, const std::filesystem::path& labels,
                       const std::filesystem::path& pack) {
    return !labels.empty() && (labels == source || labels == pack / "index.tsv" || labels == pack);
}

} // namespace

IdxDataset read_idx_header(const std::filesystem::path& images, const DataBudget& budget) {
    if (is_cifar_source(images)) {
        return read_cifar_header(images);
    }
    if (is_lmdb_source(images)) {
        return read_lmdb_header(images);
    }
    if (is_leveldb_source(images)) {
        return read_leveldb_header(images);
    }
    if (auto pack_source = image_pack_source(images)) {
        const Pack pack(pack_source->first);
        return load_pack_images(pack, pack_source->second, false, false, budget);
    }
    if (auto member = find_pack_member(images)) {
        return images_from_member(*member, false, budget);
    }
    const GzFile file = open_file(images);
    return header_of(file.get(), images);
}

namespace {

// CIFAR files, LMDBs and LevelDBs hold each label in its record: label_source, when given, names
// the same path.
void require_labels_in_records(const std::filesystem::path& images,
                               const std::filesystem::path& labels, const char* what) {
    if (!labels.empty() && labels != images) {
        throw Error(ErrorKind::config,
                    fmt::format("{} is {}, whose labels are in its records: set label_source to "
                                "the same path as source (not {})",
                                images.string(), what, labels.string()));
    }
}

// An IDX set's labels (a file, or a member of a pack), one per image; a set of no images is
// refused.
void attach_labels(IdxDataset& set, const std::filesystem::path& images,
                   const std::filesystem::path& labels, const DataBudget& budget) {
    if (!labels.empty()) {
        std::vector<std::uint8_t> values;
        if (auto label_member = find_pack_member(labels)) {
            values = labels_from_member(*label_member, budget);
        } else {
            values = load_idx_labels(labels, budget);
        }
        if (values.size() != set.count) {
            throw Error(ErrorKind::config,
                        fmt::format("label file {} has {} labels but {} has {} images",
                                    labels.string(), values.size(), images.string(), set.count));
        }
        set.labels.assign(values.begin(), values.end());
    }
    if (set.count == 0) {
        throw Error(ErrorKind::config, fmt::format("data file {} has no images", images.string()));
    }
}

} // namespace

IdxDataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                    const DataBudget& budget) {
    if (is_cifar_source(images)) {
        require_labels_in_records(images, labels, "CIFAR-10 binary data");
        return load_cifar(images, !labels.empty());
    }
    if (is_lmdb_source(images)) {
        require_labels_in_records(images, labels, "an LMDB of Datums");
        return load_lmdb(images, !labels.empty(), budget);
    }
    if (is_leveldb_source(images)) {
        require_labels_in_records(images, labels, "a LevelDB of Datums");
        return load_leveldb(images, !labels.empty(), budget);
    }
    if (auto pack_source = image_pack_source(images)) {
        const Pack pack(pack_source->first);
        const bool with_labels = !labels.empty();
        if (with_labels && !labels_from_index(images, labels, pack_source->first)) {
            throw Error(ErrorKind::config,
                        fmt::format("{} is a pack of images whose labels are in its index: set "
                                    "label_source to the same path as source (not {})",
                                    images.string(), labels.string()));
        }
        return load_pack_images(pack, pack_source->second, with_labels, true, budget);
    }
    IdxDataset set;
    if (auto member = find_pack_member(images)) {
        set = images_from_member(*member, true, budget);
    } else {
        const GzFile file = open_file(images);
        set = header_of(file.get(), images);
        budget.check(static_cast<std::uint64_t>(set.count) * set.image_size(),
                     fmt::format("data file {} ({} images of {}x{}x{})", images.string(), set.count,
                                 set.channels, set.height, set.width));
        set.pixels = read_claimed(file.get(), set.count * set.image_size(), images);
    }
    attach_labels(set, images, labels, budget);
    return set;
}

void check_backend(const std::filesystem::path& source, const std::string& backend) {
    if (backend.empty()) {
        return;
    }
    const std::string says = backend == "leveldb"
                                 ? "the Data layer's backend is LEVELDB (Caffe's default where "
                                   "data_param names none)"
                                 : "the Data layer's backend is LMDB";
    std::string is;
    if (backend == "leveldb" && is_lmdb_source(source)) {
        is = "an LMDB (it holds data.mdb): say backend: LMDB";
    } else if (backend == "lmdb" && is_leveldb_source(source)) {
        is = "a LevelDB (it holds CURRENT): say backend: LEVELDB";
    } else if (!is_lmdb_source(source) && !is_leveldb_source(source)) {
        std::error_code error;
        is = std::filesystem::exists(source, error)
                 ? "not a database (a directory holding data.mdb or CURRENT)"
                 : "not there";
    } else {
        return;
    }
    throw Error(ErrorKind::config, fmt::format("{} but {} is {}", says, source.string(), is));
}

} // namespace dl::data
