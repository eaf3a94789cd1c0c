#include <dljob/domain/dataset.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
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
    manifest.compression = doc.at("compression").get<std::string>();
    if (manifest.compression != "none" && manifest.compression != "zstd") {
        return bad(fmt::format("\"compression\": \"{}\" (expected \"none\" or \"zstd\")",
                               manifest.compression));
    }
    manifest.compression_level = doc.value("compression_level", 0);
    manifest.chunk_bytes = doc.value("chunk_bytes", std::uint64_t{0});
    manifest.shard_bytes = doc.value("shard_bytes", std::uint64_t{0});
    const auto& shards = doc.at("shards");
    if (!shards.is_array() || shards.empty()) {
        return bad("\"shards\" is not a non-empty list");
    }
    std::uint64_t total = 0;
    for (const auto& item : shards) {
        DatasetShard shard;
        shard.file = item.at("file").get<std::string>();
        const auto expected =
            dataset_shard_file_name(static_cast<std::uint32_t>(manifest.shards.size()),
                                    shards.size() > 1, manifest.compressed());
        const auto one_shard = dataset_shard_file_name(0, true, manifest.compressed());
        if (shard.file != expected && !(shards.size() == 1 && shard.file == one_shard)) {
            return bad(fmt::format("data file {} is \"{}\", expected \"{}\"",
                                   manifest.shards.size(), shard.file, expected));
        }
        shard.bytes = item.at("bytes").get<std::uint64_t>();
        shard.tar_bytes = item.at("tar_bytes").get<std::uint64_t>();
        shard.hash = hash(item, "hash");
        total += shard.bytes;
        manifest.shards.push_back(std::move(shard));
    }
    if (total != manifest.archive_bytes) {
        return bad(fmt::format("the data files hold {} bytes, \"archive_bytes\" says {}", total,
                               manifest.archive_bytes));
    }
    if (manifest.compressed()) {
        if (doc.value("chunks", "") != dataset_chunks_name) {
            return bad(
                fmt::format("a compressed pack needs \"chunks\": \"{}\"", dataset_chunks_name));
        }
        manifest.chunks_bytes = doc.at("chunks_bytes").get<std::uint64_t>();
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
    if (doc.value("format", "") != "dljob-dataset") {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: expected \"format\": \"dljob-dataset\"", origin),
                    "make the dataset with `dljob pack SOURCE -o DATASET`");
    }
    DatasetManifest manifest;
    try {
        manifest.version = doc.at("version").get<int>();
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
            const auto value = object.at(key).get<std::string>();
            const std::string prefix = "xxh3-128:";
            if (value.rfind(prefix, 0) != 0 || value.size() != prefix.size() + 32 ||
                value.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos) {
                throw nlohmann::json::other_error::create(
                    501, fmt::format("\"{}\" is not xxh3-128:<32 hex digits>", key), nullptr);
            }
            return value.substr(prefix.size());
        };
        manifest.content_hash = hash(doc, "content_hash");
        manifest.index_hash = hash(doc, "index_hash");
        manifest.archive_bytes = doc.at("archive_bytes").get<std::uint64_t>();
        manifest.index_bytes = doc.at("index_bytes").get<std::uint64_t>();
        manifest.files = doc.at("files").get<std::uint64_t>();
        manifest.directories = doc.at("directories").get<std::uint64_t>();
        manifest.payload_bytes = doc.at("payload_bytes").get<std::uint64_t>();
        manifest.allocated_bytes = doc.at("allocated_bytes_4k").get<std::uint64_t>();
        manifest.max_path_length = doc.at("max_path_length").get<std::uint64_t>();
        manifest.labelled = doc.value("labelled", false);
        manifest.source = doc.value("source", "");
        manifest.created_by = doc.value("created_by", "");
        if (manifest.version == dataset_format_version) {
            manifest.shards.push_back({dataset_archive_name, manifest.archive_bytes,
                                       manifest.content_hash, manifest.archive_bytes});
        } else {
            DLJOB_TRY(parse_layout(doc, manifest, origin, hash));
        }
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
