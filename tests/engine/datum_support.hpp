#pragma once
// Caffe's Datum records, written field by field in protobuf's wire format, and the LMDBs
// convert_imageset writes of them: what the reader tests and the hostile-input corpus build
// their databases from, with no Caffe or protobuf compiler at hand.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <lmdb.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace dl_test {

inline void put_varint(std::string& out, std::uint64_t value) {
    while (value >= 0x80U) {
        out.push_back(static_cast<char>((value & 0x7FU) | 0x80U));
        value >>= 7U;
    }
    out.push_back(static_cast<char>(value));
}

inline void put_field(std::string& out, int field, std::uint64_t value) {
    put_varint(out, static_cast<std::uint64_t>(field) << 3U);
    put_varint(out, value);
}

inline void put_bytes(std::string& out, int field, const std::string& bytes) {
    put_varint(out, (static_cast<std::uint64_t>(field) << 3U) | 2U);
    put_varint(out, bytes.size());
    out += bytes;
}

/// A Datum as caffe_pb2 serialises it, fields by number: channels 1, height 2, width 3, data 4,
/// label 5, encoded 7 (an encoded Datum's data is the image file, and it has no shape).
inline std::string datum(int channels, int height, int width, const std::string& data, int label,
                         bool encoded = false) {
    std::string out;
    if (!encoded) {
        put_field(out, 1, static_cast<std::uint64_t>(channels));
        put_field(out, 2, static_cast<std::uint64_t>(height));
        put_field(out, 3, static_cast<std::uint64_t>(width));
    }
    put_bytes(out, 4, data);
    put_field(out, 5, static_cast<std::uint64_t>(static_cast<std::int64_t>(label)));
    if (encoded) {
        put_field(out, 7, 1);
    }
    return out;
}

/// `count` bytes of a pattern that differs with `seed`.
inline std::string pixels(std::size_t count, int seed) {
    std::string out;
    for (std::size_t i = 0; i < count; ++i) {
        out.push_back(static_cast<char>((i * 31 + static_cast<std::size_t>(seed) * 7) % 256));
    }
    return out;
}

/// convert_imageset's keys: "%08d_" and the image's file name.
inline std::string datum_key(std::size_t index) {
    return fmt::format("{:08}_img", index);
}

/// Caffe's LMDB writer: `values` in one transaction, record i under key(i).
inline void write_lmdb(const std::filesystem::path& dir, const std::vector<std::string>& values,
                       const std::function<std::string(std::size_t)>& key = datum_key) {
    std::filesystem::create_directories(dir);
    MDB_env* env = nullptr;
    ASSERT_EQ(mdb_env_create(&env), 0);
    ASSERT_EQ(mdb_env_set_mapsize(env, std::size_t{1} << 24), 0);
    ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0664), 0);
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    MDB_dbi dbi = 0;
    ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::string name = key(i);
        std::string value = values[i];
        MDB_val k{name.size(), name.data()};
        MDB_val v{value.size(), value.data()};
        ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
    }
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

} // namespace dl_test
