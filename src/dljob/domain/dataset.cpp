#include <dljob/domain/dataset.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <limits>
#include <vector>

namespace dljob {
namespace {

constexpr std::size_t max_member_path_bytes = 1024;
constexpr std::size_t max_member_depth = 64;

std::vector<std::string_view> split_path(std::string_view path) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (start <= path.size()) {
        const std::size_t slash = path.find('/', start);
        const std::size_t end = slash == std::string_view::npos ? path.size() : slash;
        parts.push_back(path.substr(start, end - start));
        if (slash == std::string_view::npos) {
            break;
        }
        start = slash + 1;
    }
    return parts;
}

/// A field of manifest.json that is missing or not what it must be; parse_manifest turns it
/// into an error naming the file.
struct BadField {
    std::string message;
};

std::string shown_json(const nlohmann::json& value) {
    std::string text = value.dump();
    constexpr std::size_t longest = 60;
    return text.size() > longest ? text.substr(0, longest) + "..." : text;
}

const nlohmann::json& field(const nlohmann::json& object, const std::string& key,
                            const char* expected) {
    if (!object.is_object() || !object.contains(key)) {
        throw BadField{fmt::format("\"{}\" is missing (expected {})", key, expected)};
    }
    return object.at(key);
}

/// An integer of the manifest, range-checked: nlohmann's get<int>() wraps 2^70 to
/// -2147483648, and get<std::uint64_t>() takes -1 as 2^64-1 and 1.5 as 1. The manifest is
/// read from wherever a dataset came from, so a number out of range is an error, never a
/// wrapped value.
template <class T>
T integer_value(const nlohmann::json& value, const std::string& key, T min, T max) {
    bool fits = false;
    if (value.is_number_unsigned()) {
        const auto number = value.get<std::uint64_t>();
        fits = number <= static_cast<std::uint64_t>(max) &&
               (min <= 0 || number >= static_cast<std::uint64_t>(min));
    } else if (value.is_number_integer()) {
        const auto number = value.get<std::int64_t>();
        fits =
            number >= static_cast<std::int64_t>(min) &&
            (number <= 0 || static_cast<std::uint64_t>(number) <= static_cast<std::uint64_t>(max));
    }
    if (!fits) {
        throw BadField{fmt::format("\"{}\": expected an integer from {} to {}, got {}", key, min,
                                   max, shown_json(value))};
    }
    return value.is_number_unsigned() ? static_cast<T>(value.get<std::uint64_t>())
                                      : static_cast<T>(value.get<std::int64_t>());
}

template <class T = std::uint64_t>
T integer_field(const nlohmann::json& object, const std::string& key,
                T min = std::numeric_limits<T>::min(), T max = std::numeric_limits<T>::max()) {
    if (!object.is_object() || !object.contains(key)) {
        throw BadField{
            fmt::format("\"{}\" is missing (expected an integer from {} to {})", key, min, max)};
    }
    return integer_value<T>(object.at(key), key, min, max);
}

template <class T = std::uint64_t>
T optional_integer(const nlohmann::json& object, const std::string& key, T fallback,
                   T min = std::numeric_limits<T>::min(), T max = std::numeric_limits<T>::max()) {
    return object.contains(key) ? integer_value<T>(object.at(key), key, min, max) : fallback;
}

std::string string_field(const nlohmann::json& object, const std::string& key) {
    const auto& value = field(object, key, "a string");
    if (!value.is_string()) {
        throw BadField{fmt::format("\"{}\": expected a string, got {}", key, shown_json(value))};
    }
    return value.get<std::string>();
}

std::string optional_string(const nlohmann::json& object, const std::string& key) {
    return object.contains(key) ? string_field(object, key) : std::string();
}

template <class T> bool parse_number(std::string_view text, T& value) {
    const auto* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    return ec == std::errc{} && ptr == end && !text.empty();
}

/// The version 2 fields: data files, compression, chunk table. Names are checked so a
/// manifest cannot make stage-data read or write outside the dataset directory.
template <class Hash>
Result<void> parse_layout(const nlohmann::json& doc, DatasetManifest& manifest,
                          const std::string& origin, const Hash& hash) {
    auto bad = [&](const std::string& what) {
        return fail(ErrorCode::config_invalid, fmt::format("{}: {}", origin, what),
                    "the manifest is damaged or was not written by dljob: pack the dataset again");
    };
    manifest.compression = string_field(doc, "compression");
    if (manifest.compression != "none" && manifest.compression != "zstd") {
        return bad(fmt::format("\"compression\": \"{}\" (expected \"none\" or \"zstd\")",
                               manifest.compression));
    }
    // zstd's levels run from negative ("fast") ones to 22.
    constexpr int lowest_level = -(1 << 17);
    constexpr int highest_level = 22;
    manifest.compression_level =
        optional_integer<int>(doc, "compression_level", 0, lowest_level, highest_level);
    manifest.chunk_bytes = optional_integer(doc, "chunk_bytes", std::uint64_t{0});
    manifest.shard_bytes = optional_integer(doc, "shard_bytes", std::uint64_t{0});
    const auto& shards = field(doc, "shards", "a list of data files");
    if (!shards.is_array() || shards.empty()) {
        return bad("\"shards\" is not a non-empty list");
    }
    std::uint64_t total = 0;
    for (const auto& item : shards) {
        DatasetShard shard;
        const std::string at = fmt::format("shards[{}].", manifest.shards.size());
        if (!item.is_object()) {
            return bad(fmt::format("\"shards\" item {}: expected an object, got {}",
                                   manifest.shards.size(), shown_json(item)));
        }
        shard.file = string_field(item, "file");
        const auto expected =
            dataset_shard_file_name(static_cast<std::uint32_t>(manifest.shards.size()),
                                    shards.size() > 1, manifest.compressed());
        const auto one_shard = dataset_shard_file_name(0, true, manifest.compressed());
        if (shard.file != expected && !(shards.size() == 1 && shard.file == one_shard)) {
            return bad(fmt::format("data file {} is \"{}\", expected \"{}\"",
                                   manifest.shards.size(), shard.file, expected));
        }
        shard.bytes = integer_value(field(item, "bytes", "an integer"), at + "bytes",
                                    std::uint64_t{0}, manifest.archive_bytes);
        shard.tar_bytes =
            integer_value(field(item, "tar_bytes", "an integer"), at + "tar_bytes",
                          std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max());
        shard.hash = hash(item, "hash");
        total += shard.bytes; // each at most archive_bytes: the sum cannot wrap in a real list
        manifest.shards.push_back(std::move(shard));
    }
    if (total != manifest.archive_bytes) {
        return bad(fmt::format("the data files hold {} bytes, \"archive_bytes\" says {}", total,
                               manifest.archive_bytes));
    }
    if (manifest.compressed()) {
        if (optional_string(doc, "chunks") != dataset_chunks_name) {
            return bad(
                fmt::format("a compressed pack needs \"chunks\": \"{}\"", dataset_chunks_name));
        }
        manifest.chunks_bytes = integer_field(doc, "chunks_bytes");
        manifest.chunks_hash = hash(doc, "chunks_hash");
    }
    return {};
}

} // namespace

