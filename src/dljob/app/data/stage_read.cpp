#include <dljob/adapters/archive_libarchive.hpp>
#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/adapters/hash_xxhash.hpp>
#include <dljob/app/data/stage_read.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>

namespace dljob::app {
namespace {

// Blocks of 256 KiB: a block is still in the core's L2 cache when it is hashed and written,
// so it crosses memory once. 8 MiB blocks (what dd users pick) made a 105 MB copy from the
// page cache to /dev/shm 1.7x slower here (docs/benchmarks.md).
constexpr std::size_t block_bytes = std::size_t{256} << 10U;

// A copy maps this much of the source at a time: a multiple of any page size, few mmap calls,
// and the mapped pages (which count in the process's RSS) stay bounded whatever the file's size.
constexpr std::size_t map_window_bytes = std::size_t{4} << 20U;

/// One file of a pack read for staging: its size checked before the first byte, every byte
/// counted and hashed as it arrives, and the whole checked against the manifest at the end.
class VerifiedReader {
public:
    static Result<VerifiedReader> open(std::string path, std::uint64_t bytes,
                                       std::string expected_hash, std::string manifest_path) {
        auto fd = adapters::open_for_reading(path);
        if (!fd) {
            return fail(fd.error());
        }
        struct stat st {};
        if (fstat(fd->get(), &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<std::uint64_t>(st.st_size) != bytes) {
            return fail(ErrorCode::io,
                        fmt::format("{} has {} bytes, its manifest says {}: the dataset is "
                                    "truncated or was changed after packing",
                                    path, st.st_size, bytes),
                        "pack the dataset again, or copy it again from where it was made");
        }
        posix_fadvise(fd->get(), 0, 0, POSIX_FADV_SEQUENTIAL);
        return VerifiedReader(std::move(*fd), std::move(path), bytes, std::move(expected_hash),
                              std::move(manifest_path));
    }

    [[nodiscard]] const std::string& path() const { return m_path; }

    /// Up to `size` bytes; 0 at the end of the file.
    Result<std::size_t> read(char* buffer, std::size_t size) {
        auto n = adapters::read_some(m_fd.get(), buffer, size, m_path);
        if (!n) {
            return fail(n.error());
        }
        m_read += *n;
        if (m_read > m_bytes) {
            return fail(ErrorCode::io,
                        fmt::format("{} holds more than the {} bytes its manifest declares", m_path,
                                    m_bytes),
                        "pack the dataset again");
        }
        m_hasher.update(buffer, *n);
        return *n;
    }

    /// Copies the file to `out` (named `to`), hashing each block before it is written. From
    /// maps of `map_window_bytes` where the file can be mapped: write(2) then copies straight
    /// from the page cache, one copy of every byte where read(2) and write(2) make two, and that
    /// is what brings a stage level with dd. Pipes, and file systems that cannot map (FUSE with
    /// direct_io), get read(2). The file's size was checked against the manifest when it was
    /// opened; finish() reads on from the end the manifest declares, so a file that has grown
    /// since is still refused.
    Result<void> copy_to(int out, const std::string& to) {
        for (std::uint64_t offset = 0; offset < m_bytes; offset += map_window_bytes) {
            auto window = adapters::MappedRange::map(
                m_fd.get(), offset, std::min<std::uint64_t>(map_window_bytes, m_bytes - offset),
                m_path);
            if (!window && offset == 0) {
                break; // cannot be mapped: read it below
            }
            if (!window) {
                return fail(window.error());
            }
            // The kernel reads the next window ahead while this one is written: from a network
            // file system the two overlap.
            if (const std::uint64_t next = offset + window->size(); next < m_bytes) {
                posix_fadvise(
                    m_fd.get(), static_cast<off_t>(next),
                    static_cast<off_t>(std::min<std::uint64_t>(map_window_bytes, m_bytes - next)),
                    POSIX_FADV_WILLNEED);
            }
            for (std::size_t at = 0; at < window->size(); at += block_bytes) {
                const char* block = window->data() + at;
                const std::size_t size = std::min(block_bytes, window->size() - at);
                // The hash touches the block's pages first: a page that cannot be read (the
                // file shrank, the file system failed) is an error here, not a SIGBUS.
                DLJOB_TRY(
                    adapters::guard_mapped_reads([&] { m_hasher.update(block, size); }, m_path));
                DLJOB_TRY(adapters::write_all(out, block, size, to));
                m_read += size;
            }
        }
        if (m_read == m_bytes) {
            if (lseek(m_fd.get(), static_cast<off_t>(m_read), SEEK_SET) < 0) {
                return fail(adapters::system_error("cannot seek in", m_path, errno));
            }
            return {};
        }
        // new char[] leaves the bytes unset, as make_unique_for_overwrite would (GCC 11+;
        // the release is built with GCC 10).
        const std::unique_ptr<char[]> buffer(new char[block_bytes]); // NOLINT
        for (;;) {
            auto n = read(buffer.get(), block_bytes);
            if (!n) {
                return fail(n.error());
            }
            if (*n == 0) {
                return {};
            }
            DLJOB_TRY(adapters::write_all(out, buffer.get(), *n, to));
        }
    }

    /// Reads whatever is left (a tar reader stops at the end-of-archive blocks), then checks
    /// the size and the hash.
    Result<void> finish() {
        std::array<char, std::size_t{1} << 12U> rest; // NOLINT: filled by read()
        for (;;) {
            auto n = read(rest.data(), rest.size());
            if (!n) {
                return fail(n.error());
            }
            if (*n == 0) {
                break;
            }
        }
        if (m_read != m_bytes) {
            return fail(ErrorCode::io,
                        fmt::format("{} ended after {} bytes, its manifest says {}: the dataset "
                                    "is truncated",
                                    m_path, m_read, m_bytes),
                        "pack the dataset again, or copy it again from where it was made");
        }
        const std::string actual = m_hasher.hex_digest();
        if (actual != m_expected_hash) {
            return fail(ErrorCode::io,
                        fmt::format("{} is corrupted: its XXH3-128 is {}, {} says {}", m_path,
                                    actual, m_manifest_path, m_expected_hash),
                        "the dataset changed or was damaged after packing: pack it again");
        }
        return {};
    }

private:
    VerifiedReader(adapters::UniqueFd fd, std::string path, std::uint64_t bytes,
                   std::string expected_hash, std::string manifest_path)
        : m_fd(std::move(fd)), m_path(std::move(path)), m_bytes(bytes),
          m_expected_hash(std::move(expected_hash)), m_manifest_path(std::move(manifest_path)) {}

    adapters::UniqueFd m_fd;
    std::string m_path;
    std::uint64_t m_bytes;
    std::string m_expected_hash;
    std::string m_manifest_path;
    std::uint64_t m_read = 0;
    adapters::Xxh3Hasher m_hasher;
};

/// See open_pack_archive. Every file is verified against the manifest as it is read, so
/// extraction can read the pack where it lies, with no copy first.
class ShardedArchiveReader final : public PackArchiveReader {
public:
    ShardedArchiveReader(std::string directory, std::vector<PackFile> files,
                         std::string manifest_path)
        : m_directory(std::move(directory)), m_files(std::move(files)),
          m_manifest_path(std::move(manifest_path)) {}

