#include "data/pack_zstd.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <zstd.h>

#include <memory>

namespace dl::data {

void decompress_zstd_frame(const std::uint8_t* in, std::size_t in_size, std::uint8_t* out,
                           std::size_t out_size, const std::string& what) {
    // A context per thread: data readers may run on a prefetch thread, and a context is ~100 KB
    // that zstd reuses across frames.
    struct Free {
        void operator()(ZSTD_DCtx* dctx) const { ZSTD_freeDCtx(dctx); }
    };
    thread_local const std::unique_ptr<ZSTD_DCtx, Free> dctx(ZSTD_createDCtx());
    if (!dctx) {
        throw Error(ErrorKind::config, fmt::format("{}: cannot create a zstd context", what));
    }
    const std::size_t n = ZSTD_decompressDCtx(dctx.get(), out, out_size, in, in_size);
    if (ZSTD_isError(n) != 0U) {
        throw Error(ErrorKind::config,
                    fmt::format("{} is damaged: {} (pack the dataset again, or stage it again)",
                                what, ZSTD_getErrorName(n)));
    }
    if (n != out_size) {
        throw Error(ErrorKind::config,
                    fmt::format("{} is damaged: it decompresses to {} bytes, chunks.tsv says {}",
                                what, n, out_size));
    }
}

} // namespace dl::data
