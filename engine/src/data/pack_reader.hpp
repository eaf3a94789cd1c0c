#pragma once
// Reads datasets packed by `dljob pack` in place, through their index: no extraction, no small
// files. The pack format (docs/data.md) is a directory holding
//   data.tar   a plain tar; each member's bytes are contiguous at a known offset,
//   index.tsv  "# dljob-index v1" header, then `type offset size label path` per member
//              (tab-separated; type f or d; label an integer or -),
//   manifest.json (not needed here).
// Tar members at known offsets need no tar library: one pread per member.
//
// Format version 2 (`dljob pack --compress zstd` or `--shard-size`) stores the tar as several
// data files listed in manifest.json (`shards[].file`), gives index.tsv a shard column after
// the type ("# dljob-index v2"), and for zstd adds chunks.tsv: per shard, where each
// independent frame's uncompressed bytes start and where its compressed bytes sit. A member
// is read by decompressing the frames that cover it; the last frame is kept, so reading
// members in index order decompresses each frame once.

#include "data/data_budget.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dl::data {

struct PackEntry {
    std::uint64_t offset = 0; // of the member's bytes in its shard's (uncompressed) tar
    std::uint64_t size = 0;
    std::uint32_t shard = 0;
    std::optional<std::int64_t> label;
    std::string path;
};

class Pack {
public:
    /// Whether `dir` is a pack (holds index.tsv, and data.tar or a manifest.json).
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
    /// The member's bytes (pread from its data file, decompressed when the pack is). Memory
    /// follows what is read, not what the index claims: a compressed member grows frame by
    /// frame as each one decompresses. Safe to call from several threads.
    [[nodiscard]] std::vector<std::uint8_t> read(const PackEntry& entry) const;
    [[nodiscard]] const std::filesystem::path& dir() const { return m_dir; }
    [[nodiscard]] bool compressed() const { return m_compressed; }

private:
    struct Chunk {
        std::uint64_t raw_offset = 0;
        std::uint64_t raw_size = 0;
        std::uint64_t stored_offset = 0;
        std::uint64_t stored_size = 0;
    };
    struct Shard {
        std::filesystem::path path;
        int fd = -1;
        std::uint64_t tar_bytes = 0; // uncompressed
        std::vector<Chunk> chunks;   // compressed packs: sorted, contiguous from 0
    };
    void open_shards();
    void load_chunks();
    void pread_exactly(const Shard& shard, std::uint8_t* out, std::uint64_t size,
                       std::uint64_t offset, const std::string& member) const;
    [[nodiscard]] std::vector<std::uint8_t> read_compressed(const PackEntry& entry) const;

    std::filesystem::path m_dir;
    std::vector<PackEntry> m_files; // regular files only, in index order
    std::vector<Shard> m_shards;
    bool m_compressed = false;
    int m_version = 1;
    // The last decompressed frame (members are small next to a frame and read in order).
    mutable std::mutex m_cache_mutex;
    mutable std::size_t m_cached_shard = SIZE_MAX;
    mutable std::size_t m_cached_chunk = SIZE_MAX;
    mutable std::vector<std::uint8_t> m_cached;
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

/// gunzips `bytes` when they start with the gzip magic; returns them as they are otherwise. The
/// output is held to `budget` as it grows (a few KB of gzip can inflate to gigabytes).
std::vector<std::uint8_t> maybe_gunzip(std::vector<std::uint8_t> bytes, const std::string& what,
                                       const DataBudget& budget);

} // namespace dl::data
