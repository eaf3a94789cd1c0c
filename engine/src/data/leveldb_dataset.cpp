#include "data/leveldb_dataset.hpp"

#include "data/datum_dataset.hpp"

#include <dl/error.hpp>
#include <dl/train.hpp>

#include <fmt/format.h>

#if DLJOB_HAVE_LEVELDB
#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/status.h>

#include <chrono>
#include <memory>
#include <thread>
#endif

namespace dl::data {
namespace {

[[noreturn]] void fail(const std::string& message) {
    throw Error(ErrorKind::config, message);
}

#if DLJOB_HAVE_LEVELDB

// LevelDB's own words when another opener holds the database: "lock <dir>/LOCK: ...".
bool is_held(const std::filesystem::path& source, const leveldb::Status& status) {
    return status.IsIOError() &&
           status.ToString().find("lock " + source.string() + "/LOCK") != std::string::npos;
}

[[noreturn]] void leveldb_fail(const std::filesystem::path& source, const char* call,
                               const leveldb::Status& status) {
    std::string hint;
    if (is_held(source, status)) {
        hint = " (another process held it for over a minute: LevelDB lets one process at a time "
               "open a database)";
    } else if (status.IsIOError()) {
        hint = " (LevelDB writes its LOCK and LOG files into the database's directory even to "
               "read it: give a writable copy, or an LMDB)";
    }
    fail(
        fmt::format("LevelDB {}: {} failed: {}{}", source.string(), call, status.ToString(), hint));
}

/// Opened as Caffe opens it for reading. LevelDB allows one process at a time: the ranks of a
/// data-parallel run that read one database take turns (each holds it only while loading).
std::unique_ptr<leveldb::DB> open(const std::filesystem::path& source) {
    leveldb::Options options;
    options.create_if_missing = false;
    options.max_open_files = 100;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (true) {
        leveldb::DB* db = nullptr;
        const leveldb::Status status = leveldb::DB::Open(options, source.string(), &db);
        if (status.ok()) {
            return std::unique_ptr<leveldb::DB>(db);
        }
        if (!is_held(source, status) || std::chrono::steady_clock::now() > deadline ||
            stop_requested()) {
            leveldb_fail(source, "open", status);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

IdxDataset read(const std::filesystem::path& source, bool with_labels, bool first_only) {
    const std::unique_ptr<leveldb::DB> db = open(source);
    leveldb::ReadOptions options;
    options.fill_cache = false; // read once, in order: caching blocks only costs memory
    const std::unique_ptr<leveldb::Iterator> it(db->NewIterator(options));
    DatumSet set("LevelDB " + source.string(), with_labels, first_only);
    std::size_t index = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++index) {
        if (index % 1024 == 0 && stop_requested()) {
            throw Error(ErrorKind::stopped,
                        fmt::format("stopped by a signal while reading {}, before the first "
                                    "step; resume with --resume auto",
                                    source.string()));
        }
        if (!first_only || index == 0) {
            const leveldb::Slice key = it->key();
            const leveldb::Slice value = it->value();
            set.add(index, {key.data(), key.size()}, {value.data(), value.size()});
        }
    }
    if (!it->status().ok()) {
        leveldb_fail(source, "reading", it->status());
    }
    return set.finish(index);
}

#else

[[noreturn]] IdxDataset read(const std::filesystem::path& source, bool /*with_labels*/,
                             bool /*first_only*/) {
    fail(fmt::format("{} is a LevelDB, and this dltrain was built without LevelDB: install "
                     "libleveldb-dev and rebuild (scripts/setup.sh; CMake finds it), or give the "
                     "data as an LMDB (Caffe's convert_imageset -backend lmdb)",
                     source.string()));
}

#endif

} // namespace

bool leveldb_available() {
    return DLJOB_HAVE_LEVELDB != 0;
}

bool is_leveldb_source(const std::filesystem::path& source) {
    std::error_code error;
    return std::filesystem::is_directory(source, error) &&
           std::filesystem::is_regular_file(source / "CURRENT", error) &&
           !std::filesystem::exists(source / "data.mdb", error);
}

IdxDataset load_leveldb(const std::filesystem::path& source, bool with_labels) {
    return read(source, with_labels, false);
}

IdxDataset read_leveldb_header(const std::filesystem::path& source) {
    return read(source, false, true);
}

} // namespace dl::data
