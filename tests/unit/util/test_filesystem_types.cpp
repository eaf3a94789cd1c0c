// One table of file-system types and one function over it (adapters::filesystem_kind): the job
// store's journal decision, the data checks and staging read the same rows, so one mount is
// judged one way.
#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/util/filesystem_types.hpp>
#include <dljob/util/paths.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace dljob {
namespace {

TEST(FilesystemTypes, EachMagicAndNameAppearsOnce) {
    std::set<std::uint32_t> magics;
    std::set<std::string> names;
    for (const auto& type : util::known_filesystem_types()) {
        EXPECT_TRUE(magics.insert(type.magic).second) << type.name;
        EXPECT_TRUE(names.insert(type.name).second) << type.name;
        EXPECT_EQ(util::find_filesystem_type(type.magic), &type) << type.name;
    }
    EXPECT_EQ(util::find_filesystem_type(0x12345678), nullptr);
}

// The five that the two old tables judged differently, and the obvious ones.
TEST(FilesystemTypes, SharedAndRamDiskRows) {
    for (const char* shared : {"nfs", "lustre", "gpfs", "beegfs", "cephfs", "cifs", "smb2", "smb",
                               "panfs", "fuse", "afs", "kafs", "gfs2", "ocfs2"}) {
        bool found = false;
        for (const auto& type : util::known_filesystem_types()) {
            if (std::string(type.name) == shared) {
                found = true;
                EXPECT_TRUE(type.shared) << shared;
                EXPECT_FALSE(type.ram_disk) << shared;
            }
        }
        EXPECT_TRUE(found) << shared;
    }
    const auto* tmpfs = util::find_filesystem_type(0x01021994);
    ASSERT_NE(tmpfs, nullptr);
    EXPECT_TRUE(tmpfs->ram_disk);
    EXPECT_FALSE(tmpfs->shared);
    const auto* ext4 = util::find_filesystem_type(0xEF53);
    ASSERT_NE(ext4, nullptr);
    EXPECT_FALSE(ext4->shared);
    EXPECT_FALSE(ext4->ram_disk);
    // statfs reports f_type as a signed long on x86-64: a sign-extended magic still matches.
    const auto* cifs = util::find_filesystem_type(static_cast<std::uint64_t>(
        static_cast<std::int64_t>(static_cast<std::int32_t>(0xFF534D42U))));
    ASSERT_NE(cifs, nullptr);
    EXPECT_STREQ(cifs->name, "cifs");
}

// One answer for every caller (the job store's journal, the data checks, packing): a path not
// made yet is judged by the directory it will be made in, and statfs's silence is said.
TEST(FilesystemTypes, OneAnswerForRealMountsAndPathsNotMadeYet) {
    const auto tmp = adapters::filesystem_kind("/tmp");
    EXPECT_TRUE(tmp.known);
    const auto later = adapters::filesystem_kind("/tmp/dljob-no-such-dir/below/jobs.db");
    EXPECT_TRUE(later.known);
    EXPECT_EQ(later.name, tmp.name);
    EXPECT_EQ(later.network, tmp.network);
    EXPECT_FALSE(adapters::filesystem_kind("/proc").network);
    EXPECT_EQ(adapters::filesystem_kind("/dev/shm").name, "tmpfs");
    auto shm = adapters::filesystem_space("/dev/shm");
    ASSERT_TRUE(shm) << shm.error().message;
    EXPECT_TRUE(shm->ram_disk) << shm->type_name;
    EXPECT_EQ(shm->type_name, "tmpfs");
}

} // namespace
} // namespace dljob
