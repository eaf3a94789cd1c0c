#include "io/checksum.hpp"

#include <xxhash.h>

namespace dl::io {

std::uint64_t checksum(const void* data, std::size_t size) {
    return XXH64(data, size, 0);
}

} // namespace dl::io
