#include <dljob/adapters/sqlite_db.hpp>
#include <dljob/domain/error.hpp>

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace dljob::adapters {

struct Db::Handle {
    sqlite3* db = nullptr;
    ~Handle() {
        if (db != nullptr) {
            sqlite3_close_v2(db);
        }
    }
    Handle() = default;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&&) = delete;
    Handle& operator=(Handle&&) = delete;
};

struct Stmt::Handle {
    sqlite3* db = nullptr;
    sqlite3_stmt* stmt = nullptr;
    std::string sql;
    ~Handle() {
        if (stmt != nullptr) {
            sqlite3_finalize(stmt);
        }
    }
    Handle() = default;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&&) = delete;
    Handle& operator=(Handle&&) = delete;
};

namespace {

[[noreturn]] void throw_error(sqlite3* db, std::string_view what) {
    const int code = db != nullptr ? sqlite3_extended_errcode(db) : SQLITE_ERROR;
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    std::string hint;
    if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
        hint = "another dljob process held the job store for too long; try again";
    } else if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB) {
        hint = "the job store is damaged; move it aside (set DLJOB_STORE to use another file)";
    } else {
        hint = "check the job store's directory (DLJOB_STORE overrides its location)";
    }
    throw Failure(ErrorCode::store, fmt::format("job store: {}: {}", what, message), hint);
}

/// The journal mode the file is in now (lower case, as SQLite reports it); SQLITE_BUSY and the
/// like come back as the return code so that the caller can wait and ask again.
int read_journal_mode(sqlite3* db, std::string& mode) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
            const auto* text = sqlite3_column_text(stmt, 0);
            mode = text != nullptr ? reinterpret_cast<const char*>(text) : "";
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(stmt);
    return rc;
}

/// Changing the journal mode needs the file to itself, and SQLite answers SQLITE_BUSY at once
/// instead of calling the busy handler when another connection holds a lock (it would deadlock
/// otherwise). Fifty `dljob submit`s started together on a fresh store hit exactly that. The
/// mode is a property of the file, so ask first (every open after the first changes nothing);
/// otherwise try, and on a busy answer wait and ask again, within the same busy timeout.
void switch_journal_mode(sqlite3* db, std::string_view wanted, int busy_timeout_ms) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(busy_timeout_ms);
    const std::string sql = fmt::format("PRAGMA journal_mode={}", wanted);
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
        std::string mode;
        int rc = read_journal_mode(db, mode);
        if (rc == SQLITE_OK && mode == wanted) {
            return;
        }
        if (rc == SQLITE_OK) {
            rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
            if (rc == SQLITE_OK && read_journal_mode(db, mode) == SQLITE_OK && mode != wanted) {
                throw Failure(ErrorCode::store,
                              fmt::format("job store: SQLite kept journal mode {} instead of {}",
                                          mode, wanted),
                              "set DLJOB_STORE to a file on a local file system");
            }
        }
        const bool busy = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
        if (rc != SQLITE_OK && (!busy || Clock::now() >= deadline)) {
            throw_error(db, sql);
        }
        if (rc != SQLITE_OK) {
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(50));
        }
    }
}

} // namespace

