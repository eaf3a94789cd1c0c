#include <dljob/adapters/archive_libarchive.hpp>
#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/app/data/stage_extract.hpp>
#include <dljob/domain/dataset.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace dljob::app {
namespace {

using adapters::TreeWriter;

// Files up to this size are read whole and handed to the writer pool; larger ones are
// streamed by the reading thread (their per-file cost is small next to their bytes).
constexpr std::uint64_t pooled_file_limit = std::uint64_t{4} << 20U;
// What may wait for the writers at most: enough backlog to keep them busy, and memory bounded
// whatever the archive holds. Each job counts its bytes plus its path and bookkeeping, so
// millions of tiny or empty files cannot pile up either (with bytes alone, a 64 MiB budget
// held all 70,000 Fashion-MNIST images at once: 91 MiB peak RSS against 36 for 4 files).
constexpr std::uint64_t max_queued_bytes = std::uint64_t{16} << 20U;
constexpr std::uint64_t per_job_overhead = 256;
constexpr std::size_t stream_chunk_bytes = std::size_t{1} << 20U;
// Written jobs kept for their buffers, of small files only: 256 x 64 KiB at most.
constexpr std::size_t max_spares = 256;
constexpr std::size_t max_spare_bytes = std::size_t{64} << 10U;

struct WriteJob {
    std::string path;
    std::vector<char> data;
    std::uint32_t mode = 0644;
    int dir_fd = -1;             // of the path's directory, owned by the Extractor
    std::size_t name_offset = 0; // where the path's last component starts
};

std::uint64_t queued_cost(const WriteJob& job) {
    return job.data.size() + job.path.size() + per_job_overhead;
}

/// Writes small files from a few threads: on tmpfs and local disks the per-file cost (open,
/// write, close) is CPU-bound per core, so two writers beat one even on two cores.
class WriterPool {
public:
    WriterPool(const TreeWriter& tree, unsigned threads) : m_tree(tree) {
        for (unsigned i = 0; i < std::max(1U, threads); ++i) {
            m_threads.emplace_back([this] { run(); });
        }
    }
    ~WriterPool() { (void)finish(); }
    WriterPool(const WriterPool&) = delete;
    WriterPool& operator=(const WriterPool&) = delete;
    WriterPool(WriterPool&&) = delete;
    WriterPool& operator=(WriterPool&&) = delete;

    /// Queues `job` and hands back a written one to fill next (its path and data keep their
    /// capacity): 70,000 small files were 280,000 allocations, each freed on another thread
    /// than the one that made it, a tenth of an extraction's CPU.
    WriteJob submit(WriteJob job) {
        std::unique_lock lock(m_mutex);
        // A full queue makes the reader wait until it is half empty, not for one free slot:
        // waking per file made reader and writers trade the CPU for every 800-byte image.
        if (m_queued_bytes >= max_queued_bytes) {
            m_space.wait(lock, [&] { return m_queued_bytes <= max_queued_bytes / 2 || m_failed; });
        }
        if (m_failed) {
            return {};
        }
        m_queued_bytes += queued_cost(job);
        m_jobs.push_back(std::move(job));
        m_ready.notify_one();
        if (m_spares.empty()) {
            return {};
        }
        WriteJob spare = std::move(m_spares.back());
        m_spares.pop_back();
        return spare;
    }

    [[nodiscard]] bool failed() {
        const std::lock_guard lock(m_mutex);
        return m_failed;
    }