    Result<std::optional<ArchiveEntry>> next() override {
        for (;;) {
            if (!m_current) {
                if (m_next_file == m_files.size()) {
                    return std::optional<ArchiveEntry>();
                }
                DLJOB_TRY(open_next());
            }
            auto entry = m_current->next();
            if (!entry) {
                return explain(entry.error());
            }
            if (entry->has_value()) {
                return entry;
            }
            m_current.reset();
            DLJOB_TRY(m_file->finish());
            m_bytes_read += m_files[m_next_file - 1].bytes;
            m_file.reset();
        }
    }
    Result<std::size_t> read(char* buffer, std::size_t size) override {
        if (!m_current) {
            return std::size_t{0};
        }
        auto n = m_current->read(buffer, size);
        if (!n) {
            return explain(n.error());
        }
        return n;
    }

    [[nodiscard]] std::uint64_t bytes_read() const override { return m_bytes_read; }

private:
    Result<void> open_next() {
        const PackFile& file = m_files[m_next_file++];
        auto opened = VerifiedReader::open(m_directory + "/" + file.name, file.bytes, file.hash,
                                           m_manifest_path);
        if (!opened) {
            return fail(opened.error());
        }
        m_file = std::make_unique<VerifiedReader>(std::move(*opened));
        VerifiedReader* source = m_file.get();
        auto reader = adapters::open_archive_reader(
            [source](char* buffer, std::size_t size) { return source->read(buffer, size); },
            source->path(), block_bytes);
        if (!reader) {
            return explain(reader.error());
        }
        m_current = std::move(*reader);
        return {};
    }

