#include <dljob/adapters/archive_libarchive.hpp>
#include <dljob/adapters/caffe_records.hpp>
#include <dljob/adapters/compress_zstd.hpp>
#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/adapters/hash_xxhash.hpp>
#include <dljob/adapters/process_boost.hpp>
#include <dljob/app/data/caffe_datum.hpp>
#include <dljob/app/data/pack.hpp>

#include <dljob_build_info.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dljob::app {
namespace {

namespace fs = std::filesystem;
using adapters::UniqueFd;

constexpr std::size_t copy_buffer_bytes = std::size_t{1} << 20U;
constexpr std::size_t index_flush_bytes = std::size_t{1} << 20U;

/// Appends index lines to index.tsv through a buffer, hashing as it goes.
class IndexWriter {
public:
    IndexWriter(UniqueFd fd, std::string path) : m_fd(std::move(fd)), m_path(std::move(path)) {}

    Result<void> add_line(const std::string& line) {
        m_buffer += line;
        m_buffer += '\n';
        if (m_buffer.size() >= index_flush_bytes) {
            return flush();
        }
        return {};
    }
    Result<void> flush() {
        m_hasher.update(m_buffer.data(), m_buffer.size());
        m_bytes += m_buffer.size();
        auto written = adapters::write_all(m_fd.get(), m_buffer.data(), m_buffer.size(), m_path);
        m_buffer.clear();
        return written;
    }
    [[nodiscard]] int fd() const { return m_fd.get(); }
    [[nodiscard]] std::string hash() const { return m_hasher.hex_digest(); }
    [[nodiscard]] std::uint64_t bytes() const { return m_bytes; }

private:
    UniqueFd m_fd;
    std::string m_path;
    std::string m_buffer;
    adapters::Xxh3Hasher m_hasher;
    std::uint64_t m_bytes = 0;
};

Result<void> sync_file(int fd, const std::string& path) {
    // The pack is the one durable artefact of the data path (it lives on the shared file
    // system for many jobs), so it reaches the disk before the rename publishes it.
    if (fsync(fd) != 0) {
        return fail(adapters::system_error("cannot flush", path, errno));
    }
    return {};
}

/// The pack's data files: one tar stream per shard, each written plain or through seekable
/// zstd, each hashed as stored, and all of them together into the content hash.
class DataFiles {
public:
    DataFiles(std::string directory, const PackRequest& request, IndexWriter* chunks)
        : m_directory(std::move(directory)), m_sharded(request.shard_bytes != 0),
          m_compressed(request.compression != "none"), m_level(request.compression_level),
          m_shard_bytes(request.shard_bytes), m_chunks(chunks) {}

    Result<void> open() { return open_shard(); }
    adapters::TarWriter& tar() { return *m_open->tar; }
    [[nodiscard]] std::uint32_t shard() const { return m_shard; }

    /// Starts the next shard when a member of `tar_bytes` (header, data and padding) would take
    /// this one past the shard size; a member alone in its shard may exceed it, since members
    /// are never split.
    Result<void> make_room(std::uint64_t tar_bytes) {
        constexpr std::uint64_t end_of_archive = 1024;
        if (!m_sharded || m_open->members == 0 ||
            round_up(m_open->tar->position(), tar_block) + tar_bytes + end_of_archive <=
                m_shard_bytes) {
            ++m_open->members;
            return {};
        }
        DLJOB_TRY(close_shard());
        ++m_shard;
        DLJOB_TRY(open_shard());
        ++m_open->members;
        return {};
    }

    /// Closes the last shard and records every data file in `manifest`.
    Result<void> finish(DatasetManifest& manifest) {
        DLJOB_TRY(close_shard());
        manifest.shards = m_done;
        manifest.archive_bytes = 0;
        for (const DatasetShard& shard : m_done) {
            manifest.archive_bytes += shard.bytes;
        }
        manifest.content_hash = m_content.hex_digest();
        return {};
    }

    static constexpr std::uint64_t tar_block = 512;

private:
    struct OpenShard {
        std::string path;
        UniqueFd fd;
        adapters::Xxh3Hasher hash;
        std::uint64_t stored = 0;
        std::uint64_t members = 0;
        std::optional<adapters::ZstdFrameWriter> zstd;
        std::optional<adapters::TarWriter> tar;
    };

