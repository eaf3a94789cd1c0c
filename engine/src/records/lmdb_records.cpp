// Caffe's LMDBs, record by record (dl/records.hpp). The only file that sees <lmdb.h>.
#include <dl/error.hpp>
#include <dl/records.hpp>

#include <fmt/format.h>

#include <lmdb.h>

#include <cerrno>

namespace dl {
namespace {

[[noreturn]] void lmdb_fail(const std::filesystem::path& source, const char* call, int rc) {
    fail_config(fmt::format("LMDB {}: {} failed: {}", source.string(), call, mdb_strerror(rc)));
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

    std::size_t each(const RecordVisitor& visit) {
        MDB_val key{};
        MDB_val value{};
        std::size_t index = 0;
        int rc = mdb_cursor_get(m_cursor, &key, &value, MDB_FIRST);
        for (; rc == 0; rc = mdb_cursor_get(m_cursor, &key, &value, MDB_NEXT)) {
            const bool more = visit(index, {static_cast<const char*>(key.mv_data), key.mv_size},
                                    {static_cast<const char*>(value.mv_data), value.mv_size});
            ++index;
            if (!more) {
                return index;
            }
        }
        if (rc != MDB_NOTFOUND) {
            check("mdb_cursor_get", rc);
        }
        return index;
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

} // namespace

bool is_lmdb(const std::filesystem::path& source) {
    std::error_code error;
    return std::filesystem::is_directory(source, error) &&
           std::filesystem::is_regular_file(source / "data.mdb", error);
}

std::size_t for_each_lmdb_record(const std::filesystem::path& source, const RecordVisitor& visit) {
    LmdbReader reader(source);
    return reader.each(visit);
}

std::size_t lmdb_record_count(const std::filesystem::path& source) {
    LmdbReader reader(source);
    return reader.entries();
}

} // namespace dl
