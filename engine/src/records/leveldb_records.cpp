// Caffe's LevelDBs, record by record (dl/records.hpp). The only file that sees LevelDB's
// headers. LevelDB is optional at build time (libleveldb-dev; DLJOB_LEVELDB=AUTO finds it): a
// build without it still knows a LevelDB when it sees one and says that it cannot read it.
#include <dl/error.hpp>
#include <dl/records.hpp>

#include <fmt/format.h>

#include <functional>

#if DLJOB_HAVE_LEVELDB
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/status.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#endif

namespace dl {
namespace {

#if DLJOB_HAVE_LEVELDB

// --- A read-only view of a database directory ------------------------------------------------
//
// LevelDB has no read-only mode: opening a database to read it writes into its directory. It
// creates LOCK, renames LOG to LOG.old and starts a new LOG, and when the last writer left
// records in its log (every convert_imageset run does: LevelDB compacts the log only when a
// later open recovers it) it writes them into a new table, a new MANIFEST and CURRENT, then
// deletes the log. With a damaged log record that recovery dropped the records past it, so a
// flipped byte silently took records out of the data set and out of the directory for good.
//
// ReadOnlyEnv is the Env LevelDB is given instead: reads go to the directory, and whatever
// LevelDB writes, renames or deletes lives in memory and goes with the Env. Only the opening
// thread may write (recovering the log into a table: as large as the log, in memory); LevelDB's
// background thread may not, so a compaction it starts fails at its first file, changes
// nothing and holds no memory. The directory's files are never opened for writing.

class MemoryWritable final : public leveldb::WritableFile {
public:
    explicit MemoryWritable(std::shared_ptr<std::string> bytes) : m_bytes(std::move(bytes)) {}
    leveldb::Status Append(const leveldb::Slice& data) override {
        m_bytes->append(data.data(), data.size());
        return leveldb::Status::OK();
    }
    leveldb::Status Close() override { return leveldb::Status::OK(); }
    leveldb::Status Flush() override { return leveldb::Status::OK(); }
    leveldb::Status Sync() override { return leveldb::Status::OK(); }

private:
    std::shared_ptr<std::string> m_bytes;
};

class MemorySequential final : public leveldb::SequentialFile {
public:
    explicit MemorySequential(std::shared_ptr<const std::string> bytes)
        : m_bytes(std::move(bytes)) {}
    leveldb::Status Read(std::size_t n, leveldb::Slice* result, char* /*scratch*/) override {
        const std::size_t count = std::min(n, m_bytes->size() - m_at);
        *result = leveldb::Slice(m_bytes->data() + m_at, count);
        m_at += count;
        return leveldb::Status::OK();
    }
    leveldb::Status Skip(std::uint64_t n) override {
        m_at += static_cast<std::size_t>(std::min<std::uint64_t>(n, m_bytes->size() - m_at));
        return leveldb::Status::OK();
    }

private:
    std::shared_ptr<const std::string> m_bytes;
    std::size_t m_at = 0;
};

class MemoryRandomAccess final : public leveldb::RandomAccessFile {
public:
    explicit MemoryRandomAccess(std::shared_ptr<const std::string> bytes)
        : m_bytes(std::move(bytes)) {}
    leveldb::Status Read(std::uint64_t offset, std::size_t n, leveldb::Slice* result,
                         char* /*scratch*/) const override {
        if (offset > m_bytes->size()) {
            return leveldb::Status::IOError("read past the end of a file in memory");
        }
        const std::size_t at = static_cast<std::size_t>(offset);
        *result = leveldb::Slice(m_bytes->data() + at, std::min(n, m_bytes->size() - at));
        return leveldb::Status::OK();
    }

private:
    std::shared_ptr<const std::string> m_bytes;
};

class NullLogger final : public leveldb::Logger {
public:
    void Logv(const char* /*format*/, std::va_list /*ap*/) override {}
};

// A shared (read) lock on the database's own LOCK file, when it has one: LevelDB's writers hold
// it exclusively (fcntl F_WRLCK), so a writer at work keeps this reader out and the other way
// round, while readers (the ranks of a data-parallel run) share it. Nothing is created.
class SharedLock final : public leveldb::FileLock {
public:
    explicit SharedLock(int fd) : m_fd(fd) {}
    ~SharedLock() override {
        if (m_fd >= 0) {
            ::close(m_fd); // releases the lock
        }
    }
    SharedLock(const SharedLock&) = delete;
    SharedLock& operator=(const SharedLock&) = delete;
    SharedLock(SharedLock&&) = delete;
    SharedLock& operator=(SharedLock&&) = delete;

private:
    int m_fd;
};

thread_local bool t_leveldb_background = false;

class ReadOnlyEnv final : public leveldb::Env {
public:
    ReadOnlyEnv() : m_base(leveldb::Env::Default()) {}