Db::Db(const std::string& path, JournalMode mode, int busy_timeout_ms)
    : m_handle(std::make_unique<Handle>()), m_path(path) {
    const int rc = sqlite3_open_v2(
        path.c_str(), &m_handle->db,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
    if (rc != SQLITE_OK) {
        throw_error(m_handle->db, fmt::format("cannot open {}", path));
    }
    sqlite3_busy_timeout(m_handle->db, busy_timeout_ms);
    if (mode == JournalMode::wal) {
        switch_journal_mode(m_handle->db, "wal", busy_timeout_ms);
        exec("PRAGMA synchronous=NORMAL");
    } else {
        // WAL persists in the file: switch an existing WAL database back on a network file
        // system, where its shared-memory index does not work across hosts.
        switch_journal_mode(m_handle->db, "delete", busy_timeout_ms);
        exec("PRAGMA synchronous=FULL");
    }
    exec("PRAGMA foreign_keys=ON");
}

Db::~Db() = default;
Db::Db(Db&&) noexcept = default;
Db& Db::operator=(Db&&) noexcept = default;

void Db::exec(std::string_view sql) {
    char* message = nullptr;
    const std::string text(sql);
    if (sqlite3_exec(m_handle->db, text.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
        sqlite3_free(message);
        throw_error(m_handle->db, text.substr(0, 60));
    }
}

Stmt Db::prepare(std::string_view sql) {
    return Stmt(*m_handle, sql);
}

std::int64_t Db::last_insert_id() {
    return sqlite3_last_insert_rowid(m_handle->db);
}

int Db::changes() {
    return sqlite3_changes(m_handle->db);
}

Stmt::Stmt(Db::Handle& db, std::string_view sql) : m_handle(std::make_unique<Handle>()) {
    m_handle->db = db.db;
    m_handle->sql = std::string(sql);
    if (sqlite3_prepare_v2(db.db, m_handle->sql.c_str(), -1, &m_handle->stmt, nullptr) !=
        SQLITE_OK) {
        throw_error(db.db, fmt::format("cannot prepare '{}'", m_handle->sql.substr(0, 60)));
    }
}

Stmt::~Stmt() = default;
Stmt::Stmt(Stmt&&) noexcept = default;
Stmt& Stmt::operator=(Stmt&&) noexcept = default;

Stmt& Stmt::bind(std::int64_t value) {
    sqlite3_bind_int64(m_handle->stmt, m_next++, value);
    return *this;
}

Stmt& Stmt::bind(std::string_view value) {
    sqlite3_bind_text(m_handle->stmt, m_next++, value.data(), static_cast<int>(value.size()),
                      SQLITE_TRANSIENT);
    return *this;
}

Stmt& Stmt::bind(const std::optional<std::int64_t>& value) {
    return value ? bind(*value) : bind_null();
}

Stmt& Stmt::bind(const std::optional<double>& value) {
    if (value) {
        sqlite3_bind_double(m_handle->stmt, m_next++, *value);
        return *this;
    }
    return bind_null();
}

Stmt& Stmt::bind_null() {
    sqlite3_bind_null(m_handle->stmt, m_next++);
    return *this;
}

bool Stmt::step() {
    const int rc = sqlite3_step(m_handle->stmt);
    if (rc == SQLITE_ROW) {
        return true;
    }
    if (rc == SQLITE_DONE) {
        return false;
    }
    throw_error(m_handle->db, fmt::format("'{}'", m_handle->sql.substr(0, 60)));
}

void Stmt::run() {
    while (step()) {
    }
    reset();
}

void Stmt::reset() {
    sqlite3_reset(m_handle->stmt);
    sqlite3_clear_bindings(m_handle->stmt);
    m_next = 1;
}

std::int64_t Stmt::int64(int column) const {
    return sqlite3_column_int64(m_handle->stmt, column);
}

double Stmt::real(int column) const {
    return sqlite3_column_double(m_handle->stmt, column);
}

std::string Stmt::text(int column) const {
    const auto* data = sqlite3_column_text(m_handle->stmt, column);
    if (data == nullptr) {
        return {};
    }
    return {reinterpret_cast<const char*>(data),
            static_cast<std::size_t>(sqlite3_column_bytes(m_handle->stmt, column))};
}

bool Stmt::is_null(int column) const {
    return sqlite3_column_type(m_handle->stmt, column) == SQLITE_NULL;
}

Txn::Txn(Db& db) : m_db(db) {
    m_db.exec("BEGIN IMMEDIATE");
}

Txn::~Txn() {
    if (m_active) {
        try {
            m_db.exec("ROLLBACK");
        } catch (const Failure&) { // NOLINT(bugprone-empty-catch): nothing to do in a destructor
        }
    }
}

void Txn::commit() {
    m_db.exec("COMMIT");
    m_active = false;
}

} // namespace dljob::adapters
