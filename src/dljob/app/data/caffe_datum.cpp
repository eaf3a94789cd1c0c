#include <dljob/adapters/caffe_records.hpp>
#include <dljob/app/data/caffe_datum.hpp>

#include <fmt/format.h>

#include <cstdint>

namespace dljob::app {
namespace {

Unexpected bad(const std::string& what) {
    return fail(ErrorCode::config_invalid, what,
                "give an LMDB of Caffe Datums (convert_imageset, create_mnist.sh)");
}

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

// A raw Datum as a binary PGM (one channel) or PPM (three) image.
Result<void> raw_image(const adapters::CaffeDatum& fields, DatumMember& member) {
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
    // Datum is planar (C x H x W) in Caffe's BGR order; PPM interleaves each pixel's channels
    // as R, G, B. dltrain decodes image files to BGR, so the pack reads as the Datum did.
    for (std::uint64_t p = 0; p < plane; ++p) {
        for (std::uint64_t c = 0; c < channels; ++c) {
            member.bytes[header + p * channels + c] = fields.data[(channels - 1 - c) * plane + p];
        }
    }
    return {};
}

} // namespace

Result<DatumMember> datum_member(std::string_view value) {
    auto fields = adapters::decode_datum(value);
    if (!fields) {
        return fail(fields.error());
    }
    // Caffe's DataTransformer reads data when it has any, float_data otherwise.
    if (fields->float_data) {
        return bad("a float_data Datum: only byte images pack as image files");
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
