#pragma once
// 64-bit checksum of checkpoint bytes (xxHash XXH64; the only file that includes xxhash.h).

#include <cstddef>
#include <cstdint>

namespace dl::io {

std::uint64_t checksum(const void* data, std::size_t size);

} // namespace dl::io
