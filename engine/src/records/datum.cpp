// Caffe's Datum, decoded by hand from protobuf's wire format (dl/records.hpp).
#include "records/protobuf_wire.hpp"

#include <dl/error.hpp>
#include <dl/records.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace dl {
namespace {

using records::WireReader;

int dimension(std::uint64_t value, const char* name, const std::string& what) {
    if (value > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
        fail_config(fmt::format("{}: Datum {} {} is out of range", what, name, value));
    }
    return static_cast<int>(value);
}

// protobuf's fixed32 is little-endian whatever the machine is.
float float_at(const std::uint8_t* bytes) {
    const std::uint32_t word = static_cast<std::uint32_t>(bytes[0]) |
                               (static_cast<std::uint32_t>(bytes[1]) << 8U) |
                               (static_cast<std::uint32_t>(bytes[2]) << 16U) |
                               (static_cast<std::uint32_t>(bytes[3]) << 24U);
    float value = 0.0F; // memcpy, not std::bit_cast: GCC 10 (the release's) lacks it
    std::memcpy(&value, &word, sizeof value);
    return value;
}

} // namespace

Datum parse_datum(const std::uint8_t* bytes, std::size_t size, const std::string& what) {
    Datum datum;
    WireReader in(bytes, size, what, "Datum");
    while (!in.done()) {
        const std::uint64_t tag = in.varint();
        const auto field = static_cast<std::uint32_t>(tag >> 3U);
        const auto wire = static_cast<std::uint32_t>(tag & 7U);
        if (field >= 1 && field <= 3 && wire == 0) {
            const int value = dimension(in.varint(),
                                        field == 1   ? "channels"
                                        : field == 2 ? "height"
                                                     : "width",
                                        what);
            (field == 1 ? datum.channels : field == 2 ? datum.height : datum.width) = value;
        } else if (field == 4 && wire == 2) {
            const auto [start, length] = in.bytes();
            datum.data.assign(start, start + length);
        } else if (field == 5 && wire == 0) {
            // int32 in a varint: negative values are sign-extended to 64 bits.
            datum.label = static_cast<std::int64_t>(in.varint());
        } else if (field == 6 && wire == 5) {
            datum.float_data.push_back(float_at(in.fixed(4)));
        } else if (field == 6 && wire == 2) {
            const std::size_t offset = in.at();
            const auto [start, length] = in.bytes();
            if (length % 4 != 0) {
                in.malformed(fmt::format("packed float_data of {} bytes (not whole floats) at "
                                         "byte {}",
                                         length, offset));
            }
            for (std::size_t i = 0; i < length; i += 4) {
                datum.float_data.push_back(float_at(start + i));
            }
        } else if (field == 7 && wire == 0) {
            datum.encoded = in.varint() != 0;
        } else if (field >= 1 && field <= 7) {
            in.malformed(fmt::format("field {} has wire type {} at byte {}", field, wire, in.at()));
        } else {
            in.skip(wire, field);
        }
    }
    return datum;
}

} // namespace dl
