#include "data/cifar_dataset.hpp"

#include "io/regular_file.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <fnmatch.h>

#include <algorithm>

namespace dl::data {
namespace {

// Far above CIFAR-10's 30 MB batches; a bound on what one file may make us allocate.
constexpr std::uint64_t k_max_batch_bytes = std::uint64_t{4} << 30;

bool has_glob(const std::string& name) {
    return name.find_first_of("*?[") != std::string::npos;
}

/// Records in the file, from its size; a config error unless a positive multiple of 3073.
std::size_t record_count(const std::filesystem::path& file, std::uint64_t size) {
    if (size == 0 || size % k_cifar_record != 0) {
        throw Error(ErrorKind::config,
                    fmt::format("data file {} is {} bytes, not a whole number of CIFAR-10 records "
                                "of {} bytes (1 label + 3 x 32 x 32 pixels): {} bytes left over "
                                "(truncated, or not CIFAR-10; CIFAR-100 has 2 label bytes)",
                                file.string(), size, k_cifar_record, size % k_cifar_record));
    }
    return static_cast<std::size_t>(size / k_cifar_record);
}

IdxDataset empty_set() {
    IdxDataset set;
    set.channels = 3;
    set.height = k_cifar_side;
    set.width = k_cifar_side;
    return set;
}

} // namespace

bool is_cifar_source(const std::filesystem::path& source) {
    return source.extension() == ".bin";
}

std::vector<std::filesystem::path> cifar_files(const std::filesystem::path& source) {
    const std::string pattern = source.filename().string();
    if (!has_glob(pattern)) {
        return {source};
    }
    const std::filesystem::path dir = source.parent_path().empty() ? "." : source.parent_path();
    std::vector<std::filesystem::path> files;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
        if (::fnmatch(pattern.c_str(), entry.path().filename().c_str(), 0) == 0) {
            files.push_back(entry.path());
        }
    }
    if (files.empty()) {
        throw Error(ErrorKind::config,
                    fmt::format("no data file matches {}{}", source.string(),
                                error ? fmt::format(" ({}: {})", dir.string(), error.message())
                                      : std::string()));
    }
    std::sort(files.begin(), files.end());
    return files;
}

IdxDataset read_cifar_header(const std::filesystem::path& source) {
    IdxDataset set = empty_set();
    for (const auto& file : cifar_files(source)) {
        const io::RegularFile regular(file, "data file");
        set.count += record_count(file, regular.size());
    }
    return set;
}

IdxDataset load_cifar(const std::filesystem::path& source, bool with_labels) {
    IdxDataset set = empty_set();
    for (const auto& file : cifar_files(source)) {
        const io::RegularFile regular(file, "data file");
        const std::size_t records = record_count(file, regular.size());
        const std::vector<char> bytes = regular.read_all(k_max_batch_bytes);
        if (bytes.size() != records * k_cifar_record) {
            throw Error(ErrorKind::config,
                        fmt::format("data file {} changed size while it was read ({} bytes, then "
                                    "{})",
                                    file.string(), regular.size(), bytes.size()));
        }
        set.pixels.reserve(set.pixels.size() + records * k_cifar_image);
        for (std::size_t r = 0; r < records; ++r) {
            const char* record = bytes.data() + r * k_cifar_record;
            const auto label = static_cast<std::uint8_t>(record[0]);
            if (label > 9) {
                throw Error(ErrorKind::config,
                            fmt::format("data file {}: record {} (byte offset {}) has label {}; "
                                        "CIFAR-10 labels are 0 to 9",
                                        file.string(), r, r * k_cifar_record, label));
            }
            if (with_labels) {
                set.labels.push_back(label);
            }
            set.pixels.insert(set.pixels.end(), record + 1, record + k_cifar_record);
        }
        set.count += records;
    }
    return set;
}

} // namespace dl::data
