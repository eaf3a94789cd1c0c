#include <dljob/adapters/compress_zstd.hpp>

#include <fmt/format.h>

#include <zstd.h>

#include <algorithm>

namespace dljob::adapters {
// Named, not anonymous: ZstdFrameWriter::State (declared in the header) holds these, and a
// member whose type has internal linkage is what GCC warns about in a unity build
// (-Wsubobject-linkage), where this file is included into another.
namespace zstd_handles {

struct CctxDeleter {
    void operator()(ZSTD_CCtx* cctx) const { ZSTD_freeCCtx(cctx); }
};
struct DctxDeleter {
    void operator()(ZSTD_DCtx* dctx) const { ZSTD_freeDCtx(dctx); }
};

} // namespace zstd_handles

using zstd_handles::CctxDeleter;
using zstd_handles::DctxDeleter;

int zstd_min_level() {
    return ZSTD_minCLevel();
}
int zstd_max_level() {
    return ZSTD_maxCLevel();
}

struct ZstdFrameWriter::State {
    std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx;
    std::size_t frame_bytes = 0;
    Sink sink;
    FrameDone frame_done;
    std::string shown;
    std::vector<char> input;
    std::vector<char> output;
    std::uint64_t raw_offset = 0;
    std::uint64_t stored_offset = 0;

    Result<void> compress_frame() {
        if (input.empty()) {
            return {};
        }
        const std::size_t n =
            ZSTD_compress2(cctx.get(), output.data(), output.size(), input.data(), input.size());
        if (ZSTD_isError(n) != 0U) {
            return fail(ErrorCode::io, fmt::format("{}: zstd compression failed: {}", shown,
                                                   ZSTD_getErrorName(n)));
        }
        DLJOB_TRY(sink(output.data(), n));
        const ZstdFrame frame{raw_offset, input.size(), stored_offset, n};
        raw_offset += input.size();
        stored_offset += n;
        input.clear();
        return frame_done ? frame_done(frame) : Result<void>{};
    }
};

Result<ZstdFrameWriter> ZstdFrameWriter::open(int level, std::size_t frame_bytes, Sink sink,
                                              FrameDone frame_done, const std::string& shown_path) {
    if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel() || frame_bytes == 0) {
        return fail(ErrorCode::usage,
                    fmt::format("zstd level {} is out of range ({} to {})", level, ZSTD_minCLevel(),
                                ZSTD_maxCLevel()),
                    "use --compress zstd or zstd:LEVEL, e.g. zstd:3");
    }
    auto state = std::make_unique<State>();
    state->cctx.reset(ZSTD_createCCtx());
    if (!state->cctx) {
        return fail(ErrorCode::io, fmt::format("{}: cannot create a zstd context", shown_path));
    }
    // The checksum makes a damaged frame an error at decompression instead of silently wrong
    // member bytes (4 bytes per frame).
    if (ZSTD_isError(ZSTD_CCtx_setParameter(state->cctx.get(), ZSTD_c_compressionLevel, level)) !=
            0U ||
        ZSTD_isError(ZSTD_CCtx_setParameter(state->cctx.get(), ZSTD_c_checksumFlag, 1)) != 0U) {
        return fail(ErrorCode::io, fmt::format("{}: cannot set zstd parameters", shown_path));
    }
    state->frame_bytes = frame_bytes;
    state->sink = std::move(sink);
    state->frame_done = std::move(frame_done);
    state->shown = shown_path;
    state->input.reserve(frame_bytes);
    state->output.resize(ZSTD_compressBound(frame_bytes));
    return ZstdFrameWriter(std::move(state));
}

ZstdFrameWriter::ZstdFrameWriter(std::unique_ptr<State> state) : m_state(std::move(state)) {}
ZstdFrameWriter::~ZstdFrameWriter() = default;
ZstdFrameWriter::ZstdFrameWriter(ZstdFrameWriter&&) noexcept = default;
ZstdFrameWriter& ZstdFrameWriter::operator=(ZstdFrameWriter&&) noexcept = default;

Result<void> ZstdFrameWriter::write(const char* data, std::size_t size) {
    State& s = *m_state;
    while (size > 0) {
        const std::size_t take = std::min(size, s.frame_bytes - s.input.size());
        s.input.insert(s.input.end(), data, data + take);
        data += take;
        size -= take;
        if (s.input.size() == s.frame_bytes) {
            DLJOB_TRY(s.compress_frame());
        }
    }
    return {};
}

Result<std::uint64_t> ZstdFrameWriter::finish() {
    DLJOB_TRY(m_state->compress_frame());
    return m_state->stored_offset;
}

Result<std::vector<char>> zstd_decompress_frame(const char* data, std::size_t size,
                                                std::uint64_t raw_size,
                                                const std::string& shown_name) {
    const std::unique_ptr<ZSTD_DCtx, DctxDeleter> dctx(ZSTD_createDCtx());
    if (!dctx) {
        return fail(ErrorCode::io, fmt::format("{}: cannot create a zstd context", shown_name));
    }
    std::vector<char> out(raw_size);
    const std::size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), data, size);
    if (ZSTD_isError(n) != 0U || n != raw_size) {
        const std::string why = ZSTD_isError(n) != 0U
                                    ? std::string(ZSTD_getErrorName(n))
                                    : fmt::format("{} bytes, expected {}", n, raw_size);
        return fail(ErrorCode::io,
                    fmt::format("{}: the zstd frame is damaged ({})", shown_name, why),
                    "the dataset was damaged after packing: pack it again");
    }
    return out;
}

} // namespace dljob::adapters