std::string dataset_shard_file_name(std::uint32_t shard, bool sharded, bool compressed) {
    const char* suffix = compressed ? ".tar.zst" : ".tar";
    return sharded ? fmt::format("data-{:05}{}", shard, suffix) : fmt::format("data{}", suffix);
}

std::string to_json(const DatasetManifest& manifest) {
    // One key order for both versions: version 1 stays byte for byte what earlier dljob wrote,
    // version 2 names its data files and compression where version 1 named its one archive.
    const bool layout = manifest.version != dataset_format_version;
    nlohmann::ordered_json doc{{"format", "dljob-dataset"}, {"version", manifest.version}};
    if (layout) {
        nlohmann::ordered_json shards = nlohmann::ordered_json::array();
        for (const DatasetShard& shard : manifest.shards) {
            shards.push_back({{"file", shard.file},
                              {"bytes", shard.bytes},
                              {"hash", "xxh3-128:" + shard.hash},
                              {"tar_bytes", shard.tar_bytes}});
        }
        doc["compression"] = manifest.compression;
        doc["compression_level"] = manifest.compression_level;
        doc["chunk_bytes"] = manifest.chunk_bytes;
        doc["shard_bytes"] = manifest.shard_bytes;
        doc["shards"] = shards;
    } else {
        doc["archive"] = dataset_archive_name;
    }
    doc["archive_bytes"] = manifest.archive_bytes;
    doc["content_hash"] = "xxh3-128:" + manifest.content_hash;
    doc["index"] = dataset_index_name;
    doc["index_bytes"] = manifest.index_bytes;
    doc["index_hash"] = "xxh3-128:" + manifest.index_hash;
    if (layout && manifest.compressed()) {
        doc["chunks"] = dataset_chunks_name;
        doc["chunks_bytes"] = manifest.chunks_bytes;
        doc["chunks_hash"] = "xxh3-128:" + manifest.chunks_hash;
    }
    doc["files"] = manifest.files;
    doc["directories"] = manifest.directories;
    doc["payload_bytes"] = manifest.payload_bytes;
    doc["allocated_bytes_4k"] = manifest.allocated_bytes;
    doc["max_path_length"] = manifest.max_path_length;
    doc["labelled"] = manifest.labelled;
    doc["source"] = manifest.source;
    doc["created_by"] = manifest.created_by;
    return doc.dump(2) + "\n";
}

