#include <dljob/adapters/archive_libarchive.hpp>
#include <dljob/adapters/filesystem_posix.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>

#include <cerrno>
#include <optional>
#include <utility>
#include <vector>

namespace dljob::adapters {
// Named, not anonymous: TarWriter::State (declared in the header) holds these handles, and a
// member whose type has internal linkage is what GCC warns about in a unity build
// (-Wsubobject-linkage), where this file is included into another.
namespace libarchive_handles {

struct ArchiveDeleter {
    void operator()(archive* handle) const noexcept { archive_read_free(handle); }
};
struct WriteArchiveDeleter {
    void operator()(archive* handle) const noexcept { archive_write_free(handle); }
};
struct EntryDeleter {
    void operator()(archive_entry* entry) const noexcept { archive_entry_free(entry); }
};
using ReadHandle = std::unique_ptr<archive, ArchiveDeleter>;
using WriteHandle = std::unique_ptr<archive, WriteArchiveDeleter>;
using EntryHandle = std::unique_ptr<archive_entry, EntryDeleter>;

} // namespace libarchive_handles

using libarchive_handles::EntryHandle;
using libarchive_handles::ReadHandle;
using libarchive_handles::WriteHandle;

namespace {

// 2000-01-01T00:00:00Z: a fixed mtime keeps packs reproducible; not 0, which some tools show
// as suspicious.
constexpr time_t fixed_mtime = 946684800;
constexpr std::size_t read_block_bytes = std::size_t{1} << 20U;

std::string archive_message(archive* handle) {
    const char* text = archive_error_string(handle);
    return text != nullptr ? text : "unknown libarchive error";
}

ArchiveEntryType entry_type(archive_entry* entry) {
    if (archive_entry_hardlink(entry) != nullptr) {
        return ArchiveEntryType::hardlink;
    }
    switch (archive_entry_filetype(entry)) {
    case AE_IFREG:
        return ArchiveEntryType::file;
    case AE_IFDIR:
        return ArchiveEntryType::directory;
    case AE_IFLNK:
        return ArchiveEntryType::symlink;
    case AE_IFCHR:
        return ArchiveEntryType::character_device;
    case AE_IFBLK:
        return ArchiveEntryType::block_device;
    case AE_IFIFO:
        return ArchiveEntryType::fifo;
    case AE_IFSOCK:
        return ArchiveEntryType::socket;
    default:
        return ArchiveEntryType::other;
    }
}

/// The bytes of an archive that is not read from a plain descriptor: libarchive asks for one
/// block at a time and is handed the source's buffer. A source error is kept whole, so the
/// reader reports it instead of libarchive's generic "read error".
struct SourceState {
    ByteSource source;
    std::vector<char> buffer;
    std::optional<Error> error;

    static la_ssize_t read_callback(archive* handle, void* client, const void** block) {
        auto* self = static_cast<SourceState*>(client);
        auto n = self->source(self->buffer.data(), self->buffer.size());
        if (!n) {
            archive_set_error(handle, EIO, "%s", n.error().message.c_str());
            self->error = n.error();
            return -1;
        }
        *block = self->buffer.data();
        return static_cast<la_ssize_t>(*n);
    }
};

class LibarchiveReader final : public ArchiveReader {
public:
    LibarchiveReader(ReadHandle handle, UniqueFd fd, std::unique_ptr<SourceState> source,
                     std::string path)
        : m_fd(std::move(fd)), m_source(std::move(source)), m_handle(std::move(handle)),
          m_path(std::move(path)) {}

    Result<std::optional<ArchiveEntry>> next() override {
        archive_entry* entry = nullptr;
        const int status = archive_read_next_header(m_handle.get(), &entry);
        if (status == ARCHIVE_EOF) {
            return std::optional<ArchiveEntry>{};
        }
        if (status < ARCHIVE_WARN) {
            return error("cannot read the next header of");
        }
        ArchiveEntry result;
        const char* path = archive_entry_pathname(entry);
        result.path = path != nullptr ? path : "";
        result.type = entry_type(entry);
        result.size = archive_entry_size_is_set(entry) != 0
                          ? static_cast<std::uint64_t>(archive_entry_size(entry))
                          : 0;
        result.mode = static_cast<std::uint32_t>(archive_entry_mode(entry)) & 07777U;
        if (const char* link = archive_entry_hardlink(entry)) {
            result.link_target = link;
        } else if (const char* symlink = archive_entry_symlink(entry)) {
            result.link_target = symlink;
        }
        return std::optional<ArchiveEntry>{std::move(result)};
    }

