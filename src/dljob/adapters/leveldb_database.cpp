#include <dljob/adapters/leveldb_database.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#if DLJOB_HAVE_LEVELDB
#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/status.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
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

// LevelDB has no read-only mode: opening a database writes into its directory (LOCK, a new LOG,
// and, when the last writer left records in its log, as every convert_imageset run does, a new
// table, MANIFEST and CURRENT, then the log deleted; a damaged log record was dropped with what
// followed it). dljob reads the user's data and must not change it, so LevelDB is given a shadow
// directory of symbolic links, one per file of the database: LevelDB never writes into a file it
// did not create (every new file has a new number, CURRENT is replaced by a rename, logs are
// not reused), so whatever it creates, renames or deletes is a file or a link in the shadow, and
// the database's own files are only read through the links.
class ShadowDirectory {
public:
    explicit ShadowDirectory(const std::string& database) {
        std::error_code ec;
        std::filesystem::path base = std::filesystem::temp_directory_path(ec);
        if (ec) {
            base = "/tmp";
        }
        std::string pattern = (base / "dljob-leveldb-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            m_error = fmt::format("cannot make a directory in {}: {}", base.string(),
                                  std::strerror(errno));
            return;
        }
        m_path = pattern;
        // The files LevelDB writes for itself stay out: its lock and its info log.
        const std::set<std::string> own = {"LOCK", "LOG", "LOG.old"};
        int entries = 0;
        for (std::filesystem::directory_iterator it(database, ec), end; !ec && it != end;
             it.increment(ec)) {
            // A database is a few files per 2 MB table: a million is far past any real one.
            if (++entries > 1000000) {
                m_error = fmt::format("{} holds over a million entries", database);
                return;
            }
            const std::string name = it->path().filename().string();
            if (own.count(name) == 0 && it->is_regular_file(ec)) {
                std::filesystem::create_symlink(std::filesystem::absolute(it->path()),
                                                m_path / name, ec);
                if (ec) {
                    break;
                }
            }
        }
        if (ec) {
            m_error = fmt::format("cannot read {}: {}", database, ec.message());
        }
    }
    ~ShadowDirectory() {
        if (!m_path.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(m_path, ec);
        }
    }
    ShadowDirectory(const ShadowDirectory&) = delete;
    ShadowDirectory& operator=(const ShadowDirectory&) = delete;
    ShadowDirectory(ShadowDirectory&&) = delete;
    ShadowDirectory& operator=(ShadowDirectory&&) = delete;

    [[nodiscard]] const std::string& error() const { return m_error; }
    [[nodiscard]] std::string path() const { return m_path.string(); }

private:
    std::filesystem::path m_path;
    std::string m_error;
};

// A shared (read) lock on the database's own LOCK file, when it has one: LevelDB's writers hold
// it exclusively (fcntl F_WRLCK), so a writer at work keeps this reader out and the other way
// round, while readers share it. Nothing is created; closing the descriptor releases it.
class SharedLock {
public:
    explicit SharedLock(const std::string& database)
        : m_fd(::open((database + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC)) {}
    ~SharedLock() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    SharedLock(const SharedLock&) = delete;
    SharedLock& operator=(const SharedLock&) = delete;
    SharedLock(SharedLock&&) = delete;
    SharedLock& operator=(SharedLock&&) = delete;

    /// Whether the lock is held (or there is no LOCK file, so no writer to keep out).
    bool try_lock() const {
        if (m_fd < 0) {
            return true;
        }
        struct flock lock {};
        lock.l_type = F_RDLCK;
        lock.l_whence = SEEK_SET;
        return ::fcntl(m_fd, F_SETLK, &lock) == 0;
    }

private:
    int m_fd;
};

Unexpected leveldb_failure(const std::string& directory, const char* call,
                           const leveldb::Status& status) {
    return fail(ErrorCode::config_invalid,
                fmt::format("LevelDB {}: {} failed: {}", directory, call, status.ToString()),
                status.IsCorruption()
                    ? "the database is damaged (it was left as it is): make it again with "
                      "Caffe's convert_imageset -backend leveldb"
                    : "give a directory made by LevelDB (Caffe's convert_imageset -backend "
                      "leveldb writes one)");
}

} // namespace

Result<void>
for_each_leveldb_record(const std::string& directory,
                        const std::function<Result<void>(std::uint64_t index, std::string_view key,
                                                         std::string_view value)>& visit) {
    // One writer at a time may hold a LevelDB: wait a while for one that holds it.
    const SharedLock shared(directory);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!shared.try_lock()) {
        if (std::chrono::steady_clock::now() >= deadline) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("LevelDB {} is held by a writer (its LOCK), still after a "
                                    "minute",
                                    directory),
                        "wait for the program writing it to finish, then pack again");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const ShadowDirectory shadow(directory);
    if (!shadow.error().empty()) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("LevelDB {}: {}", directory, shadow.error()),
                    "dljob reads a LevelDB through links in the temporary directory (TMPDIR)");
    }
    leveldb::Options options;
    options.create_if_missing = false;
    options.max_open_files = 100;
    // A damaged record is an error, not dropped by the recovery.
    options.paranoid_checks = true;
    leveldb::DB* raw = nullptr;
    const leveldb::Status status = leveldb::DB::Open(options, shadow.path(), &raw);
    if (!status.ok()) {
        return leveldb_failure(directory, "open", status);
    }
    const std::unique_ptr<leveldb::DB> db(raw);
    leveldb::ReadOptions read;
    read.fill_cache = false;
    read.verify_checksums = true;
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