    leveldb::Status NewSequentialFile(const std::string& name,
                                      leveldb::SequentialFile** result) override {
        if (auto bytes = in_memory(name)) {
            *result = new MemorySequential(std::move(bytes));
            return leveldb::Status::OK();
        }
        return removed(name) ? not_found(name) : m_base->NewSequentialFile(name, result);
    }
    leveldb::Status NewRandomAccessFile(const std::string& name,
                                        leveldb::RandomAccessFile** result) override {
        if (auto bytes = in_memory(name)) {
            *result = new MemoryRandomAccess(std::move(bytes));
            return leveldb::Status::OK();
        }
        return removed(name) ? not_found(name) : m_base->NewRandomAccessFile(name, result);
    }
    leveldb::Status NewWritableFile(const std::string& name,
                                    leveldb::WritableFile** result) override {
        if (t_leveldb_background) {
            return leveldb::Status::IOError(name, "dltrain reads this database without writing");
        }
        const std::lock_guard lock(m_mutex);
        auto bytes = std::make_shared<std::string>();
        m_files[name] = bytes;
        m_removed.erase(name);
        *result = new MemoryWritable(std::move(bytes));
        return leveldb::Status::OK();
    }
    leveldb::Status NewAppendableFile(const std::string& name,
                                      leveldb::WritableFile** /*result*/) override {
        // Asked for only with Options::reuse_logs, which stays off; a directory's own file is
        // never appended to.
        return leveldb::Status::NotSupported(name, "appending");
    }
    bool FileExists(const std::string& name) override {
        return in_memory(name) != nullptr || (!removed(name) && m_base->FileExists(name));
    }
    leveldb::Status GetChildren(const std::string& dir, std::vector<std::string>* result) override {
        std::vector<std::string> names;
        leveldb::Status status = m_base->GetChildren(dir, &names);
        if (!status.ok()) {
            return status;
        }
        const std::lock_guard lock(m_mutex);
        const std::string prefix = dir + "/";
        std::set<std::string> children;
        for (const std::string& name : names) {
            if (m_removed.count(prefix + name) == 0) {
                children.insert(name);
            }
        }
        for (const auto& [path, bytes] : m_files) {
            if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
                path.find('/', prefix.size()) == std::string::npos) {
                children.insert(path.substr(dir.size() + 1));
            }
        }
        result->assign(children.begin(), children.end());
        return leveldb::Status::OK();
    }
    // LevelDB 1.23 calls RemoveFile, whose default calls this; 1.22 (EasyBuild's) calls this.
    // Override RemoveFile instead once a LevelDB without DeleteFile is to be supported.
    leveldb::Status DeleteFile(const std::string& name) override {
        const std::lock_guard lock(m_mutex);
        if (m_files.erase(name) > 0) {
            return leveldb::Status::OK();
        }
        if (m_removed.count(name) != 0 || !m_base->FileExists(name)) {
            return not_found(name);
        }
        m_removed.insert(name);
        return leveldb::Status::OK();
    }
    leveldb::Status CreateDir(const std::string& /*dir*/) override { return leveldb::Status::OK(); }
    leveldb::Status DeleteDir(const std::string& /*dir*/) override { return leveldb::Status::OK(); }
    leveldb::Status GetFileSize(const std::string& name, std::uint64_t* size) override {
        if (const auto bytes = in_memory(name)) {
            *size = bytes->size();
            return leveldb::Status::OK();
        }
        return removed(name) ? not_found(name) : m_base->GetFileSize(name, size);
    }
    leveldb::Status RenameFile(const std::string& from, const std::string& to) override {
        std::shared_ptr<std::string> bytes = in_memory(from);
        if (bytes == nullptr) {
            // A file of the directory (LevelDB renames only its own new files: CURRENT's
            // temporary, and LOG, which it does not keep here): its bytes move into memory.
            bytes = std::make_shared<std::string>();
            if (removed(from)) {
                return not_found(from);
            }
            leveldb::Status status = leveldb::ReadFileToString(m_base, from, bytes.get());
            if (!status.ok()) {
                return status;
            }
        }
        const std::lock_guard lock(m_mutex);
        m_files.erase(from);
        if (m_base->FileExists(from)) {
            m_removed.insert(from);
        }
        m_files[to] = std::move(bytes);
        m_removed.erase(to);
        return leveldb::Status::OK();
    }
    leveldb::Status LockFile(const std::string& name, leveldb::FileLock** lock) override {
        *lock = nullptr;
        const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
            // No LOCK file: no LevelDB writer has the database open (writers create it first).
            *lock = new SharedLock(-1);
            return leveldb::Status::OK();
        }
        if (fd < 0) {
            return leveldb::Status::IOError(name, std::strerror(errno));
        }
        struct flock shared = {};
        shared.l_type = F_RDLCK;
        shared.l_whence = SEEK_SET;
        if (::fcntl(fd, F_SETLK, &shared) != 0) {
            const int error = errno;
            ::close(fd);
            // LevelDB's own words for a held lock, which the opener's wait looks for.
            return leveldb::Status::IOError("lock " + name, std::strerror(error));
        }
        *lock = new SharedLock(fd);
        return leveldb::Status::OK();
    }
    leveldb::Status UnlockFile(leveldb::FileLock* lock) override {
        delete lock;
        return leveldb::Status::OK();
    }
    void Schedule(void (*function)(void*), void* arg) override {
        // LevelDB's background work (compactions) runs here: marked, so it may not write.
        auto* task = new Task{function, arg};
        m_base->Schedule(
            [](void* raw) {
                const std::unique_ptr<Task> owned(static_cast<Task*>(raw));
                t_leveldb_background = true;
                owned->function(owned->arg);
            },
            task);
    }
    void StartThread(void (*function)(void*), void* arg) override {
        m_base->StartThread(function, arg);
    }
    leveldb::Status GetTestDirectory(std::string* path) override {
        return m_base->GetTestDirectory(path);
    }
    leveldb::Status NewLogger(const std::string& /*name*/, leveldb::Logger** result) override {
        *result = new NullLogger();
        return leveldb::Status::OK();
    }
    std::uint64_t NowMicros() override { return m_base->NowMicros(); }
    void SleepForMicroseconds(int micros) override { m_base->SleepForMicroseconds(micros); }

private:
    struct Task {
        void (*function)(void*);
        void* arg;
    };