Result<DatasetManifest> parse_manifest(std::string_view text, const std::string& origin) {
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        return fail(ErrorCode::config_invalid, fmt::format("{}: not a JSON object", origin),
                    "the dataset is damaged: pack it again with `dljob pack`");
    }
    if (const auto format = doc.find("format");
        format == doc.end() || !format->is_string() || *format != "dljob-dataset") {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: expected \"format\": \"dljob-dataset\"", origin),
                    "make the dataset with `dljob pack SOURCE -o DATASET`");
    }
    DatasetManifest manifest;
    try {
        const auto& version = field(doc, "version", "an integer");
        if (!version.is_number_integer() ||
            (version.is_number_unsigned() && version.get<std::uint64_t>() > 1000) ||
            (!version.is_number_unsigned() && version.get<std::int64_t>() < 0)) {
            throw BadField{fmt::format("\"version\": expected the dataset format version, an "
                                       "integer ({} or {}), got {}",
                                       dataset_format_version, dataset_layout_format_version,
                                       shown_json(version))};
        }
        manifest.version = static_cast<int>(version.get<std::int64_t>());
        if (manifest.version != dataset_format_version &&
            manifest.version != dataset_layout_format_version) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("{}: dataset format version {} (this dljob reads versions {} "
                                    "and {})",
                                    origin, manifest.version, dataset_format_version,
                                    dataset_layout_format_version),
                        "pack the dataset again with this dljob, or use a newer dljob");
        }
        auto hash = [](const nlohmann::json& object, const char* key) -> std::string {
            const auto value = string_field(object, key);
            const std::string prefix = "xxh3-128:";
            if (value.rfind(prefix, 0) != 0 || value.size() != prefix.size() + 32 ||
                value.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos) {
                throw BadField{fmt::format("\"{}\" is not xxh3-128:<32 hex digits>", key)};
            }
            return value.substr(prefix.size());
        };
        manifest.content_hash = hash(doc, "content_hash");
        manifest.index_hash = hash(doc, "index_hash");
        manifest.archive_bytes = integer_field(doc, "archive_bytes");
        manifest.index_bytes = integer_field(doc, "index_bytes");
        manifest.files = integer_field(doc, "files");
        manifest.directories = integer_field(doc, "directories");
        manifest.payload_bytes = integer_field(doc, "payload_bytes");
        manifest.allocated_bytes = integer_field(doc, "allocated_bytes_4k");
        manifest.max_path_length = integer_field(doc, "max_path_length");
        if (const auto labelled = doc.find("labelled"); labelled != doc.end()) {
            if (!labelled->is_boolean()) {
                throw BadField{fmt::format("\"labelled\": expected true or false, got {}",
                                           shown_json(*labelled))};
            }
            manifest.labelled = labelled->get<bool>();
        }
        manifest.source = optional_string(doc, "source");
        manifest.created_by = optional_string(doc, "created_by");
        if (manifest.version == dataset_format_version) {
            manifest.shards.push_back({dataset_archive_name, manifest.archive_bytes,
                                       manifest.content_hash, manifest.archive_bytes});
        } else {
            DLJOB_TRY(parse_layout(doc, manifest, origin, hash));
        }
    } catch (const BadField& e) {
        return fail(ErrorCode::config_invalid, fmt::format("{}: {}", origin, e.message),
                    "the manifest is damaged or was not written by dljob: pack the dataset again");
    } catch (const nlohmann::json::exception& e) {
        return fail(ErrorCode::config_invalid, fmt::format("{}: {}", origin, e.what()),
                    "the manifest is damaged or was not written by dljob: pack the dataset again");
    }
    return manifest;
}

