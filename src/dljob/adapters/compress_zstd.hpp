#pragma once
// Seekable zstd (libzstd), behind a header that shows no zstd type. A stream is cut into
// independent frames of a fixed amount of uncompressed input; concatenated frames are one valid
// zstd stream (`zstd -dc`, `tar --zstd` read it), and a reader that knows where each frame
// starts can decompress any one of them alone, so members are read in place and frames can be
// decompressed in parallel (docs/data.md, "chunks.tsv").

#include <dljob/domain/result.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dljob::adapters {

/// Where one frame sits: its uncompressed bytes in the original stream, its compressed bytes in
/// the output.
struct ZstdFrame {
    std::uint64_t raw_offset = 0;
    std::uint64_t raw_size = 0;
    std::uint64_t stored_offset = 0;
    std::uint64_t stored_size = 0;
};

/// The compression levels libzstd accepts (negative levels are its fast modes).
int zstd_min_level();
int zstd_max_level();

/// Compresses a stream into frames of `frame_bytes` uncompressed bytes each (the last may be
/// shorter). Each frame carries its content checksum, so a damaged frame fails to decompress
/// instead of giving wrong bytes.
class ZstdFrameWriter {
public:
    /// Every compressed byte goes to `sink`, in order.
    using Sink = std::function<Result<void>(const char* data, std::size_t size)>;
    /// Called once per finished frame, in order.
    using FrameDone = std::function<Result<void>(const ZstdFrame& frame)>;

    static Result<ZstdFrameWriter> open(int level, std::size_t frame_bytes, Sink sink,
                                        FrameDone frame_done, const std::string& shown_path);
    ~ZstdFrameWriter();
    ZstdFrameWriter(ZstdFrameWriter&&) noexcept;
    ZstdFrameWriter& operator=(ZstdFrameWriter&&) noexcept;
    ZstdFrameWriter(const ZstdFrameWriter&) = delete;
    ZstdFrameWriter& operator=(const ZstdFrameWriter&) = delete;

    Result<void> write(const char* data, std::size_t size);
    /// Compresses what is buffered as the last frame; returns the compressed stream's size.
    Result<std::uint64_t> finish();

private:
    struct State;
    explicit ZstdFrameWriter(std::unique_ptr<State> state);
    std::unique_ptr<State> m_state;
};

/// Decompresses one whole frame that must yield exactly `raw_size` bytes.
Result<std::vector<char>> zstd_decompress_frame(const char* data, std::size_t size,
                                                std::uint64_t raw_size,
                                                const std::string& shown_name);

} // namespace dljob::adapters