    std::shared_ptr<std::string> in_memory(const std::string& name) {
        const std::lock_guard lock(m_mutex);
        const auto found = m_files.find(name);
        return found != m_files.end() ? found->second : nullptr;
    }
    bool removed(const std::string& name) {
        const std::lock_guard lock(m_mutex);
        return m_removed.count(name) != 0;
    }
    static leveldb::Status not_found(const std::string& name) {
        return leveldb::Status::NotFound(name, "removed (in memory only)");
    }

    leveldb::Env* m_base;
    std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<std::string>> m_files; // written, by path
    std::set<std::string> m_removed;                             // the directory's, hidden
};

// LevelDB's own words when a writer holds the database: "lock <dir>/LOCK: ...".
bool is_held(const std::filesystem::path& source, const leveldb::Status& status) {
    return status.IsIOError() &&
           status.ToString().find("lock " + source.string() + "/LOCK") != std::string::npos;
}

[[noreturn]] void leveldb_fail(const std::filesystem::path& source, const char* call,
                               const leveldb::Status& status) {
    std::string hint;
    if (is_held(source, status)) {
        hint = " (a LevelDB writer held it for over a minute)";
    } else if (status.IsCorruption()) {
        hint = " (the database is damaged; it was left as it is)";
    }
    fail_config(
        fmt::format("LevelDB {}: {} failed: {}{}", source.string(), call, status.ToString(), hint));
}

