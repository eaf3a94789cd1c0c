#include <dljob/util/paths.hpp>

#include <sys/vfs.h>

#include <array>
#include <cstdint>
#include <cstdlib>

namespace dljob::util {
namespace {

std::filesystem::path env_path(const char* name) {
    const char* value = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read at startup
    return value != nullptr && *value != '\0' ? std::filesystem::path(value)
                                              : std::filesystem::path();
}

} // namespace

std::filesystem::path data_home() {
    auto xdg = env_path("XDG_DATA_HOME");
    if (!xdg.empty() && xdg.is_absolute()) {
        return xdg;
    }
    auto home = env_path("HOME");
    return (home.empty() ? std::filesystem::path(".") : home) / ".local" / "share";
}

std::filesystem::path job_store_path() {
    auto path = env_path("DLJOB_STORE");
    return path.empty() ? data_home() / "dljob" / "jobs.db" : path;
}

std::filesystem::path runs_dir() {
    auto path = env_path("DLJOB_RUNS_DIR");
    return path.empty() ? data_home() / "dljob" / "runs" : path;
}

bool is_network_filesystem(const std::filesystem::path& path) {
    // statfs magic numbers (linux/magic.h and the file systems' own headers).
    constexpr std::array<std::uint32_t, 14> network{
        0x6969,     // NFS
        0x0BD00BD0, // Lustre
        0x47504653, // GPFS
        0x19830326, // BeeGFS / FhGFS
        0xFF534D42, // CIFS
        0xFE534D42, // SMB2
        0x517B,     // SMB
        0x00C36400, // Ceph
        0x65735546, // FUSE
        0x5346414F, // AFS
        0x6B414653, // kAFS
        0xAAD7AAEA, // PanFS
        0x01161970, // GFS2
        0x7461636F, // OCFS2
    };
    std::filesystem::path probe = path;
    std::error_code ec;
    while (!probe.empty() && !std::filesystem::exists(probe, ec)) {
        if (probe == probe.parent_path()) {
            break;
        }
        probe = probe.parent_path();
    }
    struct statfs info {};
    if (::statfs(probe.empty() ? "." : probe.c_str(), &info) != 0) {
        return true; // unknown: assume the cautious answer
    }
    const auto type = static_cast<std::uint32_t>(info.f_type);
    for (auto magic : network) {
        if (magic == type) {
            return true;
        }
    }
    return false;
}

} // namespace dljob::util