    Result<void> open_shard() {
        auto open = std::make_unique<OpenShard>();
        open->path =
            m_directory + "/" +
            (m_sharded || m_compressed ? dataset_shard_file_name(m_shard, m_sharded, m_compressed)
                                       : std::string(dataset_archive_name));
        auto fd = adapters::create_file(open->path);
        if (!fd) {
            return fail(fd.error());
        }
        open->fd = std::move(*fd);
        OpenShard* raw = open.get();
        adapters::Xxh3Hasher* content = &m_content;
        auto store = [raw, content](const char* data, std::size_t size) -> Result<void> {
            raw->hash.update(data, size);
            content->update(data, size);
            raw->stored += size;
            return adapters::write_all(raw->fd.get(), data, size, raw->path);
        };
        adapters::TarWriter::Sink tar_sink = store;
        if (m_compressed) {
            IndexWriter* chunks = m_chunks;
            const std::uint32_t shard = m_shard;
            auto frame_done = [chunks, shard](const adapters::ZstdFrame& f) -> Result<void> {
                return chunks->add_line(format_chunk_line(
                    {shard, f.raw_offset, f.raw_size, f.stored_offset, f.stored_size}));
            };
            auto zstd = adapters::ZstdFrameWriter::open(m_level, pack_chunk_bytes, store,
                                                        frame_done, open->path);
            if (!zstd) {
                return fail(zstd.error());
            }
            open->zstd.emplace(std::move(*zstd));
            tar_sink = [raw](const char* data, std::size_t size) {
                return raw->zstd->write(data, size);
            };
        }
        auto tar = adapters::TarWriter::open(tar_sink, open->path);
        if (!tar) {
            return fail(tar.error());
        }
        open->tar.emplace(std::move(*tar));
        m_open = std::move(open);
        return {};
    }

    Result<void> close_shard() {
        auto tar_bytes = m_open->tar->finish();
        if (!tar_bytes) {
            return fail(tar_bytes.error());
        }
        if (m_open->zstd) {
            auto stored = m_open->zstd->finish();
            if (!stored) {
                return fail(stored.error());
            }
        }
        DLJOB_TRY(sync_file(m_open->fd.get(), m_open->path));
        m_done.push_back({m_open->path.substr(m_directory.size() + 1), m_open->stored,
                          m_open->hash.hex_digest(), *tar_bytes});
        m_open.reset();
        return {};
    }

    std::string m_directory;
    bool m_sharded;
    bool m_compressed;
    int m_level;
    std::uint64_t m_shard_bytes;
    IndexWriter* m_chunks;
    std::uint32_t m_shard = 0;
    // Before m_open: an abandoned tar writer still flushes through the sinks as it is destroyed.
    adapters::Xxh3Hasher m_content;
    std::vector<DatasetShard> m_done;
    std::unique_ptr<OpenShard> m_open;
};

/// Tar bytes a member takes at most: its data padded to 512-byte blocks, its header, and a pax
/// header (with its own header) when the path is too long for ustar.
std::uint64_t member_tar_bytes(const std::string& path, std::uint64_t size) {
    constexpr std::uint64_t block = DataFiles::tar_block;
    constexpr std::uint64_t pax_overhead = 128;
    const std::uint64_t pax =
        path.size() >= 100 ? block + round_up(path.size() + pax_overhead, block) : 0;
    return block + pax + round_up(size, block);
}

class Packer {
public:
    Packer(DataFiles& data, IndexWriter& index, DatasetManifest& manifest,
           const std::function<void(const PackProgress&)>& progress)
        : m_data(data), m_index(index), m_manifest(manifest), m_progress(progress),
          m_buffer(copy_buffer_bytes) {}

    Result<void> add_directory(const std::string& member) {
        DLJOB_TRY(m_data.make_room(member_tar_bytes(member, 0)));
        DLJOB_TRY(m_data.tar().add_directory(member));
        ++m_manifest.directories;
        note_path(member);
        IndexEntry entry{IndexEntryType::directory, 0, 0, std::nullopt, member};
        entry.shard = m_data.shard();
        return m_index.add_line(format_index_line(entry, m_manifest.version));
    }