/// The database opened through a ReadOnlyEnv; `env` and `logger` outlive `db` (declared first).
struct ReadOnlyDb {
    ReadOnlyEnv env;
    NullLogger logger;
    std::unique_ptr<leveldb::DB> db;
};

/// Opened so that nothing in its directory changes (ReadOnlyEnv) and a damaged record is an
/// error rather than dropped (paranoid_checks: LevelDB's recovery otherwise skips a log record
/// whose checksum fails). A writer that holds the database is waited for, up to a minute.
std::unique_ptr<ReadOnlyDb> open(const std::filesystem::path& source,
                                 const std::function<bool()>& give_up) {
    auto opened = std::make_unique<ReadOnlyDb>();
    leveldb::Options options;
    options.env = &opened->env;
    options.info_log = &opened->logger;
    options.create_if_missing = false;
    options.paranoid_checks = true;
    options.max_open_files = 100;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (true) {
        leveldb::DB* db = nullptr;
        const leveldb::Status status = leveldb::DB::Open(options, source.string(), &db);
        if (status.ok()) {
            opened->db.reset(db);
            return opened;
        }
        if (!is_held(source, status) || std::chrono::steady_clock::now() > deadline ||
            (give_up && give_up())) {
            leveldb_fail(source, "open", status);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

std::size_t each_record(const std::filesystem::path& source, const RecordVisitor& visit,
                        const std::function<bool()>& give_up) {
    const std::unique_ptr<ReadOnlyDb> opened = open(source, give_up);
    leveldb::ReadOptions options;
    options.fill_cache = false;      // read once, in order: caching blocks only costs memory
    options.verify_checksums = true; // a damaged table block is an error, not bytes
    const std::unique_ptr<leveldb::Iterator> it(opened->db->NewIterator(options));
    std::size_t index = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const leveldb::Slice key = it->key();
        const leveldb::Slice value = it->value();
        const bool more = visit(index, {key.data(), key.size()}, {value.data(), value.size()});
        ++index;
        if (!more) {
            return index;
        }
    }
    if (!it->status().ok()) {
        leveldb_fail(source, "reading", it->status());
    }
    return index;
}

#else

[[noreturn]] std::size_t each_record(const std::filesystem::path& source,
                                     const RecordVisitor& /*visit*/,
                                     const std::function<bool()>& /*give_up*/) {
    fail_config(
        fmt::format("{} is a LevelDB, and this build has no LevelDB: install libleveldb-dev and "
                    "rebuild (scripts/setup.sh; CMake finds it), or give the data as an LMDB "
                    "(Caffe's convert_imageset -backend lmdb)",
                    source.string()));
}

#endif

} // namespace

bool leveldb_available() {
    return DLJOB_HAVE_LEVELDB != 0;
}

bool is_leveldb(const std::filesystem::path& source) {
    std::error_code error;
    return std::filesystem::is_directory(source, error) &&
           std::filesystem::is_regular_file(source / "CURRENT", error) &&
           !std::filesystem::exists(source / "data.mdb", error);
}

std::size_t for_each_leveldb_record(const std::filesystem::path& source, const RecordVisitor& visit,
                                    const std::function<bool()>& give_up) {
    return each_record(source, visit, give_up);
}

} // namespace dl
