#include "io/checksum.hpp"

#include <xxhash.h>

#include <new>

namespace dl::io {

std::uint64_t checksum(const void* data, std::size_t size) {
    return XXH64(data, size, 0);
}

StreamingChecksum::StreamingChecksum() : m_state(XXH64_createState()) {
    if (m_state == nullptr) {
        throw std::bad_alloc();
    }
    XXH64_reset(static_cast<XXH64_state_t*>(m_state), 0);
}

StreamingChecksum::~StreamingChecksum() {
    XXH64_freeState(static_cast<XXH64_state_t*>(m_state));
}

void StreamingChecksum::update(const void* data, std::size_t size) {
    XXH64_update(static_cast<XXH64_state_t*>(m_state), data, size);
}

std::uint64_t StreamingChecksum::digest() const {
    return XXH64_digest(static_cast<const XXH64_state_t*>(m_state));
}

} // namespace dl::io
