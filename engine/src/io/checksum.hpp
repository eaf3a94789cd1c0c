#pragma once
// 64-bit checksum of checkpoint bytes (xxHash XXH64; the only file that includes xxhash.h).

#include <cstddef>
#include <cstdint>

namespace dl::io {

std::uint64_t checksum(const void* data, std::size_t size);

/// The same checksum over bytes that come in pieces (a checkpoint streamed to its file).
class StreamingChecksum {
public:
    StreamingChecksum();
    ~StreamingChecksum();
    StreamingChecksum(const StreamingChecksum&) = delete;
    StreamingChecksum& operator=(const StreamingChecksum&) = delete;
    StreamingChecksum(StreamingChecksum&&) = delete;
    StreamingChecksum& operator=(StreamingChecksum&&) = delete;
    void update(const void* data, std::size_t size);
    [[nodiscard]] std::uint64_t digest() const;

private:
    void* m_state; // XXH64_state_t, kept out of this header
};

} // namespace dl::io
