#include <dljob/util/filesystem_types.hpp>

#include <array>

namespace dljob::util {
namespace {

// statfs f_type magic numbers (linux/magic.h and the vendors' headers, which are not installed
// everywhere). FUSE counts as shared: sshfs, s3fs and the like are the usual FUSE mounts on a
// cluster. GFS2 and OCFS2 are shared-disk cluster file systems: mounted on many nodes at once.
constexpr std::array<FilesystemType, 20> types{{
    {0xEF53, "ext4", false, false},      {0x58465342, "xfs", false, false},
    {0x9123683E, "btrfs", false, false}, {0x01021994, "tmpfs", false, true},
    {0x858458F6, "ramfs", false, true},  {0x794C7630, "overlayfs", false, false},
    {0x6969, "nfs", true, false},        {0x0BD00BD0, "lustre", true, false},
    {0x47504653, "gpfs", true, false},   {0x19830326, "beegfs", true, false},
    {0x00C36400, "cephfs", true, false}, {0xFF534D42, "cifs", true, false},
    {0xFE534D42, "smb2", true, false},   {0x517B, "smb", true, false},
    {0xAAD7AAEA, "panfs", true, false},  {0x65735546, "fuse", true, false},
    {0x5346414F, "afs", true, false},    {0x6B414653, "kafs", true, false},
    {0x01161970, "gfs2", true, false},   {0x7461636F, "ocfs2", true, false},
}};

} // namespace

std::span<const FilesystemType> known_filesystem_types() {
    return types;
}

const FilesystemType* find_filesystem_type(std::uint64_t f_type) {
    const auto magic = static_cast<std::uint32_t>(f_type);
    for (const FilesystemType& type : types) {
        if (type.magic == magic) {
            return &type;
        }
    }
    return nullptr;
}

} // namespace dljob::util
