#include "data/pack_reader.hpp"

#include "data/pack_zstd.hpp"
#include "io/regular_file.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

namespace dl::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* index_name = "index.tsv";
constexpr const char* archive_name = "data.tar";
constexpr const char* manifest_name = "manifest.json";
constexpr const char* chunks_name = "chunks.tsv";
constexpr std::string_view index_magic = "# dljob-index v1";
constexpr std::string_view index_magic_v2 = "# dljob-index v2";
constexpr std::string_view chunks_magic = "# dljob-chunks v1";
// dljob pack's frames hold 4 MiB of tar (app/data/pack.hpp, pack_chunk_bytes); a table may
// say up to this much, and no more.
constexpr std::uint64_t k_max_frame_bytes = std::uint64_t{64} << 20;
// A manifest lists one line per data file: a million of them are under this.
constexpr std::uint64_t k_max_manifest_bytes = std::uint64_t{256} << 20;

template <class T> bool parse_number(std::string_view text, T& value) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc{} && ptr == text.data() + text.size() && !text.empty();
}

} // namespace

bool Pack::is_pack(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / index_name, ec) &&
           (fs::is_regular_file(dir / archive_name, ec) ||
            fs::is_regular_file(dir / manifest_name, ec));
}

Pack::Pack(const fs::path& dir) : m_dir(dir) {
    const fs::path index = dir / index_name;
    // A FIFO is refused here, not waited on by the stream below.
    (void)io::RegularFile(index, "pack index");
    std::ifstream in(index);
    if (!in) {
        throw Error(ErrorKind::config, fmt::format("cannot read {}", index.string()));
    }
    std::string line;
    if (std::getline(in, line) && line.rfind(index_magic_v2, 0) == 0) {
        m_version = 2;
    } else if (line.rfind(index_magic, 0) != 0) {
        throw Error(ErrorKind::config,
                    fmt::format("{}:1: not a dljob index (no '# dljob-index v1' or v2 header)",
                                index.string()));
    }
    open_shards();
    if (m_compressed) {
        load_chunks();
    }
    const std::size_t fields_before_path = m_version == 2 ? 5 : 4;
    std::uint64_t number = 1;
    while (std::getline(in, line)) {
        ++number;
        const auto bad = [&](const std::string& what) {
            return Error(ErrorKind::config,
                         fmt::format("{}:{}: {} (expected type, {}offset, size, label, path "
                                     "separated by tabs)",
                                     index.string(), number, what,
                                     m_version == 2 ? "shard, " : ""));
        };
        std::vector<std::string_view> fields;
        std::string_view rest(line);
        for (std::size_t i = 0; i < fields_before_path; ++i) {
            const auto tab = rest.find('\t');
            if (tab == std::string_view::npos) {
                throw bad("too few fields");
            }
            fields.push_back(rest.substr(0, tab));
            rest.remove_prefix(tab + 1);
        }
        if (fields[0] == "d") {
            continue;
        }
        if (fields[0] != "f") {
            throw bad("type is neither f nor d");
        }
        PackEntry entry;
        if (m_version == 2) {
            if (!parse_number(fields[1], entry.shard) || entry.shard >= m_shards.size()) {
                throw bad(fmt::format("shard is not one of the {} data files in {}",
                                      m_shards.size(), manifest_name));
            }
            fields.erase(fields.begin() + 1);
        }
        entry.path = std::string(rest);
        if (!parse_number(fields[1], entry.offset) || !parse_number(fields[2], entry.size)) {
            throw bad("offset or size is not a number");
        }
        const std::uint64_t tar_bytes = m_shards[entry.shard].tar_bytes;
        if (entry.offset > tar_bytes || entry.size > tar_bytes - entry.offset) {
            throw bad(fmt::format("member lies beyond the end of {}",
                                  m_shards[entry.shard].path.filename().string()));
        }
        if (fields[3] != "-") {
            std::int64_t label = 0;
            if (!parse_number(fields[3], label)) {
                throw bad("label is neither a number nor -");
            }
            entry.label = label;
        }
        m_files.push_back(std::move(entry));
    }
}

