#include <dl/records.hpp>
#include <dljob/adapters/caffe_records.hpp>

#include <fmt/format.h>

#include <optional>
#include <stdexcept>

namespace dljob::adapters {
namespace {

constexpr const char* k_hint = "give a database made by Caffe's tools (convert_imageset, "
                               "create_mnist.sh) of Datums";

// The engine's reader throws dl::Error (a std::runtime_error); dljob returns errors.
Result<void> walk(bool lmdb, const std::string& directory, const RecordVisit& visit) {
    std::optional<Error> stopped;
    const dl::RecordVisitor each = [&](std::size_t index, std::string_view key,
                                       std::string_view value) {
        auto visited = visit(index, key, value);
        if (!visited) {
            stopped = visited.error();
            return false;
        }
        return true;
    };
    try {
        if (lmdb) {
            dl::for_each_lmdb_record(directory, each);
        } else {
            dl::for_each_leveldb_record(directory, each);
        }
    } catch (const std::runtime_error& error) {
        return fail(ErrorCode::config_invalid, error.what(), k_hint);
    }
    if (stopped) {
        return fail(std::move(*stopped));
    }
    return {};
}

} // namespace

bool is_lmdb_directory(const std::string& directory) {
    return dl::is_lmdb(directory);
}

bool is_leveldb_directory(const std::string& directory) {
    return dl::is_leveldb(directory);
}

Result<void> for_each_lmdb_record(const std::string& directory, const RecordVisit& visit) {
    return walk(true, directory, visit);
}

Result<void> for_each_leveldb_record(const std::string& directory, const RecordVisit& visit) {
    return walk(false, directory, visit);
}

Result<CaffeDatum> decode_datum(std::string_view value) {
    dl::Datum datum;
    try {
        datum = dl::parse_datum(reinterpret_cast<const std::uint8_t*>(value.data()), value.size(),
                                "its value");
    } catch (const std::runtime_error& error) {
        return fail(ErrorCode::config_invalid, error.what(), k_hint);
    }
    CaffeDatum out;
    out.channels = static_cast<std::uint64_t>(datum.channels);
    out.height = static_cast<std::uint64_t>(datum.height);
    out.width = static_cast<std::uint64_t>(datum.width);
    out.data.assign(datum.data.begin(), datum.data.end());
    out.label = datum.label;
    out.encoded = datum.encoded;
    out.float_data = datum.data.empty() && !datum.float_data.empty();
    return out;
}

} // namespace dljob::adapters
