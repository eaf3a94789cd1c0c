#include "data/datum_dataset.hpp"

#include "data/image_decode.hpp"

#include <dl/error.hpp>
#include <dl/stop.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace dl::data {
namespace {

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

void stop_reading_on_signal(std::size_t index, const std::filesystem::path& source) {
    if (index % 1024 == 0 && stop_requested()) {
        throw Error(ErrorKind::stopped, fmt::format("stopped by a signal while reading {}, before "
                                                    "the first step; resume with --resume auto",
                                                    source.string()));
    }
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