void Pack::open_shards() {
    const auto open_shard = [&](const fs::path& path, std::uint64_t tar_bytes, bool known) {
        // A FIFO or a device is refused at once (RegularFile never blocks on opening).
        io::RegularFile file(path, "pack data file");
        Shard shard;
        shard.path = path;
        const std::uint64_t file_bytes = file.size();
        shard.fd = file.release();
        // An uncompressed data file is its tar: the members' bounds are checked against it.
        if (known && !m_compressed && tar_bytes != file_bytes) {
            ::close(shard.fd);
            throw Error(ErrorKind::config,
                        fmt::format("{}: the manifest says {} tar bytes, the file has {}: the "
                                    "pack is truncated or damaged",
                                    path.string(), tar_bytes, file_bytes));
        }
        shard.tar_bytes = known ? tar_bytes : file_bytes;
        m_shards.push_back(std::move(shard));
    };
    if (m_version == 1) {
        open_shard(m_dir / archive_name, 0, false);
        return;
    }
    // Version 2 names its data files only in the manifest.
    const fs::path manifest_path = m_dir / manifest_name;
    const std::vector<char> text =
        io::RegularFile(manifest_path, "pack manifest").read_all(k_max_manifest_bytes);
    const auto doc = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    const auto bad = [&](const std::string& what) {
        return Error(ErrorKind::config, fmt::format("{}: {}", manifest_path.string(), what));
    };
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("shards") ||
        !doc["shards"].is_array() || doc["shards"].empty()) {
        throw bad("expected a JSON object with a non-empty \"shards\" list");
    }
    if (doc.contains("compression") && !doc["compression"].is_string()) {
        throw bad("\"compression\" is not a name (none or zstd)");
    }
    const std::string compression = doc.value("compression", "none");
    if (compression != "none" && compression != "zstd") {
        throw bad(fmt::format("unknown compression \"{}\" (this dltrain reads none and zstd)",
                              compression));
    }
    m_compressed = compression == "zstd";
    for (const auto& item : doc["shards"]) {
        if (!item.is_object() || !item.contains("file") || !item["file"].is_string() ||
            !item.contains("tar_bytes") || !item["tar_bytes"].is_number_unsigned()) {
            throw bad("a \"shards\" entry lacks \"file\" or \"tar_bytes\"");
        }
        const auto file = item["file"].get<std::string>();
        // Data files are plain names inside the pack.
        if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
            throw bad(fmt::format("data file \"{}\" is not a name inside the pack", file));
        }
        open_shard(m_dir / file, item["tar_bytes"].get<std::uint64_t>(), true);
    }
}

void Pack::load_chunks() {
    const fs::path path = m_dir / chunks_name;
    (void)io::RegularFile(path, "pack chunk table");
    std::ifstream in(path);
    if (!in) {
        throw Error(
            ErrorKind::config,
            fmt::format("cannot read {} (a compressed pack needs its chunk table)", path.string()));
    }
    std::string line;
    std::uint64_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        const auto bad = [&](const std::string& what) {
            return Error(ErrorKind::config,
                         fmt::format("{}:{}: {} (expected shard, raw_offset, raw_size, "
                                     "stored_offset, stored_size separated by tabs)",
                                     path.string(), number, what));
        };
        if (number == 1) {
            if (line.rfind(chunks_magic, 0) != 0) {
                throw bad("not a dljob chunk table (no '# dljob-chunks v1' header)");
            }
            continue;
        }
        std::vector<std::uint64_t> values;
        std::string_view rest(line);
        for (;;) {
            const auto tab = rest.find('\t');
            std::uint64_t value = 0;
            if (!parse_number(rest.substr(0, tab), value)) {
                throw bad("not a number");
            }
            values.push_back(value);
            if (tab == std::string_view::npos) {
                break;
            }
            rest.remove_prefix(tab + 1);
        }
        if (values.size() != 5 || values[0] >= m_shards.size()) {
            throw bad("not five numbers with a known shard");
        }
        Shard& shard = m_shards[values[0]];
        const Chunk chunk{values[1], values[2], values[3], values[4]};
        // zstd expands a frame at most about 32768 times (an RLE block: 4 bytes for 128 KiB):
        // a larger claim is a damaged table, refused before a frame buffer is sized by it.
        std::uint64_t most = 0;
        if (!__builtin_mul_overflow(chunk.stored_size, std::uint64_t{32768}, &most) &&
            chunk.raw_size > most + (std::uint64_t{128} << 10)) {
            throw bad(fmt::format("a frame of {} bytes cannot hold {} (zstd expands at most "
                                  "32768 times)",
                                  chunk.stored_size, chunk.raw_size));
        }
        // One frame is decompressed whole into the reader's buffer: its size is bounded before
        // the buffer is sized by it (dljob pack writes frames of 4 MiB).
        if (chunk.raw_size > k_max_frame_bytes) {
            throw bad(fmt::format("a frame of {} bytes (dljob pack writes at most {})",
                                  chunk.raw_size, k_max_frame_bytes));
        }
        // Frames are contiguous in both streams: a reader can then trust the table's arithmetic.
        const Chunk last = shard.chunks.empty() ? Chunk{} : shard.chunks.back();
        if (chunk.raw_offset != last.raw_offset + last.raw_size ||
            chunk.stored_offset != last.stored_offset + last.stored_size || chunk.raw_size == 0) {
            throw bad("the frame does not follow the previous one of its shard");
        }
        shard.chunks.push_back(chunk);
    }
    for (const Shard& shard : m_shards) {
        struct stat st {};
        ::fstat(shard.fd, &st);
        const Chunk last = shard.chunks.empty() ? Chunk{} : shard.chunks.back();
        if (last.raw_offset + last.raw_size != shard.tar_bytes ||
            last.stored_offset + last.stored_size != static_cast<std::uint64_t>(st.st_size)) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: its frames cover {} of {} tar bytes and {} of the {} "
                                    "bytes of {}: the pack is truncated or damaged",
                                    path.string(), last.raw_offset + last.raw_size, shard.tar_bytes,
                                    last.stored_offset + last.stored_size, st.st_size,
                                    shard.path.filename().string()));
        }
    }
}

