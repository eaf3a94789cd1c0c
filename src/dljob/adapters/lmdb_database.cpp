#include <dljob/adapters/lmdb_database.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <lmdb.h>

#include <cerrno>

namespace dljob::adapters {
namespace {

Unexpected lmdb_failure(const std::string& directory, const char* call, int rc) {
    return fail(ErrorCode::config_invalid,
                fmt::format("LMDB {}: {} failed: {}", directory, call, mdb_strerror(rc)),
                "give a directory made by LMDB (Caffe's convert_imageset writes one)");
}

// Environment, transaction and cursor, closed in reverse order whatever happens.
struct Handles {
    MDB_env* env = nullptr;
    MDB_txn* txn = nullptr;
    MDB_cursor* cursor = nullptr;
    Handles() = default;
    Handles(const Handles&) = delete;
    Handles& operator=(const Handles&) = delete;
    Handles(Handles&&) = delete;
    Handles& operator=(Handles&&) = delete;
    ~Handles() {
        if (cursor != nullptr) {
            mdb_cursor_close(cursor);
        }
        if (txn != nullptr) {
            mdb_txn_abort(txn);
        }
        if (env != nullptr) {
            mdb_env_close(env);
        }
    }
};

} // namespace

bool is_lmdb_directory(const std::string& directory) {
    struct stat st {};
    return stat((directory + "/data.mdb").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<void>
for_each_lmdb_record(const std::string& directory,
                     const std::function<Result<void>(std::uint64_t index, std::string_view key,
                                                      std::string_view value)>& visit) {
    Handles h;
    int rc = mdb_env_create(&h.env);
    if (rc != 0) {
        return lmdb_failure(directory, "mdb_env_create", rc);
    }
    rc = mdb_env_open(h.env, directory.c_str(), MDB_RDONLY | MDB_NOTLS, 0664);
    if (rc == EACCES || rc == EROFS) {
        rc = mdb_env_open(h.env, directory.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NOLOCK, 0664);
    }
    if (rc != 0) {
        return lmdb_failure(directory, "mdb_env_open", rc);
    }
    if (rc = mdb_txn_begin(h.env, nullptr, MDB_RDONLY, &h.txn); rc != 0) {
        return lmdb_failure(directory, "mdb_txn_begin", rc);
    }
    MDB_dbi dbi = 0;
    if (rc = mdb_dbi_open(h.txn, nullptr, 0, &dbi); rc != 0) {
        return lmdb_failure(directory, "mdb_dbi_open", rc);
    }
    if (rc = mdb_cursor_open(h.txn, dbi, &h.cursor); rc != 0) {
        return lmdb_failure(directory, "mdb_cursor_open", rc);
    }
    MDB_val key{};
    MDB_val value{};
    std::uint64_t index = 0;
    for (rc = mdb_cursor_get(h.cursor, &key, &value, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(h.cursor, &key, &value, MDB_NEXT), ++index) {
        DLJOB_TRY(visit(index, {static_cast<const char*>(key.mv_data), key.mv_size},
                        {static_cast<const char*>(value.mv_data), value.mv_size}));
    }
    if (rc != MDB_NOTFOUND) {
        return lmdb_failure(directory, "mdb_cursor_get", rc);
    }
    return {};
}

} // namespace dljob::adapters
