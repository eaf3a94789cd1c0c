#pragma once
// Reading protobuf's binary wire format by hand, for the two small Caffe messages the data
// readers need (Datum in an LMDB or LevelDB: records/datum.cpp; BlobProto in a
// mean.binaryproto: data/mean_file.cpp): varints, length-delimited
// fields and skipping. Every read is bounded by the message; a truncated or malformed message is
// a dl::Error(config) naming `what`, the message type and the byte offset.

#include <dl/error.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>

namespace dl::records {

class WireReader {
public:
    WireReader(const std::uint8_t* bytes, std::size_t size, std::string what, const char* type)
        : m_bytes(bytes), m_size(size), m_what(std::move(what)), m_type(type) {}

    [[nodiscard]] bool done() const { return m_at >= m_size; }
    [[nodiscard]] std::size_t at() const { return m_at; }

    std::uint64_t varint() {
        std::uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_at >= m_size) {
                truncated("a varint");
            }
            const std::uint8_t byte = m_bytes[m_at++];
            value |= static_cast<std::uint64_t>(byte & 0x7FU) << static_cast<unsigned>(shift);
            if ((byte & 0x80U) == 0) {
                return value;
            }
        }
        malformed(fmt::format("a varint longer than 10 bytes at byte {}", m_at));
    }

    /// A length-delimited field's bytes.
    std::pair<const std::uint8_t*, std::size_t> bytes() {
        const std::uint64_t length = varint();
        if (length > m_size - m_at) {
            truncated(fmt::format("a field of {} bytes", length));
        }
        const std::uint8_t* start = m_bytes + m_at;
        m_at += static_cast<std::size_t>(length);
        return {start, static_cast<std::size_t>(length)};
    }

    /// The next 4 (fixed32) or 8 (fixed64) bytes.
    const std::uint8_t* fixed(std::size_t n) {
        const std::uint8_t* start = m_bytes + m_at;
        advance(n);
        return start;
    }

    void skip(std::uint32_t wire_type, std::uint32_t field) {
        switch (wire_type) {
        case 0:
            varint();
            return;
        case 1:
            advance(8);
            return;
        case 2:
            bytes();
            return;
        case 5:
            advance(4);
            return;
        default:
            malformed(fmt::format("field {} has wire type {} at byte {}", field, wire_type, m_at));
        }
    }

    [[noreturn]] void malformed(const std::string& why) const {
        throw Error(ErrorKind::config, fmt::format("{}: not a {} ({})", m_what, m_type, why));
    }

private:
    void advance(std::size_t n) {
        if (n > m_size - m_at) {
            truncated(fmt::format("{} bytes", n));
        }
        m_at += n;
    }
    [[noreturn]] void truncated(const std::string& wanted) const {
        malformed(fmt::format("truncated: {} wanted at byte {} of {}", wanted, m_at, m_size));
    }

    const std::uint8_t* m_bytes;
    std::size_t m_size;
    std::string m_what;
    const char* m_type;
    std::size_t m_at = 0;
};

} // namespace dl::records