    /// Waits for every queued file; returns the first error.
    Result<void> finish() {
        {
            const std::lock_guard lock(m_mutex);
            m_closing = true;
        }
        m_ready.notify_all();
        for (std::thread& thread : m_threads) {
            if (thread.joinable()) {
                thread.join();
            }
        }
        if (m_failed) {
            return fail(m_error);
        }
        return {};
    }

private:
    void run() {
        WriteJob job;
        for (;;) {
            bool low = false;
            {
                std::unique_lock lock(m_mutex);
                if (!job.path.empty() && m_spares.size() < max_spares &&
                    job.data.capacity() <= max_spare_bytes) {
                    m_spares.push_back(std::move(job));
                }
                m_ready.wait(lock, [&] { return !m_jobs.empty() || m_closing || m_failed; });
                if (m_failed || m_jobs.empty()) {
                    return;
                }
                job = std::move(m_jobs.front());
                m_jobs.pop_front();
                m_queued_bytes -= queued_cost(job);
                low = m_queued_bytes <= max_queued_bytes / 2;
            }
            if (low) {
                m_space.notify_one();
            }
            auto written = write(job);
            if (!written) {
                const std::lock_guard lock(m_mutex);
                if (!m_failed) {
                    m_failed = true;
                    m_error = written.error();
                }
                m_jobs.clear();
                m_space.notify_all();
                m_ready.notify_all();
            }
        }
    }

    Result<void> write(const WriteJob& job) const {
        auto fd = m_tree.create_file_in(job.dir_fd, job.path, job.name_offset, job.mode);
        if (!fd) {
            return fail(fd.error());
        }
        static const std::string unnamed; // the path is put together only for an error
        auto written = adapters::write_all(fd->get(), job.data.data(), job.data.size(), unnamed);
        if (!written) {
            Error error = written.error();
            error.message.insert(error.message.find(':'), m_tree.root() + "/" + job.path);
            return fail(std::move(error));
        }
        return {};
    }

    const TreeWriter& m_tree;
    std::vector<std::thread> m_threads;
    std::mutex m_mutex;
    std::condition_variable m_ready;
    std::condition_variable m_space;
    std::deque<WriteJob> m_jobs;
    std::vector<WriteJob> m_spares; // written jobs whose buffers submit() hands back
    std::uint64_t m_queued_bytes = 0;
    bool m_closing = false;
    bool m_failed = false;
    Error m_error;
};

/// Writes one large member on a thread of its own while the reading thread reads on: reading
/// (read(2), the pack's hash, libarchive's copy or decompression) and writing each took about
/// half of a large member's time, one after the other on one thread, which left --extract of
/// 4 x 256 MiB level with `tar -xf` on /dev/shm. A few chunks are in flight, so memory stays
/// bounded whatever the member's size.
class StreamWriter {
public:
    StreamWriter(adapters::UniqueFd fd, std::string shown)
        : m_fd(std::move(fd)), m_shown(std::move(shown)) {
        for (std::size_t i = 0; i < m_buffers.size(); ++i) {
            m_buffers[i].resize(stream_chunk_bytes);
            m_free.push_back(i);
        }
        m_thread = std::thread([this] { run(); });
    }
    ~StreamWriter() { (void)finish(); }
    StreamWriter(const StreamWriter&) = delete;
    StreamWriter& operator=(const StreamWriter&) = delete;
    StreamWriter(StreamWriter&&) = delete;
    StreamWriter& operator=(StreamWriter&&) = delete;

    /// A free buffer (stream_chunk_bytes) to read into; nullptr once a write has failed.
    char* take() {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [&] { return !m_free.empty() || m_failed; });
        if (m_failed) {
            return nullptr;
        }
        m_reading = m_free.front();
        m_free.pop_front();
        return m_buffers[m_reading].data();
    }
    /// Queues the buffer from take() with `size` bytes read into it.
    void give(std::size_t size) {
        {
            const std::lock_guard lock(m_mutex);
            m_full.emplace_back(m_reading, size);
        }
        m_changed.notify_all();
    }
    /// Waits until every queued chunk is written; the first write error.
    Result<void> finish() {
        {
            const std::lock_guard lock(m_mutex);
            m_closing = true;
        }
        m_changed.notify_all();
        if (m_thread.joinable()) {
            m_thread.join();
        }
        if (m_failed) {
            return fail(m_error);
        }
        return {};
    }

private:
    void run() {
        for (;;) {
            std::pair<std::size_t, std::size_t> chunk;
            {
                std::unique_lock lock(m_mutex);
                m_changed.wait(lock, [&] { return !m_full.empty() || m_closing; });
                if (m_full.empty()) {
                    return;
                }
                chunk = m_full.front();
                m_full.pop_front();
            }
            auto written = adapters::write_all(m_fd.get(), m_buffers[chunk.first].data(),
                                               chunk.second, m_shown);
            {
                const std::lock_guard lock(m_mutex);
                m_free.push_back(chunk.first);
                if (!written && !m_failed) {
                    m_failed = true;
                    m_error = written.error();
                    m_full.clear();
                }
            }
            m_changed.notify_all();
        }
    }

