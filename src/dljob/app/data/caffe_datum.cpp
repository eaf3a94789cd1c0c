#include <dljob/app/data/caffe_datum.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <optional>

namespace dljob::app {
namespace {

Unexpected bad(const std::string& what) {
    return fail(ErrorCode::config_invalid, what,
                "give an LMDB of Caffe Datums (convert_imageset, create_mnist.sh)");
}

/// Reads protobuf's varints, length-delimited fields and fixed widths from a byte string.
class Wire {
public:
    explicit Wire(std::string_view bytes) : m_bytes(bytes) {}
    [[nodiscard]] bool done() const { return m_at >= m_bytes.size(); }
    std::optional<std::uint64_t> varint() {
        std::uint64_t value = 0;
        for (unsigned shift = 0; shift < 64 && m_at < m_bytes.size(); shift += 7) {
            const auto byte = static_cast<unsigned char>(m_bytes[m_at++]);
            value |= static_cast<std::uint64_t>(byte & 0x7FU) << shift;
            if ((byte & 0x80U) == 0) {
                return value;
            }
        }
        return std::nullopt;
    }
    std::optional<std::string_view> take(std::uint64_t size) {
        if (size > m_bytes.size() - m_at) {
            return std::nullopt;
        }
        const std::string_view out = m_bytes.substr(m_at, size);
        m_at += size;
        return out;
    }

private:
    std::string_view m_bytes;
    std::size_t m_at = 0;
};

std::string extension_of(std::string_view image) {
    if (image.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) {
        return "png";
    }
    if (image.size() >= 3 && image.substr(0, 3) == "\xFF\xD8\xFF") {
        return "jpg";
    }
    if (image.substr(0, 2) == "P5") {
        return "pgm";
    }
    if (image.substr(0, 2) == "P6") {
        return "ppm";
    }
    return {};
}

} // namespace

namespace {

// A Datum's fields as its wire bytes give them (protobuf's encoding, decoded by hand: five
// fields do not need the library).
struct DatumFields {
    std::uint64_t channels = 0;
    std::uint64_t height = 0;
    std::uint64_t width = 0;
    std::string_view data;
    std::int64_t label = 0;
    bool encoded = false;
};

void set_number(DatumFields& fields, std::uint64_t field, std::uint64_t number) {
    switch (field) {
    case 1:
        fields.channels = number;
        break;
    case 2:
        fields.height = number;
        break;
    case 3:
        fields.width = number;
        break;
    case 5:
        fields.label = static_cast<std::int64_t>(number);
        break;
    case 7:
        fields.encoded = number != 0;
        break;
    default:
        break; // a field Caffe added later: skipped, as protobuf does
    }
}

Result<DatumFields> datum_fields(std::string_view value) {
    Wire wire(value);
    DatumFields fields;
    while (!wire.done()) {
        const auto tag = wire.varint();
        if (!tag) {
            return bad("truncated Datum (a field tag runs past the end)");
        }
        const std::uint64_t field = *tag >> 3U;
        const std::uint64_t type = *tag & 7U;
        if (type == 0) {
            const auto number = wire.varint();
            if (!number) {
                return bad(fmt::format("truncated Datum (field {} runs past the end)", field));
            }
            set_number(fields, field, *number);
        } else if (type == 2) {
            const auto size = wire.varint();
            const auto bytes = size ? wire.take(*size) : std::nullopt;
            if (!bytes) {
                return bad(fmt::format("truncated Datum (field {} runs past the end)", field));
            }
            if (field == 4) {
                fields.data = *bytes;
            } else if (field == 6) {
                return bad("a float_data Datum: only byte images pack as image files");
            }
        } else if (type == 5) {
            if (field == 6) {
                return bad("a float_data Datum: only byte images pack as image files");
            }
            if (!wire.take(4)) {
                return bad("truncated Datum");
            }
        } else if (type == 1) {
            if (!wire.take(8)) {
                return bad("truncated Datum");
            }
        } else {
            return bad(fmt::format("malformed Datum (wire type {} in field {})", type, field));
        }
    }
    return fields;
}

// A raw Datum as a binary PGM (one channel) or PPM (three) image.
Result<void> raw_image(const DatumFields& fields, DatumMember& member) {
    const std::uint64_t channels = fields.channels;
    const std::uint64_t height = fields.height;
    const std::uint64_t width = fields.width;
    if (channels != 1 && channels != 3) {
        return bad(
            fmt::format("a Datum of {} channels (1 or 3 pack as PGM or PPM images)", channels));
    }
    if (height == 0 || width == 0 || height > 65535 || width > 65535) {
        return bad(fmt::format("a Datum of {}x{} pixels", height, width));
    }
    const std::uint64_t plane = height * width;
    if (fields.data.size() != channels * plane) {
        return bad(fmt::format("a {}x{}x{} Datum holds {} data bytes, not {}", channels, height,
                               width, fields.data.size(), channels * plane));
    }
    member.extension = channels == 1 ? "pgm" : "ppm";
    member.bytes = fmt::format("{} {} {} 255\n", channels == 1 ? "P5" : "P6", width, height);
    const std::size_t header = member.bytes.size();
    member.bytes.resize(header + fields.data.size());
    // Datum is planar (C x H x W); PPM interleaves the channels of each pixel.
    for (std::uint64_t p = 0; p < plane; ++p) {
        for (std::uint64_t c = 0; c < channels; ++c) {
            member.bytes[header + p * channels + c] = fields.data[c * plane + p];
        }
    }
    return {};
}

} // namespace

Result<DatumMember> datum_member(std::string_view value) {
    auto fields = datum_fields(value);
    if (!fields) {
        return fail(fields.error());
    }
    // Caffe's label is an int32 (ImageNet's go to 999); a negative one classifies nothing.
    if (fields->label < 0 || fields->label > INT32_MAX) {
        return bad(fmt::format("label {} is outside 0 to 2147483647", fields->label));
    }
    DatumMember member;
    member.label = fields->label;
    if (fields->encoded) {
        member.extension = extension_of(fields->data);
        if (member.extension.empty()) {
            return bad("an encoded Datum that is not PNG, JPEG or binary PGM/PPM");
        }
        member.bytes = std::string(fields->data);
        return member;
    }
    DLJOB_TRY(raw_image(*fields, member));
    return member;
}

} // namespace dljob::app