std::string format_index_line(const IndexEntry& entry, int version) {
    const char type = entry.type == IndexEntryType::file ? 'f' : 'd';
    const std::string label = entry.label ? std::to_string(*entry.label) : std::string("-");
    if (version == dataset_format_version) {
        return fmt::format("{}\t{}\t{}\t{}\t{}", type, entry.offset, entry.size, label, entry.path);
    }
    return fmt::format("{}\t{}\t{}\t{}\t{}\t{}", type, entry.shard, entry.offset, entry.size, label,
                       entry.path);
}

Result<IndexEntry> parse_index_line(std::string_view line, const std::string& origin,
                                    std::uint64_t line_number, int version) {
    const bool with_shard = version != dataset_format_version;
    const std::size_t field_count = with_shard ? 6 : 5;
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    for (std::size_t i = 0; i + 1 < field_count; ++i) {
        const std::size_t tab = line.find('\t', start);
        if (tab == std::string_view::npos) {
            break;
        }
        fields.push_back(line.substr(start, tab - start));
        start = tab + 1;
    }
    fields.push_back(line.substr(start));
    auto bad = [&](const char* what) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}:{}: {} (expected type, {}offset, size, label, path separated "
                                "by tabs)",
                                origin, line_number, what, with_shard ? "shard, " : ""),
                    "the index is damaged: pack the dataset again");
    };
    if (fields.size() != field_count) {
        return bad(with_shard ? "not six tab-separated fields" : "not five tab-separated fields");
    }
    IndexEntry entry;
    if (fields[0] == "f") {
        entry.type = IndexEntryType::file;
    } else if (fields[0] == "d") {
        entry.type = IndexEntryType::directory;
    } else {
        return bad("type is neither f nor d");
    }
    if (with_shard) {
        if (!parse_number(fields[1], entry.shard)) {
            return bad("shard is not a number");
        }
        fields.erase(fields.begin() + 1);
    }
    if (!parse_number(fields[1], entry.offset) || !parse_number(fields[2], entry.size)) {
        return bad("offset or size is not a number");
    }
    if (fields[3] != "-") {
        std::int64_t label = 0;
        if (!parse_number(fields[3], label)) {
            return bad("label is neither a number nor -");
        }
        entry.label = label;
    }
    auto path = normalize_member_path(fields[4]);
    if (!path) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}:{}: {}", origin, line_number, path.error().message),
                    "the index is damaged: pack the dataset again");
    }
    entry.path = *path;
    return entry;
}