    adapters::UniqueFd m_fd;
    std::string m_shown;
    std::array<std::vector<char>, 3> m_buffers;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::deque<std::size_t> m_free;
    std::deque<std::pair<std::size_t, std::size_t>> m_full;
    std::size_t m_reading = 0;
    bool m_closing = false;
    bool m_failed = false;
    Error m_error;
    std::thread m_thread; // last: started once everything above exists
};

std::string parent_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

/// One extraction into one tree from one or more archives. Each archive is read by its own
/// thread (libarchive decompresses and parses there, outside any lock); the bookkeeping that
/// makes the checks hold across archives (entry count, byte budget, directories made, explicit
/// directories seen, links) sits behind one mutex, held only between reads.
class Extractor {
public:
    Extractor(const TreeWriter& tree, const ExtractLimits& limits, std::string shown_name)
        : m_tree(tree), m_limits(limits), m_shown(std::move(shown_name)),
          m_pool(tree, limits.threads) {}

    Result<ExtractSummary> run(const std::vector<ArchiveReader*>& readers) {
        Result<void> result;
        if (readers.size() == 1) {
            result = read_all(*readers.front());
        } else {
            std::vector<Result<void>> results(readers.size());
            std::vector<std::thread> threads;
            threads.reserve(readers.size());
            for (std::size_t i = 0; i < readers.size(); ++i) {
                threads.emplace_back([&, i] {
                    results[i] = read_all(*readers[i]);
                    if (!results[i]) {
                        m_stop = true;
                    }
                });
            }
            for (std::thread& thread : threads) {
                thread.join();
            }
            for (Result<void>& one : results) {
                if (!one) {
                    result = std::move(one);
                    break;
                }
            }
        }
        auto drained = m_pool.finish();
        if (!result) {
            return fail(result.error());
        }
        if (!drained) {
            return fail(drained.error());
        }
        // Links last: no member can have been written through one.
        for (const auto& [path, target] : m_symlinks) {
            DLJOB_TRY(m_tree.make_symlink(path, target));
        }
        return m_summary;
    }

private:
    Result<void> read_all(ArchiveReader& reader) {
        for (;;) {
            if (m_stop || m_pool.failed()) {
                return {}; // the failing reader or the pool reports the error
            }
            auto next = reader.next();
            if (!next) {
                return fail(next.error());
            }
            if (!next->has_value()) {
                return {};
            }
            const ArchiveEntry& entry = **next;
            auto path = normalize_member_path(entry.path);
            if (!path) {
                return refuse(entry.path, path.error().message);
            }
            if ((entry.mode & (S_ISUID | S_ISGID)) != 0) {
                return refuse(entry.path,
                              fmt::format("mode {:04o} has the setuid or setgid bit", entry.mode));
            }
            DLJOB_TRY(add(reader, entry, *path));
        }
    }

    Result<void> add(ArchiveReader& reader, const ArchiveEntry& entry, const std::string& path) {
        std::unique_lock lock(m_mutex);
        if (++m_entries > m_limits.max_entries) {
            return refuse(entry.path, fmt::format("the archive has more than {} entries",
                                                  m_limits.max_entries));
        }
        switch (entry.type) {
        case ArchiveEntryType::directory:
            if (!m_explicit_dirs.insert(path).second) {
                return refuse(entry.path, "a second entry with this path");
            }
            ++m_summary.directories;
            return ensure_directory(path);
        case ArchiveEntryType::file: {
            auto dir_fd = count_file(entry, path);
            if (!dir_fd) {
                return fail(dir_fd.error());
            }
            lock.unlock();
            return write_file(reader, entry, path, *dir_fd);
        }
        case ArchiveEntryType::symlink: {
            if (auto inside = check_symlink_target(path, entry.link_target); !inside) {
                return refuse(entry.path, inside.error().message);
            }
            DLJOB_TRY(ensure_directory(parent_of(path)));
            m_symlinks.emplace_back(path, entry.link_target);
            ++m_summary.symlinks;
            return {};
        }
        case ArchiveEntryType::hardlink:
            return refuse(entry.path,
                          fmt::format("hard link to '{}' (hard links are refused: they can alias "
                                      "files outside the tree)",
                                      entry.link_target));
        default:
            return refuse(entry.path, fmt::format("it is a {}, and only regular files, "
                                                  "directories and symlinks are extracted",
                                                  to_string(entry.type)));
        }
    }