    Result<std::size_t> read(char* buffer, std::size_t size) override {
        const la_ssize_t n = archive_read_data(m_handle.get(), buffer, size);
        if (n < 0) {
            return error("cannot read member data of");
        }
        return static_cast<std::size_t>(n);
    }

private:
    Unexpected error(const char* what) {
        if (m_source && m_source->error) {
            return fail(*m_source->error);
        }
        return fail(ErrorCode::io,
                    fmt::format("{} {}: {}", what, m_path, archive_message(m_handle.get())),
                    "the archive is truncated or damaged: pack or fetch it again");
    }
    // Declared before the handle: archive_read_free may still read from them.
    UniqueFd m_fd;
    std::unique_ptr<SourceState> m_source;
    ReadHandle m_handle;
    std::string m_path;
};

ReadHandle new_tar_reader() {
    ReadHandle handle(archive_read_new());
    if (!handle) {
        return handle;
    }
    // Only tar and the usual compressors: most of libarchive's CVEs sit in readers of formats
    // dljob never needs (RAR, 7-Zip, ISO 9660...).
    archive_read_support_format_tar(handle.get());
    archive_read_support_format_gnutar(handle.get());
    archive_read_support_filter_gzip(handle.get());
    archive_read_support_filter_bzip2(handle.get());
    archive_read_support_filter_xz(handle.get());
    archive_read_support_filter_zstd(handle.get());
    archive_read_support_filter_lz4(handle.get());
    return handle;
}

Unexpected not_a_tar(const std::string& path, archive* handle) {
    return fail(ErrorCode::config_invalid,
                fmt::format("{} is not a readable tar archive: {}", path, archive_message(handle)),
                "give a tar archive (plain or gzip/bzip2/xz/zstd/lz4-compressed)");
}

} // namespace

Result<std::unique_ptr<ArchiveReader>> open_archive_reader(const std::string& path) {
    auto fd = open_for_reading(path);
    if (!fd) {
        return fail(fd.error());
    }
    posix_fadvise(fd->get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    ReadHandle handle = new_tar_reader();
    if (!handle) {
        return fail(ErrorCode::internal, "archive_read_new failed (out of memory?)");
    }
    if (archive_read_open_fd(handle.get(), fd->get(), read_block_bytes) != ARCHIVE_OK) {
        return not_a_tar(path, handle.get());
    }
    return std::unique_ptr<ArchiveReader>(
        std::make_unique<LibarchiveReader>(std::move(handle), std::move(*fd), nullptr, path));
}

Result<std::unique_ptr<ArchiveReader>>
open_archive_reader(ByteSource source, const std::string& shown_path, std::size_t block_bytes) {
    auto state = std::make_unique<SourceState>();
    state->source = std::move(source);
    state->buffer.resize(block_bytes);
    ReadHandle handle = new_tar_reader();
    if (!handle) {
        return fail(ErrorCode::internal, "archive_read_new failed (out of memory?)");
    }
    if (archive_read_open(handle.get(), state.get(), nullptr, &SourceState::read_callback,
                          nullptr) != ARCHIVE_OK) {
        if (state->error) {
            return fail(*state->error);
        }
        return not_a_tar(shown_path, handle.get());
    }
    return std::unique_ptr<ArchiveReader>(std::make_unique<LibarchiveReader>(
        std::move(handle), UniqueFd(), std::move(state), shown_path));
}

struct TarWriter::State {
    State() = default;
    // archive_write_free closes an unfinished archive, which calls write_callback: the sink
    // must still be alive then, so the handle goes first.
    ~State() { handle.reset(); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    State(State&&) = delete;
    State& operator=(State&&) = delete;

    WriteHandle handle;
    EntryHandle entry{archive_entry_new()};
    Sink sink;
    std::string shown_path;
    Error sink_error;
    bool sink_failed = false;

    Unexpected error(const char* what) const {
        if (sink_failed) {
            return fail(sink_error);
        }
        return fail(ErrorCode::io,
                    fmt::format("{} {}: {}", what, shown_path, archive_message(handle.get())));
    }

    static la_ssize_t write_callback(archive* /*handle*/, void* client, const void* buffer,
                                     size_t length) {
        auto* state = static_cast<State*>(client);
        auto written = state->sink(static_cast<const char*>(buffer), length);
        if (!written) {
            state->sink_error = written.error();
            state->sink_failed = true;
            return -1;
        }
        return static_cast<la_ssize_t>(length);
    }

    void prepare_entry(const std::string& path, mode_t type, mode_t permissions,
                       std::uint64_t size) const {
        archive_entry_clear(entry.get());
        archive_entry_set_pathname_utf8(entry.get(), path.c_str());
        archive_entry_set_filetype(entry.get(), type);
        archive_entry_set_perm(entry.get(), permissions);
        archive_entry_set_size(entry.get(), static_cast<la_int64_t>(size));
        archive_entry_set_uid(entry.get(), 0);
        archive_entry_set_gid(entry.get(), 0);
        archive_entry_set_mtime(entry.get(), fixed_mtime, 0);
    }
};

TarWriter::TarWriter(std::unique_ptr<State> state) : m_state(std::move(state)) {}
TarWriter::~TarWriter() = default;
TarWriter::TarWriter(TarWriter&&) noexcept = default;
TarWriter& TarWriter::operator=(TarWriter&&) noexcept = default;

Result<TarWriter> TarWriter::open(Sink sink, const std::string& shown_path) {
    auto state = std::make_unique<State>();
    state->handle.reset(archive_write_new());
    state->sink = std::move(sink);
    state->shown_path = shown_path;
    if (!state->handle || !state->entry) {
        return fail(ErrorCode::internal, "archive_write_new failed (out of memory?)");
    }
    archive* handle = state->handle.get();
    // Large blocks for large sequential writes; no padding of the last block beyond the two
    // end-of-archive records, so the archive is exactly the bytes tar needs.
    if (archive_write_set_format_pax_restricted(handle) != ARCHIVE_OK ||
        archive_write_add_filter_none(handle) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(handle, 1 << 20) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(handle, 1) != ARCHIVE_OK ||
        archive_write_open(handle, state.get(), nullptr, &State::write_callback, nullptr) !=
            ARCHIVE_OK) {
        return state->error("cannot start the tar stream of");
    }
    return TarWriter(std::move(state));
}

Result<void> TarWriter::add_directory(const std::string& path) {
    m_state->prepare_entry(path, AE_IFDIR, 0755, 0);
    if (archive_write_header(m_state->handle.get(), m_state->entry.get()) < ARCHIVE_WARN) {
        return m_state->error("cannot write a directory header to");
    }
    return {};
}

Result<std::uint64_t> TarWriter::begin_file(const std::string& path, std::uint64_t size,
                                            bool executable) {
    m_state->prepare_entry(path, AE_IFREG, executable ? 0755 : 0644, size);
    if (archive_write_header(m_state->handle.get(), m_state->entry.get()) < ARCHIVE_WARN) {
        return m_state->error("cannot write a file header to");
    }
    // Bytes the tar format has handed to the (pass-through) filter so far: exactly where this
    // member's data starts, since headers are written whole by archive_write_header.
    return static_cast<std::uint64_t>(archive_filter_bytes(m_state->handle.get(), 0));
}

Result<void> TarWriter::write_data(const char* data, std::size_t size) {
    while (size > 0) {
        const la_ssize_t n = archive_write_data(m_state->handle.get(), data, size);
        if (n <= 0) {
            return m_state->error("cannot write member data to");
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return {};
}

std::uint64_t TarWriter::position() const {
    return static_cast<std::uint64_t>(archive_filter_bytes(m_state->handle.get(), 0));
}

Result<std::uint64_t> TarWriter::finish() {
    if (archive_write_close(m_state->handle.get()) != ARCHIVE_OK) {
        return m_state->error("cannot finish");
    }
    return static_cast<std::uint64_t>(archive_filter_bytes(m_state->handle.get(), -1));
}

} // namespace dljob::adapters