    Unexpected explain(const Error& error) {
        if (m_file) {
            if (auto verified = m_file->finish(); !verified) {
                return fail(verified.error());
            }
        }
        return fail(error);
    }

    std::string m_directory;
    std::vector<PackFile> m_files;
    std::string m_manifest_path;
    std::size_t m_next_file = 0;
    std::unique_ptr<VerifiedReader> m_file;
    std::unique_ptr<ArchiveReader> m_current;
    std::uint64_t m_bytes_read = 0;
};

} // namespace

std::vector<PackFile> data_files(const DatasetManifest& manifest) {
    std::vector<PackFile> files;
    files.reserve(manifest.shards.size());
    for (const DatasetShard& shard : manifest.shards) {
        files.push_back({shard.file, shard.bytes, shard.hash});
    }
    return files;
}

namespace {

std::vector<PackFile> table_files(const DatasetManifest& manifest) {
    std::vector<PackFile> files{{dataset_index_name, manifest.index_bytes, manifest.index_hash}};
    if (manifest.compressed()) {
        files.push_back({dataset_chunks_name, manifest.chunks_bytes, manifest.chunks_hash});
    }
    return files;
}

} // namespace

Result<void> verify_pack_tables(const std::string& dataset, const DatasetManifest& manifest) {
    const std::string manifest_path = dataset + "/" + dataset_manifest_name;
    for (const PackFile& file : table_files(manifest)) {
        auto in =
            VerifiedReader::open(dataset + "/" + file.name, file.bytes, file.hash, manifest_path);
        if (!in) {
            return fail(in.error());
        }
        DLJOB_TRY(in->finish());
    }
    return {};
}

Result<std::uint64_t> copy_pack(const std::string& dataset, const std::string& destination,
                                const DatasetManifest& manifest, const std::string& manifest_text) {
    const std::string manifest_path = dataset + "/" + dataset_manifest_name;
    std::vector<PackFile> files = data_files(manifest);
    for (PackFile& table : table_files(manifest)) {
        files.push_back(std::move(table));
    }
    std::uint64_t copied = 0;
    for (const PackFile& file : files) {
        auto in =
            VerifiedReader::open(dataset + "/" + file.name, file.bytes, file.hash, manifest_path);
        if (!in) {
            return fail(in.error());
        }
        const std::string to = destination + "/" + file.name;
        auto out = adapters::create_file(to);
        if (!out) {
            return fail(out.error());
        }
        DLJOB_TRY(in->copy_to(out->get(), to));
        DLJOB_TRY(in->finish());
        copied += file.bytes;
    }
    DLJOB_TRY(adapters::write_text_file(destination + "/" + dataset_manifest_name, manifest_text));
    return copied + manifest_text.size();
}

std::unique_ptr<PackArchiveReader>
open_pack_archive(std::string directory, std::vector<PackFile> files, std::string manifest_path) {
    return std::make_unique<ShardedArchiveReader>(std::move(directory), std::move(files),
                                                  std::move(manifest_path));
}

} // namespace dljob::app
