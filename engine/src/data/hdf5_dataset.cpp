// Caffe's HDF5Data files through libhdf5's C API (H5Fopen, H5Dread). The library parses the
// files; what is read from them is bounded here: every dataset's dimensions are checked
// against the budget before its values are read, and the list itself is a regular file of
// bounded size.

#include "data/hdf5_dataset.hpp"

#include "data/text_lines.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#if DLJOB_HAVE_HDF5
#include <hdf5.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace dl::data {
namespace {

// A list of 100,000 files of 80-character paths is 8 MB.
constexpr std::uint64_t k_max_list_bytes = std::uint64_t{16} << 20;
// A dataset of more dimensions than N x C x H x W is none Caffe's HDF5Data reads.
constexpr int k_max_rank = 4;

std::vector<TextLine> read_list(const std::filesystem::path& list) {
    std::vector<TextLine> lines = read_text_lines(list, "HDF5 list", k_max_list_bytes);
    if (lines.empty()) {
        throw Error(ErrorKind::config,
                    fmt::format("HDF5 list {} names no file (one .h5 path per line, as Caffe's "
                                "HDF5Data reads it)",
                                list.string()));
    }
    return lines;
}

#if DLJOB_HAVE_HDF5

// Closes an HDF5 handle when it goes out of scope.
class Handle {
public:
    Handle(hid_t id, herr_t (*close)(hid_t)) : m_id(id), m_close(close) {}
    ~Handle() {
        if (m_id >= 0) {
            m_close(m_id);
        }
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&&) = delete;
    Handle& operator=(Handle&&) = delete;
    [[nodiscard]] hid_t id() const { return m_id; }

private:
    hid_t m_id;
    herr_t (*m_close)(hid_t);
};

// One dataset of an open file: its dimensions, then (on request) its values as float or double.
class Dataset {
public:
    Dataset(hid_t file, const std::string& name, const std::string& where)
        : m_where(fmt::format("{}: dataset '{}'", where, name)),
          m_set(H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0
                    ? H5Dopen2(file, name.c_str(), H5P_DEFAULT)
                    : -1,
                H5Dclose),
          m_space(m_set.id() >= 0 ? H5Dget_space(m_set.id()) : -1, H5Sclose) {
        if (m_set.id() < 0) {
            fail("is not in the file (the layer's tops name the datasets it reads)");
        }
        const int rank = m_space.id() >= 0 ? H5Sget_simple_extent_ndims(m_space.id()) : -1;
        if (rank < 1 || rank > k_max_rank) {
            fail(fmt::format("has {} dimensions (1 to {} are read)", rank, k_max_rank));
        }
        std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
        H5Sget_simple_extent_dims(m_space.id(), dims.data(), nullptr);
        for (const hsize_t dim : dims) {
            if (dim > static_cast<hsize_t>(std::numeric_limits<std::int32_t>::max())) {
                fail(fmt::format("has a dimension of {} (at most 2^31 - 1)", dim));
            }
            m_dims.push_back(static_cast<std::int64_t>(dim));
        }
        const Handle type(H5Dget_type(m_set.id()), H5Tclose);
        const H5T_class_t kind = H5Tget_class(type.id());
        if (kind != H5T_FLOAT && kind != H5T_INTEGER) {
            fail("holds neither numbers nor integers");
        }
    }

    [[nodiscard]] const std::vector<std::int64_t>& dims() const { return m_dims; }
    // The values converted by libhdf5 into `out` (count() of them).
    template <typename T> void read(T* out) const {
        const hid_t memory = std::is_same_v<T, float> ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
        if (H5Dread(m_set.id(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
            fail("could not be read");
        }
    }

    [[noreturn]] void fail(const std::string& message) const {
        throw Error(ErrorKind::config, fmt::format("{} {}", m_where, message));
    }

private:
    std::string m_where;
    Handle m_set;
    Handle m_space;
    std::vector<std::int64_t> m_dims;
};

// The file of one list line, opened read-only; a file that is not a regular one is refused
// before libhdf5 opens it (a FIFO would block).
hid_t open_file(const std::filesystem::path& file, const std::string& where) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
        throw Error(
            ErrorKind::config,
            fmt::format("{}: {}", where,
                        std::filesystem::exists(file, ec) ? "not a regular file" : "no such file"));
    }
    const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0) {
        throw Error(ErrorKind::config, fmt::format("{}: not an HDF5 file libhdf5 opens", where));
    }
    return id;
}

