#include <dljob/adapters/leveldb_database.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#if DLJOB_HAVE_LEVELDB
#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/status.h>

#include <chrono>
#include <memory>
#include <thread>
#endif

namespace dljob::adapters {

bool is_leveldb_directory(const std::string& directory) {
    struct stat st {};
    return stat((directory + "/CURRENT").c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           stat((directory + "/data.mdb").c_str(), &st) != 0;
}

#if DLJOB_HAVE_LEVELDB

namespace {

Unexpected leveldb_failure(const std::string& directory, const char* call,
                           const leveldb::Status& status) {
    return fail(ErrorCode::config_invalid,
                fmt::format("LevelDB {}: {} failed: {}", directory, call, status.ToString()),
                status.IsIOError() ? "LevelDB writes its LOCK and LOG files into the database's "
                                     "directory even to read it: give a writable copy"
                                   : "give a directory made by LevelDB (Caffe's convert_imageset "
                                     "-backend leveldb writes one)");
}

} // namespace

Result<void>
for_each_leveldb_record(const std::string& directory,
                        const std::function<Result<void>(std::uint64_t index, std::string_view key,
                                                         std::string_view value)>& visit) {
    leveldb::Options options;
    options.create_if_missing = false;
    options.max_open_files = 100;
    // One process at a time may open a LevelDB: wait a while for one that holds it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    leveldb::DB* raw = nullptr;
    leveldb::Status status = leveldb::DB::Open(options, directory, &raw);
    // LevelDB's own words when another opener holds it: "lock <dir>/LOCK: ...".
    const std::string held = "lock " + directory + "/LOCK";
    while (!status.ok() && status.IsIOError() &&
           status.ToString().find(held) != std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        status = leveldb::DB::Open(options, directory, &raw);
    }
    if (!status.ok()) {
        return leveldb_failure(directory, "open", status);
    }
    const std::unique_ptr<leveldb::DB> db(raw);
    leveldb::ReadOptions read;
    read.fill_cache = false;
    const std::unique_ptr<leveldb::Iterator> it(db->NewIterator(read));
    std::uint64_t index = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++index) {
        const leveldb::Slice key = it->key();
        const leveldb::Slice value = it->value();
        DLJOB_TRY(visit(index, {key.data(), key.size()}, {value.data(), value.size()}));
    }
    if (!it->status().ok()) {
        return leveldb_failure(directory, "reading", it->status());
    }
    return {};
}

#else

Result<void> for_each_leveldb_record(
    const std::string& directory,
    const std::function<Result<void>(std::uint64_t, std::string_view, std::string_view)>&) {
    return fail(ErrorCode::config_invalid,
                fmt::format("{} is a LevelDB, and this dljob was built without LevelDB", directory),
                "install libleveldb-dev and rebuild (scripts/setup.sh; CMake finds it), or pack "
                "an LMDB of the data (Caffe's convert_imageset -backend lmdb)");
}

#endif

} // namespace dljob::adapters
