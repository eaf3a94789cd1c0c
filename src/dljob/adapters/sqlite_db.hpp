#pragma once
// A thin RAII layer over SQLite (Nix's libstore/sqlite.hh shape): Db owns the connection, Stmt a
// prepared statement, Txn a BEGIN IMMEDIATE transaction rolled back unless committed. No SQLite
// type shows here; <sqlite3.h> is included by sqlite_db.cpp only. Failures throw dljob::Failure
// (ErrorCode::store) because constructors and destructors cannot return a Result; the job store
// turns them back into Results at its interface.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dljob::adapters {

class Stmt;

enum class JournalMode { rollback, wal };

class Db {
public:
    /// Opens (creating) the database with a busy timeout and the journal mode asked for.
    Db(const std::string& path, JournalMode mode, int busy_timeout_ms);
    ~Db();
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;
    Db(Db&&) noexcept;
    Db& operator=(Db&&) noexcept;

    void exec(std::string_view sql);
    Stmt prepare(std::string_view sql);
    std::int64_t last_insert_id();
    int changes();
    [[nodiscard]] const std::string& path() const { return m_path; }

    struct Handle;

private:
    friend class Stmt;
    std::unique_ptr<Handle> m_handle;
    std::string m_path;
};

class Stmt {
public:
    ~Stmt();
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    Stmt(Stmt&&) noexcept;
    Stmt& operator=(Stmt&&) noexcept;

    /// Binds parameters left to right (1-based positions advance automatically).
    Stmt& bind(std::int64_t value);
    Stmt& bind(std::string_view value);
    Stmt& bind(const std::optional<std::int64_t>& value);
    Stmt& bind(const std::optional<double>& value);
    Stmt& bind_null();

    /// Steps once: true while a row is available.
    bool step();
    /// Runs a statement that returns no rows.
    void run();
    void reset();

    [[nodiscard]] std::int64_t int64(int column) const;
    [[nodiscard]] double real(int column) const;
    [[nodiscard]] std::string text(int column) const;
    [[nodiscard]] bool is_null(int column) const;

    struct Handle;

private:
    friend class Db;
    Stmt(Db::Handle& db, std::string_view sql);
    std::unique_ptr<Handle> m_handle;
    int m_next = 1;
};

/// BEGIN IMMEDIATE on construction (the write lock up front, so SQLite's deadlock detection
/// never turns a busy wait into SQLITE_BUSY), ROLLBACK on destruction unless committed.
class Txn {
public:
    explicit Txn(Db& db);
    ~Txn();
    Txn(const Txn&) = delete;
    Txn& operator=(const Txn&) = delete;
    Txn(Txn&&) = delete;
    Txn& operator=(Txn&&) = delete;
    void commit();

private:
    Db& m_db;
    bool m_active = true;
};

} // namespace dljob::adapters