    /// `fd` is `disk_path` opened for reading.
    Result<void> add_file(const UniqueFd& fd, const std::string& disk_path,
                          const std::string& member, std::optional<std::int64_t> label) {
        struct stat st {};
        if (fstat(fd.get(), &st) != 0) {
            return fail(adapters::system_error("cannot stat", disk_path, errno));
        }
        posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
        const auto size = static_cast<std::uint64_t>(st.st_size);
        DLJOB_TRY(m_data.make_room(member_tar_bytes(member, size)));
        auto offset = m_data.tar().begin_file(member, size, (st.st_mode & 0111U) != 0);
        if (!offset) {
            return fail(offset.error());
        }
        std::uint64_t copied = 0;
        while (copied < size) {
            const std::size_t want =
                static_cast<std::size_t>(std::min<std::uint64_t>(m_buffer.size(), size - copied));
            auto n = adapters::read_full(fd.get(), m_buffer.data(), want, disk_path);
            if (!n) {
                return fail(n.error());
            }
            if (*n != want) {
                return fail(ErrorCode::io,
                            fmt::format("{} shrank while it was being packed ({} of {} bytes "
                                        "read)",
                                        disk_path, copied + *n, size),
                            "pack a tree that nothing writes to");
            }
            DLJOB_TRY(m_data.tar().write_data(m_buffer.data(), *n));
            copied += *n;
        }
        ++m_manifest.files;
        m_manifest.payload_bytes += size;
        m_manifest.allocated_bytes += round_up(size, dataset_accounting_block);
        if (label) {
            m_manifest.labelled = true;
        }
        note_path(member);
        IndexEntry entry{IndexEntryType::file, *offset, size, label, member};
        entry.shard = m_data.shard();
        DLJOB_TRY(m_index.add_line(format_index_line(entry, m_manifest.version)));
        if (m_progress) {
            m_progress({m_manifest.files, m_manifest.payload_bytes});
        }
        return {};
    }

    /// Depth first, names sorted byte-wise in each directory: the same tree gives the same
    /// archive everywhere.
    Result<void> add_tree(const std::string& disk_dir, const std::string& prefix) {
        std::vector<std::string> names;
        {
            DIR* dir = opendir(disk_dir.c_str());
            if (dir == nullptr) {
                return fail(adapters::system_error("cannot list", disk_dir, errno));
            }
            while (const dirent* entry = readdir(dir)) {
                const std::string name = entry->d_name;
                if (name != "." && name != "..") {
                    names.push_back(name);
                }
            }
            closedir(dir);
        }
        std::sort(names.begin(), names.end());
        for (const std::string& name : names) {
            const std::string disk_path = fmt::format("{}/{}", disk_dir, name);
            auto member =
                normalize_member_path(prefix.empty() ? name : fmt::format("{}/{}", prefix, name));
            if (!member) {
                return fail(ErrorCode::config_invalid,
                            fmt::format("cannot pack {}: {}", disk_path, member.error().message),
                            "rename the file");
            }
            struct stat st {};
            if (lstat(disk_path.c_str(), &st) != 0) {
                return fail(adapters::system_error("cannot stat", disk_path, errno));
            }
            if (S_ISDIR(st.st_mode)) {
                DLJOB_TRY(add_directory(*member));
                DLJOB_TRY(add_tree(disk_path, *member));
            } else if (S_ISREG(st.st_mode)) {
                auto fd = adapters::open_regular_below(disk_dir, name);
                if (!fd) {
                    return fail(fd.error());
                }
                DLJOB_TRY(add_file(*fd, disk_path, *member, std::nullopt));
            } else {
                return fail(ErrorCode::config_invalid,
                            fmt::format("cannot pack {}: it is a {}, and a pack holds only "
                                        "regular files and directories",
                                        disk_path, adapters::file_type_name(st.st_mode)),
                            "copy the link's target into the tree, or remove the entry");
            }
        }
        return {};
    }

