#pragma once
// One zstd frame of a compressed pack (docs/data.md, chunks.tsv), decompressed whole. The one
// engine file that includes zstd.h is pack_zstd.cpp.

#include <cstddef>
#include <cstdint>
#include <string>

namespace dl::data {

/// Decompresses the frame in `in` into exactly `out_size` bytes at `out`. Throws
/// dl::Error(config) naming `what` when the frame is damaged (every frame dljob writes carries
/// a checksum) or yields another size.
void decompress_zstd_frame(const std::uint8_t* in, std::size_t in_size, std::uint8_t* out,
                           std::size_t out_size, const std::string& what);

} // namespace dl::data