    /// Budget and counters for a file, and its directory, whose descriptor it returns; with
    /// the mutex held.
    Result<int> count_file(const ArchiveEntry& entry, const std::string& path) {
        if (m_limits.max_bytes != 0 && entry.size > m_limits.max_bytes - m_summary.bytes) {
            return refuse(entry.path,
                          fmt::format("it would take the extracted size past the budget of {} "
                                      "bytes ({} declared, {} already written): a "
                                      "decompression bomb or the wrong archive",
                                      m_limits.max_bytes, entry.size, m_summary.bytes));
        }
        // Members come directory by directory: the last file's directory needs no lookup (and
        // no string of its own) for the next one.
        const auto slash = path.rfind('/');
        const std::string_view parent = slash == std::string::npos
                                            ? std::string_view()
                                            : std::string_view(path).substr(0, slash);
        if (parent != m_last_parent || m_last_parent_fd < 0) {
            std::string made(parent);
            DLJOB_TRY(ensure_directory(made));
            auto& fd = m_dir_fds[made];
            if (!fd) {
                auto opened = m_tree.open_directory(made);
                if (!opened) {
                    return fail(opened.error());
                }
                fd = std::move(*opened);
            }
            m_last_parent = std::move(made);
            m_last_parent_fd = fd.get();
        }
        m_summary.bytes += entry.size;
        ++m_summary.files;
        return m_last_parent_fd;
    }

    /// Reads the file's data (the mutex released: this is where libarchive decompresses).
    Result<void> write_file(ArchiveReader& reader, const ArchiveEntry& entry,
                            const std::string& path, int dir_fd) {
        const std::uint32_t mode = (entry.mode & 0111U) != 0 ? 0755 : 0644;
        if (entry.size <= pooled_file_limit) {
            // One per reading thread: shards are read in parallel.
            thread_local WriteJob job;
            job.path.assign(path);
            job.data.resize(entry.size);
            job.mode = mode;
            // Opened by name in its directory: on tmpfs the walk of the whole path was a tenth
            // of the kernel's time per file (perf: __d_lookup, strncpy_from_user).
            job.dir_fd = dir_fd;
            const auto slash = path.rfind('/');
            job.name_offset = slash == std::string::npos ? 0 : slash + 1;
            DLJOB_TRY(read_exactly(reader, entry, job.data.data(), job.data.size()));
            DLJOB_TRY(expect_end(reader, entry));
            job = m_pool.submit(std::move(job));
            return {};
        }
        auto fd = m_tree.create_file(path, mode);
        if (!fd) {
            return fail(fd.error());
        }
        StreamWriter writer(std::move(*fd), m_tree.root() + "/" + path);
        std::uint64_t left = entry.size;
        while (left > 0) {
            char* buffer = writer.take();
            if (buffer == nullptr) {
                break; // finish() says why
            }
            const auto chunk =
                static_cast<std::size_t>(std::min<std::uint64_t>(left, stream_chunk_bytes));
            DLJOB_TRY(read_exactly(reader, entry, buffer, chunk));
            writer.give(chunk);
            left -= chunk;
        }
        DLJOB_TRY(writer.finish());
        return expect_end(reader, entry);
    }

    Result<void> read_exactly(ArchiveReader& reader, const ArchiveEntry& entry, char* data,
                              std::size_t size) const {
        std::size_t done = 0;
        while (done < size) {
            auto n = reader.read(data + done, size - done);
            if (!n) {
                return fail(n.error());
            }
            if (*n == 0) {
                return refuse(entry.path, "its data ends before its declared size (truncated "
                                          "archive)");
            }
            done += *n;
        }
        return {};
    }