    Result<void> add_list(const std::string& list_path, const std::string& root) {
        std::ifstream list(list_path);
        if (!list) {
            return fail(ErrorCode::not_found, fmt::format("cannot read {}", list_path));
        }
        std::string line;
        std::uint64_t line_number = 0;
        while (std::getline(list, line)) {
            ++line_number;
            while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
                line.pop_back();
            }
            if (line.empty() || line.front() == '#') {
                continue;
            }
            // Caffe's format: the path, whitespace, an integer label. The label is whatever
            // follows the last space, so paths may contain spaces.
            std::string path = line;
            std::optional<std::int64_t> label;
            if (const auto space = line.find_last_of(" \t"); space != std::string::npos) {
                std::int64_t value = 0;
                const std::string_view tail(line.c_str() + space + 1, line.size() - space - 1);
                const auto [ptr, ec] =
                    std::from_chars(tail.data(), tail.data() + tail.size(), value);
                if (ec != std::errc{} || ptr != tail.data() + tail.size()) {
                    return fail(ErrorCode::config_invalid,
                                fmt::format("{}:{}: expected 'path label' with an integer "
                                            "label, got '{}'",
                                            list_path, line_number, line));
                }
                label = value;
                path = line.substr(0, line.find_last_not_of(" \t", space) + 1);
            }
            auto member = normalize_member_path(path);
            if (!member) {
                return fail(
                    ErrorCode::config_invalid,
                    fmt::format("{}:{}: {}", list_path, line_number, member.error().message),
                    "list paths relative to --root");
            }
            // A member is named once: a second line for it packed a tar that tar -x and
            // stage-data (which refuses two entries with one path) could not extract.
            if (const auto [it, inserted] = m_listed.emplace(*member, line_number); !inserted) {
                return fail(ErrorCode::config_invalid,
                            fmt::format("{}:{}: {} is already listed on line {}", list_path,
                                        line_number, *member, it->second),
                            "list each file once");
            }
            // The same rule as a tree: no symbolic link is followed, in the file or in a
            // directory on its way, so a list packs only what lies inside --root.
            auto fd = adapters::open_regular_below(root, *member);
            if (!fd) {
                Error error = fd.error();
                error.message = fmt::format("{}:{}: {}", list_path, line_number, error.message);
                if (error.hint.empty()) {
                    error.hint = "list paths relative to --root";
                }
                return fail(std::move(error));
            }
            DLJOB_TRY(add_file(*fd, root + "/" + *member, *member, label));
        }
        if (m_manifest.files == 0) {
            return fail(ErrorCode::config_invalid, fmt::format("{} lists no files", list_path),
                        "write one 'relative/path label' per line");
        }
        return {};
    }

    /// Caffe's LMDB or LevelDB of Datums (`kind` names which in messages): each record, in key
    /// order, becomes an image member (NNNNNNNN.pgm, .ppm, .png or .jpg, numbered in that
    /// order) with its label, the members dltrain reads from a pack (docs/data.md), so the pack
    /// holds the images dltrain reads from the database. Both keep keys in bytewise order, so
    /// the same records pack the same from either.
    template <typename ForEach>
    Result<void> add_datums(const char* kind, const std::string& directory, ForEach for_each) {
        DLJOB_TRY(for_each(
            directory,
            [&](std::uint64_t index, std::string_view key, std::string_view value) -> Result<void> {
                auto member = datum_member(value);
                if (!member) {
                    Error error = member.error();
                    error.message = fmt::format("{} {}: record {} (key '{}'): {}", kind, directory,
                                                index, key, error.message);
                    return fail(std::move(error));
                }
                return add_bytes(fmt::format("{:08}.{}", index, member->extension), member->bytes,
                                 member->label);
            }));
        if (m_manifest.files == 0) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("{} {} holds no records: nothing to pack", kind, directory));
        }
        return {};
    }

private:
    Result<void> add_bytes(const std::string& member, const std::string& bytes,
                           std::optional<std::int64_t> label) {
        DLJOB_TRY(m_data.make_room(member_tar_bytes(member, bytes.size())));
        auto offset = m_data.tar().begin_file(member, bytes.size(), false);
        if (!offset) {
            return fail(offset.error());
        }
        DLJOB_TRY(m_data.tar().write_data(bytes.data(), bytes.size()));
        ++m_manifest.files;
        m_manifest.payload_bytes += bytes.size();
        m_manifest.allocated_bytes += round_up(bytes.size(), dataset_accounting_block);
        if (label) {
            m_manifest.labelled = true;
        }
        note_path(member);
        IndexEntry entry{IndexEntryType::file, *offset, bytes.size(), label, member};
        entry.shard = m_data.shard();
        DLJOB_TRY(m_index.add_line(format_index_line(entry, m_manifest.version)));
        if (m_progress) {
            m_progress({m_manifest.files, m_manifest.payload_bytes});
        }
        return {};
    }

    void note_path(const std::string& member) {
        m_manifest.max_path_length =
            std::max<std::uint64_t>(m_manifest.max_path_length, member.size());
    }
    DataFiles& m_data;
    IndexWriter& m_index;
    DatasetManifest& m_manifest;
    const std::function<void(const PackProgress&)>& m_progress;
    std::vector<char> m_buffer;
    std::unordered_map<std::string, std::uint64_t> m_listed; // member -> list line
};

