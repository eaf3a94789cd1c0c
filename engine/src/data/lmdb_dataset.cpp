#include "data/lmdb_dataset.hpp"

#include "data/image_decode.hpp"
#include "data/protobuf_wire.hpp"

#include <dl/error.hpp>
#include <dl/train.hpp>

#include <fmt/format.h>

#include <lmdb.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>

namespace dl::data {
namespace {

[[noreturn]] void fail(const std::string& message) {
    throw Error(ErrorKind::config, message);
}

int dimension(std::uint64_t value, const char* name, const std::string& what) {
    if (value > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
        fail(fmt::format("{}: Datum {} {} is out of range", what, name, value));
    }
    return static_cast<int>(value);
}

// --- LMDB -----------------------------------------------------------------------------------

[[noreturn]] void lmdb_fail(const std::filesystem::path& source, const char* call, int rc) {
    fail(fmt::format("LMDB {}: {} failed: {}", source.string(), call, mdb_strerror(rc)));
}

// A read-only environment, transaction and cursor, closed in reverse order.
class LmdbReader {
public:
    explicit LmdbReader(const std::filesystem::path& source) : m_source(source) {
        check("mdb_env_create", mdb_env_create(&m_env));
        // Caffe's flags; a read-only file system cannot take the lock file, so retry without it
        // (safe as long as nothing writes the database meanwhile, as for Caffe).
        int rc = mdb_env_open(m_env, source.c_str(), MDB_RDONLY | MDB_NOTLS, 0664);
        if (rc == EACCES || rc == EROFS) {
            rc = mdb_env_open(m_env, source.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0664);
        }
        check("mdb_env_open", rc);
        check("mdb_txn_begin", mdb_txn_begin(m_env, nullptr, MDB_RDONLY, &m_txn));
        check("mdb_dbi_open", mdb_dbi_open(m_txn, nullptr, 0, &m_dbi));
        check("mdb_cursor_open", mdb_cursor_open(m_txn, m_dbi, &m_cursor));
    }
    ~LmdbReader() {
        if (m_cursor != nullptr) {
            mdb_cursor_close(m_cursor);
        }
        if (m_txn != nullptr) {
            mdb_txn_abort(m_txn);
        }
        if (m_env != nullptr) {
            mdb_env_close(m_env);
        }
    }
    LmdbReader(const LmdbReader&) = delete;
    LmdbReader& operator=(const LmdbReader&) = delete;
    LmdbReader(LmdbReader&&) = delete;
    LmdbReader& operator=(LmdbReader&&) = delete;

    [[nodiscard]] std::size_t entries() {
        MDB_stat stat{};
        check("mdb_stat", mdb_stat(m_txn, m_dbi, &stat));
        return stat.ms_entries;
    }