std::string format_chunk_line(const ChunkEntry& chunk) {
    return fmt::format("{}\t{}\t{}\t{}\t{}", chunk.shard, chunk.raw_offset, chunk.raw_size,
                       chunk.stored_offset, chunk.stored_size);
}

Result<ChunkEntry> parse_chunk_line(std::string_view line, const std::string& origin,
                                    std::uint64_t line_number) {
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    for (std::size_t tab = line.find('\t'); tab != std::string_view::npos;
         tab = line.find('\t', start)) {
        fields.push_back(line.substr(start, tab - start));
        start = tab + 1;
    }
    fields.push_back(line.substr(start));
    ChunkEntry chunk;
    if (fields.size() != 5 || !parse_number(fields[0], chunk.shard) ||
        !parse_number(fields[1], chunk.raw_offset) || !parse_number(fields[2], chunk.raw_size) ||
        !parse_number(fields[3], chunk.stored_offset) ||
        !parse_number(fields[4], chunk.stored_size)) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}:{}: expected five tab-separated numbers (shard, raw_offset, "
                                "raw_size, stored_offset, stored_size)",
                                origin, line_number),
                    "the chunk table is damaged: pack the dataset again");
    }
    return chunk;
}

Result<std::string> normalize_member_path(std::string_view raw) {
    if (raw.empty()) {
        return fail(ErrorCode::config_invalid, "empty member path");
    }
    if (raw.size() > max_member_path_bytes) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("member path of {} bytes (at most {} allowed): {}...", raw.size(),
                                max_member_path_bytes, raw.substr(0, 60)));
    }
    for (const char c : raw) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("member path with control character 0x{:02x}: '{}'", byte,
                                    raw.substr(0, raw.find(c))));
        }
    }
    if (raw.front() == '/') {
        return fail(ErrorCode::config_invalid,
                    fmt::format("absolute member path '{}' (only paths inside the tree are "
                                "allowed)",
                                raw));
    }
    std::string normalized;
    std::size_t depth = 0;
    for (const std::string_view part : split_path(raw)) {
        if (part.empty() || part == ".") {
            continue;
        }
        if (part == "..") {
            return fail(ErrorCode::config_invalid,
                        fmt::format("member path '{}' contains '..' (it could point outside the "
                                    "tree)",
                                    raw));
        }
        if (++depth > max_member_depth) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("member path '{}' is deeper than {} components", raw,
                                    max_member_depth));
        }
        if (!normalized.empty()) {
            normalized += '/';
        }
        normalized += part;
    }
    if (normalized.empty()) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("member path '{}' names the tree's root itself", raw));
    }
    return normalized;
}

Result<void> check_symlink_target(std::string_view link_path, std::string_view target) {
    auto refuse = [&](const char* why) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("symlink '{}' -> '{}' {}", link_path, target, why));
    };
    if (target.empty()) {
        return refuse("has an empty target");
    }
    if (target.front() == '/') {
        return refuse("points to an absolute path outside the tree");
    }
    for (const char c : target) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) {
            return refuse("has a control character in its target");
        }
    }
    // The link lives in a real directory `depth` levels below the root (members never pass
    // through links: links are created last), so it may climb at most that many levels.
    const std::size_t link_depth = split_path(link_path).size() - 1;
    std::size_t climbs = 0;
    bool descended = false;
    for (const std::string_view part : split_path(target)) {
        if (part.empty() || part == ".") {
            continue;
        }
        if (part == "..") {
            if (descended) {
                return refuse("has '..' after a name (the name may be a link itself)");
            }
            if (++climbs > link_depth) {
                return refuse("points outside the tree");
            }
        } else {
            descended = true;
        }
    }
    return {};
}

} // namespace dljob