    /// Sizes are declared per header and not trusted: more data than declared is refused.
    Result<void> expect_end(ArchiveReader& reader, const ArchiveEntry& entry) const {
        char extra = 0;
        auto n = reader.read(&extra, 1);
        if (!n) {
            return fail(n.error());
        }
        if (*n != 0) {
            return refuse(entry.path, "it holds more data than its header declares");
        }
        return {};
    }

    /// With the mutex held.
    Result<void> ensure_directory(const std::string& path) {
        if (path.empty() || m_made_dirs.count(path) != 0) {
            return {};
        }
        DLJOB_TRY(m_tree.make_directories(path));
        for (std::string prefix = path; !prefix.empty(); prefix = parent_of(prefix)) {
            if (!m_made_dirs.insert(prefix).second) {
                break;
            }
        }
        return {};
    }

    Unexpected refuse(const std::string& raw_path, const std::string& why) const {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: refusing entry '{}': {}", m_shown, raw_path, why),
                    "the archive is unsafe or damaged; nothing was extracted");
    }

    const TreeWriter& m_tree;
    ExtractLimits m_limits;
    std::string m_shown;
    // Before the pool: its writers use these descriptors until the pool is gone.
    std::unordered_map<std::string, adapters::UniqueFd> m_dir_fds; // guarded by m_mutex
    WriterPool m_pool;
    std::atomic<bool> m_stop{false};
    std::mutex m_mutex; // guards everything below
    ExtractSummary m_summary;
    std::uint64_t m_entries = 0;
    std::unordered_set<std::string> m_made_dirs;
    std::string m_last_parent; // of the last file counted: made already
    int m_last_parent_fd = -1; // its descriptor, from m_dir_fds
    std::unordered_set<std::string> m_explicit_dirs;
    std::vector<std::pair<std::string, std::string>> m_symlinks;
};

} // namespace

Result<ExtractSummary> extract_archives(const std::vector<ArchiveReader*>& readers,
                                        const std::string& destination, const ExtractLimits& limits,
                                        const std::string& shown_name) {
    if (adapters::path_exists(destination)) {
        return fail(ErrorCode::usage, fmt::format("{} already exists", destination),
                    "extract into a new directory");
    }
    const std::string partial = fmt::format("{}.partial.{}", destination, getpid());
    (void)adapters::remove_tree(partial); // a leftover of an earlier process with our pid
    if (mkdir(partial.c_str(), 0700) != 0) {
        return fail(adapters::system_error("cannot create directory", partial, errno));
    }
    auto tree = TreeWriter::open(partial);
    if (!tree) {
        (void)adapters::remove_tree(partial);
        return fail(tree.error());
    }
    Result<ExtractSummary> summary = [&]() -> Result<ExtractSummary> {
        Extractor extractor(*tree, limits, shown_name);
        return extractor.run(readers);
    }();
    if (summary) {
        // The private 0700 mode only guarded the tree while it was incomplete.
        if (chmod(partial.c_str(), 0755) != 0) {
            summary = fail(adapters::system_error("cannot chmod", partial, errno));
        } else if (auto renamed = adapters::rename_path(partial, destination); !renamed) {
            summary = fail(renamed.error());
        }
    }
    if (!summary) {
        (void)adapters::remove_tree(partial);
    }
    return summary;
}

Result<ExtractSummary> extract_archive(ArchiveReader& reader, const std::string& destination,
                                       const ExtractLimits& limits, const std::string& shown_name) {
    return extract_archives({&reader}, destination, limits, shown_name);
}

Result<ExtractSummary> extract_archive_file(const std::string& archive_path,
                                            const std::string& destination,
                                            const ExtractLimits& limits) {
    auto reader = adapters::open_archive_reader(archive_path);
    if (!reader) {
        return fail(reader.error());
    }
    return extract_archive(**reader, destination, limits, archive_path);
}

} // namespace dljob::app