    /// Calls visit(index, key, value) for each record in key order, or for the first only.
    void each(const std::function<void(std::size_t, const MDB_val&, const MDB_val&)>& visit,
              bool first_only) {
        MDB_val key{};
        MDB_val value{};
        int rc = mdb_cursor_get(m_cursor, &key, &value, MDB_FIRST);
        for (std::size_t index = 0; rc == 0; ++index) {
            if (index % 1024 == 0 && stop_requested()) {
                throw Error(ErrorKind::stopped,
                            fmt::format("stopped by a signal while reading {}, before the first "
                                        "step; resume with --resume auto",
                                        m_source.string()));
            }
            visit(index, key, value);
            if (first_only) {
                return;
            }
            rc = mdb_cursor_get(m_cursor, &key, &value, MDB_NEXT);
        }
        if (rc != MDB_NOTFOUND) {
            check("mdb_cursor_get", rc);
        }
    }

private:
    void check(const char* call, int rc) const {
        if (rc != 0) {
            lmdb_fail(m_source, call, rc);
        }
    }
    std::filesystem::path m_source;
    MDB_env* m_env = nullptr;
    MDB_txn* m_txn = nullptr;
    MDB_dbi m_dbi = 0;
    MDB_cursor* m_cursor = nullptr;
};

std::string key_text(const MDB_val& key) {
    std::string text(static_cast<const char*>(key.mv_data), std::min<std::size_t>(key.mv_size, 64));
    for (char& c : text) {
        if (c < 0x20 || c > 0x7E) {
            c = '?';
        }
    }
    return text;
}

/// The pixels of one record (decoded when encoded), checked.
DecodedImage pixels_of(const Datum& datum, const std::string& what) {
    if (datum.has_float_data && datum.data.empty()) {
        fail(fmt::format("{}: a float_data Datum; only uint8 data (raw or encoded) is read", what));
    }
    if (datum.encoded) {
        return decode_image(datum.data, 0, what);
    }
    DecodedImage image;
    image.channels = datum.channels;
    image.height = datum.height;
    image.width = datum.width;
    const std::uint64_t expected =
        static_cast<std::uint64_t>(datum.channels) * datum.height * datum.width;
    if (expected == 0 || datum.data.size() != expected) {
        fail(fmt::format("{}: {} bytes of data for its shape {}x{}x{} ({} expected)", what,
                         datum.data.size(), datum.channels, datum.height, datum.width, expected));
    }
    image.pixels = datum.data;
    return image;
}

IdxDataset read(const std::filesystem::path& source, bool with_labels, bool first_only) {
    LmdbReader reader(source);
    IdxDataset set;
    set.count = reader.entries();
    if (set.count == 0) {
        fail(fmt::format("LMDB {} has no records", source.string()));
    }
    if (!first_only) {
        // Not sized from the count: a damaged database's claim is not trusted with memory.
        set.labels.reserve(with_labels ? std::min<std::size_t>(set.count, 1U << 20) : 0);
    }
    std::size_t seen = 0;
    reader.each(
        [&](std::size_t index, const MDB_val& key, const MDB_val& value) {
            const std::string what =
                fmt::format("LMDB {}: record {} (key '{}')", source.string(), index, key_text(key));
            const Datum datum =
                parse_datum(static_cast<const std::uint8_t*>(value.mv_data), value.mv_size, what);
            DecodedImage image = pixels_of(datum, what);
            if (index == 0) {
                set.channels = image.channels;
                set.height = image.height;
                set.width = image.width;
            } else if (image.channels != set.channels || image.height != set.height ||
                       image.width != set.width) {
                fail(fmt::format("{}: {}x{}x{} but the first record is {}x{}x{}", what,
                                 image.channels, image.height, image.width, set.channels,
                                 set.height, set.width));
            }
            if (with_labels) {
                if (datum.label < 0 || datum.label > 255) {
                    fail(fmt::format("{}: label {} (labels 0 to 255 are read)", what, datum.label));
                }
                set.labels.push_back(static_cast<std::uint8_t>(datum.label));
            }
            if (!first_only) {
                set.pixels.insert(set.pixels.end(), image.pixels.begin(), image.pixels.end());
            }
            ++seen;
        },
        first_only);
    if (!first_only) {
        set.count = seen;
    }
    return set;
}

} // namespace

Datum parse_datum(const std::uint8_t* bytes, std::size_t size, const std::string& what) {
    Datum datum;
    WireReader in(bytes, size, what, "Datum");
    while (!in.done()) {
        const std::uint64_t tag = in.varint();
        const auto field = static_cast<std::uint32_t>(tag >> 3U);
        const auto wire = static_cast<std::uint32_t>(tag & 7U);
        if (field >= 1 && field <= 3 && wire == 0) {
            const int value = dimension(in.varint(),
                                        field == 1   ? "channels"
                                        : field == 2 ? "height"
                                                     : "width",
                                        what);
            (field == 1 ? datum.channels : field == 2 ? datum.height : datum.width) = value;
        } else if (field == 4 && wire == 2) {
            const auto [start, length] = in.bytes();
            datum.data.assign(start, start + length);
        } else if (field == 5 && wire == 0) {
            // int32 in a varint: negative values are sign-extended to 64 bits.
            datum.label = static_cast<std::int64_t>(in.varint());
        } else if (field == 6) {
            datum.has_float_data = true;
            in.skip(wire, field);
        } else if (field == 7 && wire == 0) {
            datum.encoded = in.varint() != 0;
        } else if (field >= 1 && field <= 7) {
            in.malformed(fmt::format("field {} has wire type {} at byte {}", field, wire, in.at()));
        } else {
            in.skip(wire, field);
        }
    }
    return datum;
}

bool is_lmdb_source(const std::filesystem::path& source) {
    std::error_code error;
    return std::filesystem::is_directory(source, error) &&
           std::filesystem::exists(source / "data.mdb", error);
}

IdxDataset load_lmdb(const std::filesystem::path& source, bool with_labels) {
    return read(source, with_labels, false);
}

IdxDataset read_lmdb_header(const std::filesystem::path& source) {
    return read(source, false, true);
}

} // namespace dl::data