// Reads (or, with `values` false, only measures) every file of the list into one set.
IdxDataset read_files(const std::filesystem::path& list, const Hdf5Options& options,
                      const DataBudget& budget, bool values) {
    // libhdf5 prints its error stack to stderr by default; its failures are reported here.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    IdxDataset set;
    std::vector<std::int64_t> item; // one item's dims (the first file's)
    bool first_file = true;
    for (const TextLine& line : read_list(list)) {
        const std::filesystem::path file = options.file_path(line.text);
        const std::string where =
            fmt::format("HDF5 list {} line {}: {}", list.string(), line.number, file.string());
        const Handle opened(open_file(file, where), H5Fclose);
        const Dataset data(opened.id(), options.data_name, where);
        const std::vector<std::int64_t> dims(data.dims().begin() + 1, data.dims().end());
        if (first_file) {
            first_file = false;
            item = dims;
            set.channels = dims.empty() ? 1 : static_cast<int>(dims[0]);
            set.height = dims.size() > 1 ? static_cast<int>(dims[1]) : 1;
            set.width = dims.size() > 2 ? static_cast<int>(dims[2]) : 1;
        } else if (dims != item) {
            data.fail("has items of another shape than the first file's");
        }
        const auto rows = static_cast<std::size_t>(data.dims()[0]);
        // Each dimension is below 2^31; their product is checked, not assumed to fit.
        std::uint64_t total = set.count + rows;
        for (const std::int64_t dim : item) {
            if (__builtin_mul_overflow(total, static_cast<std::uint64_t>(dim), &total)) {
                total = std::numeric_limits<std::uint64_t>::max() / sizeof(float);
                break;
            }
        }
        budget.check(std::min(total, std::numeric_limits<std::uint64_t>::max() / sizeof(float)) *
                         sizeof(float),
                     where);
        std::vector<double> labels;
        if (!options.label_name.empty()) {
            const Dataset label(opened.id(), options.label_name, where);
            const bool one_per_row =
                label.dims().size() == 1 || (label.dims().size() == 2 && label.dims()[1] == 1);
            if (!one_per_row || label.dims()[0] != data.dims()[0]) {
                label.fail(fmt::format("is not one label per item of '{}' ({} items)",
                                       options.data_name, data.dims()[0]));
            }
            if (values) {
                labels.resize(rows);
                label.read(labels.data());
            }
        }
        if (values) {
            const std::size_t first = set.float_pixels.size();
            set.float_pixels.resize(first + rows * set.image_size());
            data.read(set.float_pixels.data() + first);
            for (std::size_t i = 0; i < labels.size(); ++i) {
                const double value = labels[i];
                if (!(value >= 0.0 && value <= std::numeric_limits<std::int32_t>::max()) ||
                    std::floor(value) != value) {
                    throw Error(ErrorKind::config,
                                fmt::format("{}: dataset '{}' item {}: label {} is not a class "
                                            "(a whole number from 0 to 2^31 - 1)",
                                            where, options.label_name, i, value));
                }
                set.labels.push_back(static_cast<std::int32_t>(value));
            }
        }
        set.count += rows;
    }
    return set;
}

#endif

} // namespace

bool hdf5_available() {
    return DLJOB_HAVE_HDF5 != 0;
}

IdxDataset load_hdf5_list(const std::filesystem::path& list, const Hdf5Options& options,
                          const DataBudget& budget) {
#if DLJOB_HAVE_HDF5
    return read_files(list, options, budget, true);
#else
    (void)read_list(list);
    (void)options;
    (void)budget;
    throw Error(ErrorKind::config,
                fmt::format("HDF5 list {}: this dltrain was built without libhdf5 "
                            "(DLJOB_HDF5=OFF): build it with Debian's libhdf5-dev, or convert "
                            "the data to an LMDB",
                            list.string()));
#endif
}

IdxDataset read_hdf5_list_header(const std::filesystem::path& list, const Hdf5Options& options) {
#if DLJOB_HAVE_HDF5
    return read_files(list, options, DataBudget{}, false);
#else
    return load_hdf5_list(list, options);
#endif
}

} // namespace dl::data