Result<DatasetManifest> write_pack(const PackRequest& request, const std::string& partial,
                                   bool is_tree,
                                   const std::function<void(const PackProgress&)>& progress) {
    DatasetManifest manifest;
    const bool compressed = request.compression != "none";
    if (compressed || request.shard_bytes != 0) {
        manifest.version = dataset_layout_format_version;
        manifest.compression = request.compression;
        manifest.compression_level = compressed ? request.compression_level : 0;
        manifest.chunk_bytes = compressed ? pack_chunk_bytes : 0;
        manifest.shard_bytes = request.shard_bytes;
    }
    const std::string index_path = partial + "/" + dataset_index_name;
    auto index_fd = adapters::create_file(index_path);
    if (!index_fd) {
        return fail(index_fd.error());
    }
    std::optional<IndexWriter> chunks;
    const std::string chunks_path = partial + "/" + dataset_chunks_name;
    if (compressed) {
        auto chunks_fd = adapters::create_file(chunks_path);
        if (!chunks_fd) {
            return fail(chunks_fd.error());
        }
        chunks.emplace(std::move(*chunks_fd), chunks_path);
        DLJOB_TRY(chunks->add_line(chunks_header_line));
    }
    DataFiles data(partial, request, chunks ? &*chunks : nullptr);
    DLJOB_TRY(data.open());
    IndexWriter index(std::move(*index_fd), index_path);
    DLJOB_TRY(index.add_line(manifest.version == dataset_format_version ? index_header_line
                                                                        : index_header_line_v2));

    manifest.source = fs::absolute(request.source).lexically_normal().string();
    manifest.created_by = fmt::format("dljob {}", build_info::version);
    Packer packer(data, index, manifest, progress);
    if (is_tree && adapters::is_lmdb_directory(request.source)) {
        DLJOB_TRY(packer.add_datums("LMDB", request.source, adapters::for_each_lmdb_record));
    } else if (is_tree && adapters::is_leveldb_directory(request.source)) {
        DLJOB_TRY(packer.add_datums("LevelDB", request.source, adapters::for_each_leveldb_record));
    } else if (is_tree) {
        DLJOB_TRY(packer.add_tree(request.source, ""));
        if (manifest.files == 0 && manifest.directories == 0) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("{} is an empty directory: nothing to pack", request.source));
        }
    } else {
        const std::string root = request.list_root.empty()
                                     ? fs::path(request.source).parent_path().string()
                                     : request.list_root;
        DLJOB_TRY(packer.add_list(request.source, root.empty() ? "." : root));
    }
    DLJOB_TRY(data.finish(manifest));
    DLJOB_TRY(index.flush());
    DLJOB_TRY(sync_file(index.fd(), index_path));
    manifest.index_hash = index.hash();
    manifest.index_bytes = index.bytes();
    if (chunks) {
        DLJOB_TRY(chunks->flush());
        DLJOB_TRY(sync_file(chunks->fd(), chunks_path));
        manifest.chunks_hash = chunks->hash();
        manifest.chunks_bytes = chunks->bytes();
    }
    DLJOB_TRY(adapters::write_text_file(partial + "/" + dataset_manifest_name, to_json(manifest)));
    return manifest;
}

} // namespace

