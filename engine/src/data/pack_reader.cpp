#include "data/pack_reader.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

namespace dl::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* index_name = "index.tsv";
constexpr const char* archive_name = "data.tar";
constexpr std::string_view index_magic = "# dljob-index v1";

template <class T> bool parse_number(std::string_view text, T& value) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc{} && ptr == text.data() + text.size() && !text.empty();
}

} // namespace

bool Pack::is_pack(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / index_name, ec) && fs::is_regular_file(dir / archive_name, ec);
}

Pack::Pack(const fs::path& dir) : m_dir(dir) {
    const fs::path index = dir / index_name;
    std::ifstream in(index);
    if (!in) {
        throw Error(ErrorKind::config, fmt::format("cannot read {}", index.string()));
    }
    const fs::path archive = dir / archive_name;
    m_fd = ::open(archive.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (m_fd < 0 || ::fstat(m_fd, &st) != 0) {
        throw Error(ErrorKind::config,
                    fmt::format("cannot open {}: {}", archive.string(), std::strerror(errno)));
    }
    m_archive_size = static_cast<std::uint64_t>(st.st_size);
    std::string line;
    std::uint64_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        const auto bad = [&](const char* what) {
            return Error(ErrorKind::config,
                         fmt::format("{}:{}: {} (expected type, offset, size, label, path "
                                     "separated by tabs)",
                                     index.string(), number, what));
        };
        if (number == 1) {
            if (line.rfind(index_magic, 0) != 0) {
                throw bad("not a dljob index (no '# dljob-index v1' header)");
            }
            continue;
        }
        std::vector<std::string_view> fields;
        std::string_view rest(line);
        for (int i = 0; i < 4; ++i) {
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
        entry.path = std::string(rest);
        if (!parse_number(fields[1], entry.offset) || !parse_number(fields[2], entry.size)) {
            throw bad("offset or size is not a number");
        }
        if (entry.offset > m_archive_size || entry.size > m_archive_size - entry.offset) {
            throw bad("member lies beyond the end of data.tar");
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

Pack::~Pack() {
    if (m_fd >= 0) {
        ::close(m_fd);
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

std::vector<std::uint8_t> Pack::read(const PackEntry& entry) const {
    std::vector<std::uint8_t> bytes(entry.size);
    std::uint64_t done = 0;
    while (done < entry.size) {
        const ssize_t n = ::pread(m_fd, bytes.data() + done, entry.size - done,
                                  static_cast<off_t>(entry.offset + done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: cannot read member {} ({})",
                                    (m_dir / archive_name).string(), entry.path,
                                    n == 0 ? "data.tar is truncated" : std::strerror(errno)));
        }
        done += static_cast<std::uint64_t>(n);
    }
    return bytes;
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

std::vector<std::uint8_t> maybe_gunzip(std::vector<std::uint8_t> bytes, const std::string& what) {
    if (bytes.size() < 2 || bytes[0] != 0x1F || bytes[1] != 0x8B) {
        return bytes;
    }
    z_stream stream{};
    if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) { // 16: gzip wrapper
        throw Error(ErrorKind::config, fmt::format("{}: inflateInit2 failed", what));
    }
    std::vector<std::uint8_t> out;
    out.resize(bytes.size() * 4 + 4096);
    stream.next_in = bytes.data();
    stream.avail_in = static_cast<uInt>(bytes.size());
    int status = Z_OK;
    while (status != Z_STREAM_END) {
        if (stream.total_out == out.size()) {
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