Pack::~Pack() {
    for (const Shard& shard : m_shards) {
        if (shard.fd >= 0) {
            ::close(shard.fd);
        }
    }
}

const PackEntry* Pack::find(const std::string& member) const {
    for (const auto& entry : m_files) {
        if (entry.path == member) {
            return &entry;
        }
    }
    return nullptr;
}

void Pack::pread_exactly(const Shard& shard, std::uint8_t* out, std::uint64_t size,
                         std::uint64_t offset, const std::string& member) const {
    std::uint64_t done = 0;
    while (done < size) {
        const ssize_t n =
            ::pread(shard.fd, out + done, size - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: cannot read member {} ({})", shard.path.string(), member,
                                    n == 0 ? "the file is truncated" : std::strerror(errno)));
        }
        done += static_cast<std::uint64_t>(n);
    }
}

std::vector<std::uint8_t> Pack::read(const PackEntry& entry) const {
    if (m_compressed) {
        return read_compressed(entry);
    }
    // The member lies inside its data file (its tar is the file: checked when it was opened).
    std::vector<std::uint8_t> bytes(entry.size);
    pread_exactly(m_shards.at(entry.shard), bytes.data(), entry.size, entry.offset, entry.path);
    return bytes;
}

std::vector<std::uint8_t> Pack::read_compressed(const PackEntry& entry) const {
    const Shard& shard = m_shards.at(entry.shard);
    const std::lock_guard lock(m_cache_mutex);
    std::vector<std::uint8_t> out;
    std::uint64_t position = entry.offset;
    const std::uint64_t end = entry.offset + entry.size;
    while (position < end) {
        // The frame holding `position`: the last one starting at or before it.
        const auto after = std::upper_bound(
            shard.chunks.begin(), shard.chunks.end(), position,
            [](std::uint64_t at, const Chunk& chunk) { return at < chunk.raw_offset; });
        const auto index = static_cast<std::size_t>(after - shard.chunks.begin()) - 1;
        const Chunk& chunk = shard.chunks[index];
        if (m_cached_shard != entry.shard || m_cached_chunk != index) {
            std::vector<std::uint8_t> stored(chunk.stored_size);
            pread_exactly(shard, stored.data(), stored.size(), chunk.stored_offset, entry.path);
            m_cached_chunk = SIZE_MAX; // stays invalid if decompression throws
            m_cached.resize(chunk.raw_size);
            decompress_zstd_frame(stored.data(), stored.size(), m_cached.data(), m_cached.size(),
                                  fmt::format("{}: frame {} (bytes {} to {}, holding member {})",
                                              shard.path.string(), index, chunk.stored_offset,
                                              chunk.stored_offset + chunk.stored_size, entry.path));
            m_cached_shard = entry.shard;
            m_cached_chunk = index;
        }
        const std::uint64_t take = std::min(end, chunk.raw_offset + chunk.raw_size) - position;
        const auto from =
            m_cached.begin() + static_cast<std::ptrdiff_t>(position - chunk.raw_offset);
        out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(take));
        position += take;
    }
    return out;
}

std::optional<PackMemberPath> find_pack_member(const fs::path& path) {
    std::error_code ec;
    if (path.empty() || fs::exists(path, ec)) {
        return std::nullopt;
    }
    fs::path member;
    for (fs::path dir = path.parent_path(); !dir.empty(); dir = dir.parent_path()) {
        member = member.empty() ? path.filename() : path.lexically_relative(dir);
        if (Pack::is_pack(dir)) {
            return PackMemberPath{dir, path.lexically_relative(dir).generic_string()};
        }
        if (dir == dir.root_path()) {
            break;
        }
    }
    return std::nullopt;
}

std::vector<std::uint8_t> maybe_gunzip(std::vector<std::uint8_t> bytes, const std::string& what,
                                       const DataBudget& budget) {
    if (bytes.size() < 2 || bytes[0] != 0x1F || bytes[1] != 0x8B) {
        return bytes;
    }
    z_stream stream{};
    if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) { // 16: gzip wrapper
        throw Error(ErrorKind::config, fmt::format("{}: inflateInit2 failed", what));
    }
    std::vector<std::uint8_t> out;
    budget.check(bytes.size() * 4 + 4096, what);
    out.resize(bytes.size() * 4 + 4096);
    stream.next_in = bytes.data();
    stream.avail_in = static_cast<uInt>(bytes.size());
    int status = Z_OK;
    while (status != Z_STREAM_END) {
        if (stream.total_out == out.size()) {
            budget.check(out.size() * 2, what);
            out.resize(out.size() * 2);
        }
        stream.next_out = out.data() + stream.total_out;
        stream.avail_out = static_cast<uInt>(out.size() - stream.total_out);
        status = inflate(&stream, Z_NO_FLUSH);
        if (status != Z_OK && status != Z_STREAM_END) {
            inflateEnd(&stream);
            throw Error(ErrorKind::config, fmt::format("{} is truncated or corrupt", what));
        }
    }
    out.resize(stream.total_out);
    inflateEnd(&stream);
    return out;
}

} // namespace dl::data