Result<PackSummary> pack_dataset(const PackRequest& request,
                                 const std::function<void(const PackProgress&)>& progress) {
    struct stat st {};
    if (stat(request.source.c_str(), &st) != 0) {
        return fail(ErrorCode::not_found,
                    fmt::format("{}: {}", request.source, adapters::errno_text(errno)),
                    "give a directory, or a list file of 'relative/path label' lines");
    }
    const bool is_tree = S_ISDIR(st.st_mode);
    if (!is_tree && !S_ISREG(st.st_mode)) {
        // A FIFO here would be read as a list and wait forever for a writer.
        return fail(ErrorCode::usage,
                    fmt::format("{} is a {}, expected a directory or a list file", request.source,
                                adapters::file_type_name(st.st_mode)),
                    "give a directory, or a list file of 'relative/path label' lines");
    }
    if (request.compression != "none" && request.compression != "zstd") {
        return fail(ErrorCode::usage, fmt::format("unknown compression '{}' (known: none, zstd)",
                                                  request.compression));
    }
    if (request.output.empty()) {
        return fail(ErrorCode::usage, "no output given", "use -o DATASET");
    }
    if (adapters::path_exists(request.output)) {
        return fail(ErrorCode::usage, fmt::format("{} already exists", request.output),
                    "remove it first, or choose another -o");
    }
    std::error_code ec;
    const fs::path source_abs = fs::weakly_canonical(request.source, ec);
    const fs::path output_abs = fs::weakly_canonical(request.output, ec);
    if (is_tree) {
        const auto [source_end, output_it] = std::mismatch(source_abs.begin(), source_abs.end(),
                                                           output_abs.begin(), output_abs.end());
        if (source_end == source_abs.end()) {
            return fail(ErrorCode::usage,
                        fmt::format("{} is inside the tree being packed ({})", request.output,
                                    request.source),
                        "write the dataset outside the source tree");
        }
    }
    const std::string partial = fmt::format("{}.partial.{}", request.output, getpid());
    if (mkdir(partial.c_str(), 0755) != 0) {
        return fail(adapters::system_error("cannot create directory", partial, errno));
    }
    // A directory's Lustre layout is inherited by the files created in it, data.tar included.
    std::string striping;
    const std::string filesystem = adapters::filesystem_kind(partial).name;
    if (const auto command = lustre_stripe_command(filesystem, partial); !command.empty()) {
        adapters::BoostProcessRunner runner;
        ProcessRequest stripe;
        stripe.argv = command;
        stripe.timeout = std::chrono::seconds(30);
        auto ran = runner.run(stripe);
        striping = !ran                  ? "not striped: lfs is not available"
                   : ran->exit_code != 0 ? fmt::format("not striped: lfs setstripe failed: {}",
                                                       ran->err.substr(0, ran->err.find('\n')))
                                         : "striped for Lustre: 1 MiB stripes over 4 OSTs";
    }
    auto manifest = write_pack(request, partial, is_tree, progress);
    if (!manifest) {
        (void)adapters::remove_tree(partial);
        return fail(manifest.error());
    }
    if (auto renamed = adapters::rename_path(partial, request.output); !renamed) {
        (void)adapters::remove_tree(partial);
        return fail(renamed.error());
    }
    return PackSummary{request.output, std::move(*manifest), striping};
}

Result<void> parse_compression(const std::string& spec, PackRequest& request) {
    const auto colon = spec.find(':');
    const std::string name = spec.substr(0, colon);
    if (name == "none" && colon == std::string::npos) {
        request.compression = "none";
        return {};
    }
    if (name != "zstd") {
        return fail(ErrorCode::usage,
                    fmt::format("--compress {}: unknown compression (known: none, zstd, "
                                "zstd:LEVEL)",
                                spec),
                    "use --compress zstd, or zstd:LEVEL for a level from 1 to 19");
    }
    int level = 3;
    if (colon != std::string::npos) {
        const std::string text = spec.substr(colon + 1);
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), level);
        if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty() ||
            level < adapters::zstd_min_level() || level > adapters::zstd_max_level()) {
            return fail(ErrorCode::usage,
                        fmt::format("--compress {}: the level must be an integer from {} to {}",
                                    spec, adapters::zstd_min_level(), adapters::zstd_max_level()),
                        "use --compress zstd, or zstd:LEVEL for a level from 1 to 19");
        }
    }
    request.compression = "zstd";
    request.compression_level = level;
    return {};
}

std::vector<std::string> lustre_stripe_command(const std::string& filesystem,
                                               const std::string& directory) {
    if (filesystem != "lustre") {
        return {};
    }
    return {"lfs", "setstripe", "--stripe-size", "1M", "--stripe-count", "4", directory};
}

} // namespace dljob::app
