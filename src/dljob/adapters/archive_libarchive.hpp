#pragma once
// Tar reading and writing through libarchive, behind a header that shows no libarchive type.
// Reading is for parsing only (tar, optionally gzip/bzip2/xz/zstd/lz4-compressed): files are
// written by dljob's own extractor, because libarchive's disk writer is 2-3x slower per file
// and unsafe with its default flags (docs/data.md).

#include <dljob/domain/result.hpp>
#include <dljob/domain/stage.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace dljob::adapters {

/// Opens a tar archive for reading entry by entry.
Result<std::unique_ptr<ArchiveReader>> open_archive_reader(const std::string& path);

/// Fills `buffer` with up to `size` bytes of an archive; 0 at its end.
using ByteSource = std::function<Result<std::size_t>(char* buffer, std::size_t size)>;

/// Opens a tar archive whose bytes come from `source` (a file read and hashed on the way, for
/// one): libarchive reads it in blocks of `block_bytes`. A source error is reported as is.
Result<std::unique_ptr<ArchiveReader>>
open_archive_reader(ByteSource source, const std::string& shown_path, std::size_t block_bytes);

/// Writes a deterministic tar stream (pax-restricted: ustar headers, pax extensions only for
/// long paths or big sizes) with owner 0:0, empty user/group names, a fixed mtime and modes
/// 0644/0755, so the same files give the same bytes on every machine.
class TarWriter {
public:
    /// Every byte of the archive goes to `sink` in order (file writes and hashing).
    using Sink = std::function<Result<void>(const char* data, std::size_t size)>;
    static Result<TarWriter> open(Sink sink, const std::string& shown_path);
    ~TarWriter();
    TarWriter(TarWriter&&) noexcept;
    TarWriter& operator=(TarWriter&&) noexcept;
    TarWriter(const TarWriter&) = delete;
    TarWriter& operator=(const TarWriter&) = delete;

    Result<void> add_directory(const std::string& path);
    /// Writes a file header; returns the offset of the file's data in the archive.
    Result<std::uint64_t> begin_file(const std::string& path, std::uint64_t size, bool executable);
    Result<void> write_data(const char* data, std::size_t size);
    /// Bytes of tar written so far (some may still sit in the writer's buffer).
    [[nodiscard]] std::uint64_t position() const;
    /// Writes the end-of-archive blocks; returns the archive's total size.
    Result<std::uint64_t> finish();

private:
    struct State;
    explicit TarWriter(std::unique_ptr<State> state);
    std::unique_ptr<State> m_state;
};

} // namespace dljob::adapters
