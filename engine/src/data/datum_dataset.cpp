#include "data/datum_dataset.hpp"

#include "data/image_decode.hpp"
#include "data/protobuf_wire.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

namespace dl::data {
namespace {

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

/// A record's values, checked against its shape: bytes (decoded when encoded) or float_data.
struct Values {
    DecodedImage image; // the shape, and the bytes unless floats
    std::vector<float> floats;
    bool is_float = false;
};

// The Datum's shape, checked against the number of values it carries (`unit`: what they are).
void check_count(const Datum& datum, std::size_t count, const char* unit, const std::string& what) {
    const std::uint64_t expected =
        static_cast<std::uint64_t>(datum.channels) * datum.height * datum.width;
    if (expected == 0 || count != expected) {
        fail_config(fmt::format("{}: {} {} for its shape {}x{}x{} ({} expected)", what, count, unit,
                                datum.channels, datum.height, datum.width, expected));
    }
}

Values values_of(Datum& datum, const std::string& what) {
    Values values;
    values.image.channels = datum.channels;
    values.image.height = datum.height;
    values.image.width = datum.width;
    // Caffe's DataTransformer reads data when it has any, float_data otherwise.
    if (datum.data.empty() && !datum.float_data.empty()) {
        check_count(datum, datum.float_data.size(), "float_data values", what);
        values.is_float = true;
        values.floats = std::move(datum.float_data);
        return values;
    }
    if (datum.encoded) {
        values.image = decode_image(datum.data, 0, what);
        return values;
    }
    check_count(datum, datum.data.size(), "bytes of data", what);
    values.image.pixels = std::move(datum.data);
    return values;
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

std::string key_text(std::string_view key) {
    std::string text(key.substr(0, 64));
    for (char& c : text) {
        if (c < 0x20 || c > 0x7E) {
            c = '?';
        }
    }
    return text;
}

DatumSet::DatumSet(std::string database, bool with_labels, bool header_only, DataBudget budget)
    : m_database(std::move(database)), m_with_labels(with_labels), m_header_only(header_only),
      m_budget(std::move(budget)) {}

void DatumSet::add(std::size_t index, std::string_view key, std::string_view value) {
    const std::string what =
        fmt::format("{}: record {} (key '{}')", m_database, index, key_text(key));
    Datum datum =
        parse_datum(reinterpret_cast<const std::uint8_t*>(value.data()), value.size(), what);
    Values values = values_of(datum, what);
    const DecodedImage& image = values.image;
    if (m_seen == 0) {
        m_set.channels = image.channels;
        m_set.height = image.height;
        m_set.width = image.width;
        m_floats = values.is_float;
    } else if (image.channels != m_set.channels || image.height != m_set.height ||
               image.width != m_set.width) {
        fail_config(fmt::format("{}: {}x{}x{} but the first record is {}x{}x{}", what,
                                image.channels, image.height, image.width, m_set.channels,
                                m_set.height, m_set.width));
    } else if (values.is_float != m_floats) {
        fail_config(fmt::format("{}: {} but the first record holds {}", what,
                                values.is_float ? "float_data" : "byte data",
                                m_floats ? "float_data" : "byte data"));
    }
    if (m_with_labels) {
        // Caffe's label is an int32; a negative one (its ignore_label) classifies nothing here.
        if (datum.label < 0 || datum.label > INT32_MAX) {
            fail_config(
                fmt::format("{}: label {} (labels 0 to 2147483647 are read)", what, datum.label));
        }
        m_set.labels.push_back(static_cast<std::int32_t>(datum.label));
    }
    if (!m_header_only) {
        // Every record has the first one's shape: the set so far, one record more.
        const std::uint64_t value_bytes = m_floats ? sizeof(float) : 1;
        m_budget.check((m_seen + 1) * m_set.image_size() * value_bytes,
                       fmt::format("{} ({} records of {}x{}x{} so far)", m_database, m_seen + 1,
                                   m_set.channels, m_set.height, m_set.width));
        if (m_floats) {
            m_set.float_pixels.insert(m_set.float_pixels.end(), values.floats.begin(),
                                      values.floats.end());
        } else {
            m_set.pixels.insert(m_set.pixels.end(), image.pixels.begin(), image.pixels.end());
        }
    }
    ++m_seen;
}

IdxDataset DatumSet::finish(std::size_t count) {
    if (m_seen == 0) {
        fail_config(fmt::format("{} has no records", m_database));
    }
    m_set.count = m_header_only ? count : m_seen;
    return std::move(m_set);
}

} // namespace dl::data
