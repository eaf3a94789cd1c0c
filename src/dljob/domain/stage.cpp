#include <dljob/domain/site_profile.hpp>
#include <dljob/domain/stage.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace dljob {

const char* to_string(ArchiveEntryType type) noexcept {
    switch (type) {
    case ArchiveEntryType::file:
        return "regular file";
    case ArchiveEntryType::directory:
        return "directory";
    case ArchiveEntryType::symlink:
        return "symbolic link";
    case ArchiveEntryType::hardlink:
        return "hard link";
    case ArchiveEntryType::character_device:
        return "character device";
    case ArchiveEntryType::block_device:
        return "block device";
    case ArchiveEntryType::fifo:
        return "FIFO";
    case ArchiveEntryType::socket:
        return "socket";
    case ArchiveEntryType::other:
        break;
    }
    return "unknown entry type";
}

std::optional<std::string> expand_variables(const std::string& text, const GetEnv& getenv) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '$') {
            out += text[i];
            continue;
        }
        std::string name;
        if (i + 1 < text.size() && text[i + 1] == '{') {
            const std::size_t close = text.find('}', i + 2);
            if (close == std::string::npos) {
                return std::nullopt;
            }
            name = text.substr(i + 2, close - i - 2);
            i = close;
        } else {
            std::size_t j = i + 1;
            while (j < text.size() &&
                   (std::isalnum(static_cast<unsigned char>(text[j])) != 0 || text[j] == '_')) {
                ++j;
            }
            name = text.substr(i + 1, j - i - 1);
            i = j - 1;
        }
        const auto value = name.empty() ? std::nullopt : getenv(name);
        if (!value || value->empty()) {
            return std::nullopt;
        }
        out += *value;
    }
    return out;
}

Result<StageTarget> resolve_stage_target(const std::string& to, const GetEnv& getenv,
                                         const SiteProfile* site) {
    if (to.empty()) {
        return fail(ErrorCode::usage, "--to is empty",
                    "use --to tmp (node-local disk), --to ramdisk, or --to DIRECTORY");
    }
    StageTarget target;
    if (to != "tmp" && to != "ramdisk") {
        target.kind = StageTierKind::path;
        target.directory = to;
        target.chosen_because = "--to " + to;
        return target;
    }
    target.kind = to == "tmp" ? StageTierKind::tmp : StageTierKind::ramdisk;
    std::string unused_tier; // why the site's own tier was not taken
    if (site != nullptr) {
        if (const StorageTier* tier = site->find_storage(to == "tmp" ? "node-local" : "ramdisk")) {
            if (auto path = expand_variables(tier->path, getenv)) {
                target.directory = *path;
                target.chosen_because =
                    fmt::format("site {} storage tier {} ({})", site->name, tier->name, tier->path);
                return target;
            }
            unused_tier = fmt::format("the path of site {}'s {} tier ({}) names a variable "
                                      "that is not set here",
                                      site->name, tier->name, tier->path);
        } else {
            unused_tier = fmt::format("site {} has no {} storage tier", site->name,
                                      to == "tmp" ? "node-local" : "ramdisk");
        }
    }
    // A RAM disk is the node's memory: staging there where the site's profile does not name
    // one (a node whose /dev/shm is small, or counted against the job) deserves a word.
    const auto warn = [&] {
        if (target.kind == StageTierKind::ramdisk && !unused_tier.empty()) {
            target.warning =
                fmt::format("warning: {}: --to ramdisk uses {} ({}), node memory this site's "
                            "profile says nothing about",
                            unused_tier, target.directory, target.chosen_because);
        }
    };
    // Job-private directories first (Slurm creates $SLURM_TMPDIR per job on each node), then
    // what the user or site exported, then the node-wide default.
    static const std::array<const char*, 3> tmp_variables{"SLURM_TMPDIR", "TMPDIR", "LSCRATCH"};
    static const std::array<const char*, 1> ram_variables{"RAMDISK"};
    const auto variables =
        target.kind == StageTierKind::tmp
            ? std::vector<const char*>(tmp_variables.begin(), tmp_variables.end())
            : std::vector<const char*>(ram_variables.begin(), ram_variables.end());
    for (const char* variable : variables) {
        if (auto value = getenv(variable); value && !value->empty()) {
            target.directory = *value;
            target.chosen_because = fmt::format("${}", variable);
            warn();
            return target;
        }
    }
    target.directory = target.kind == StageTierKind::tmp ? "/tmp" : "/dev/shm";
    target.chosen_because = "default " + target.directory;
    warn();
    return target;
}

std::uint64_t default_ram_disk_reserve(const FilesystemSpace& space) {
    constexpr std::uint64_t floor = std::uint64_t{256} << 20U;
    return std::max(floor, space.bytes_total / 20);
}

std::string human_bytes(std::uint64_t bytes) {
    static const std::array<const char*, 5> units{"B", "KiB", "MiB", "GiB", "TiB"};
    auto value = static_cast<double>(bytes);
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < units.size()) {
        value /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

Result<void> check_space(const SpaceNeed& need, const FilesystemSpace& space, std::uint64_t reserve,
                         const std::string& target) {
    const std::uint64_t usable =
        space.bytes_available > reserve ? space.bytes_available - reserve : 0;
    if (need.bytes > usable) {
        return fail(ErrorCode::io,
                    fmt::format("{} ({}) has {} free{}, the stage needs {} (each file rounded up "
                                "to a {}-byte block)",
                                target, space.type_name, human_bytes(space.bytes_available),
                                reserve > 0 ? fmt::format(" of which {} is kept in reserve",
                                                          human_bytes(reserve))
                                            : std::string(),
                                human_bytes(need.bytes), space.block_size),
                    "stage without --extract (one file), pick another --to, or free space; "
                    "--reserve changes the RAM-disk reserve");
    }
    if (space.inodes_reported && need.inodes > space.inodes_available) {
        return fail(ErrorCode::io,
                    fmt::format("{} has {} free inodes, the stage needs {} (one per file and "
                                "directory)",
                                target, space.inodes_available, need.inodes),
                    "stage without --extract (a few files), or pick another --to");
    }
    return {};
}

} // namespace dljob
