#pragma once
// Reads datasets packed by `dljob pack` in place, through their index: no extraction, no small
// files. The pack format (docs/data.md) is a directory holding
//   data.tar   a plain tar; each member's bytes are contiguous at a known offset,
//   index.tsv  "# dljob-index v1" header, then `type offset size label path` per member
//              (tab-separated; type f or d; label an integer or -),
//   manifest.json (not needed here).
// Tar members at known offsets need no tar library: one pread per member.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dl::data {

struct PackEntry {
    std::uint64_t offset = 0; // of the member's bytes in data.tar
    std::uint64_t size = 0;
    std::optional<std::int64_t> label;
    std::string path;
};

class Pack {
public:
    /// Whether `dir` is a pack (holds index.tsv and data.tar).
    static bool is_pack(const std::filesystem::path& dir);
    /// Throws dl::Error(config) naming index.tsv:line for a malformed index.
    explicit Pack(const std::filesystem::path& dir);
    ~Pack();
    Pack(const Pack&) = delete;
    Pack& operator=(const Pack&) = delete;
    Pack(Pack&&) = delete;
    Pack& operator=(Pack&&) = delete;

    [[nodiscard]] const std::vector<PackEntry>& files() const { return m_files; }
    [[nodiscard]] const PackEntry* find(const std::string& member) const;
    /// The member's bytes (pread from data.tar).
    [[nodiscard]] std::vector<std::uint8_t> read(const PackEntry& entry) const;
    [[nodiscard]] const std::filesystem::path& dir() const { return m_dir; }

private:
    std::filesystem::path m_dir;
    std::vector<PackEntry> m_files; // regular files only, in index order
    int m_fd = -1;
    std::uint64_t m_archive_size = 0;
};

/// A path that names a member of a pack: `<pack dir>/<member path>`, where the pack directory
/// is the nearest ancestor of `path` that is a pack and `path` itself does not exist. This lets
/// a config say `source: train-images-idx3-ubyte.gz` and read the same file from a plain
/// directory, an extracted tree or a pack, whichever --data-dir names.
struct PackMemberPath {
    std::filesystem::path pack;
    std::string member;
};
std::optional<PackMemberPath> find_pack_member(const std::filesystem::path& path);

/// gunzips `bytes` when they start with the gzip magic; returns them as they are otherwise.
std::vector<std::uint8_t> maybe_gunzip(std::vector<std::uint8_t> bytes, const std::string& what);

} // namespace dl::data
