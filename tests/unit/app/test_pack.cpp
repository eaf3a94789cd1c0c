#include "support/run_process.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/app/pack.hpp>
#include <dljob/domain/dataset.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace dljob::app {
namespace {

using test::names_in;
using test::ScratchDir;
using test::snapshot;

class PackService : public ::testing::Test {
protected:
    void SetUp() override {
        test::write_file(m_dir.path() / "src/train/0/a.pgm", "P5 28 28 255\nAAAA");
        test::write_file(m_dir.path() / "src/train/1/b.pgm", std::string(3000, 'b'));
        test::write_file(m_dir.path() / "src/test/0/c.pgm", "");
        test::write_file(m_dir.path() / "src/README", "fashion");
        std::filesystem::create_directories(m_dir.path() / "src/empty");
    }
    Result<PackSummary> pack(const std::string& source, const std::string& output,
                             const std::string& root = {}) {
        return pack_dataset({m_dir / source, m_dir / output, root.empty() ? "" : m_dir / root}, {});
    }
    ScratchDir m_dir;
};

TEST_F(PackService, PacksATreeThatGnuTarListsAndExtracts) {
    auto summary = pack("src", "ds");
    ASSERT_TRUE(summary) << summary.error().message;
    EXPECT_EQ(summary->manifest.files, 4U);
    EXPECT_EQ(summary->manifest.directories, 6U);
    EXPECT_EQ(names_in(m_dir.path() / "ds"),
              (std::vector<std::string>{"data.tar", "index.tsv", "manifest.json"}));
    auto listed = test::run_shell("tar -tf " + (m_dir / "ds/data.tar"));
    ASSERT_EQ(listed.exit_code, 0) << listed.output;
    for (const char* member :
         {"README", "empty/", "train/0/a.pgm", "train/1/b.pgm", "test/0/c.pgm"}) {
        EXPECT_NE(listed.output.find(member), std::string::npos) << member << " not in\n"
                                                                 << listed.output;
    }
    std::filesystem::create_directories(m_dir.path() / "untarred");
    ASSERT_EQ(test::run_shell("tar -xf " + (m_dir / "ds/data.tar") + " -C " + (m_dir / "untarred"))
                  .exit_code,
              0);
    EXPECT_EQ(snapshot(m_dir.path() / "untarred"), snapshot(m_dir.path() / "src"));
}

TEST_F(PackService, IndexOffsetsPointAtEachMembersBytes) {
    ASSERT_TRUE(pack("src", "ds"));
    const std::string archive = test::read_file(m_dir.path() / "ds/data.tar");
    std::ifstream index(m_dir.path() / "ds/index.tsv");
    std::string line;
    std::getline(index, line);
    EXPECT_EQ(line, index_header_line);
    int files = 0;
    for (std::uint64_t number = 2; std::getline(index, line); ++number) {
        auto entry = parse_index_line(line, "index.tsv", number);
        ASSERT_TRUE(entry) << entry.error().message;
        if (entry->type == IndexEntryType::file) {
            ++files;
            EXPECT_EQ(archive.substr(entry->offset, entry->size),
                      test::read_file(m_dir.path() / "src" / entry->path))
                << entry->path;
        }
    }
    EXPECT_EQ(files, 4);
}

TEST_F(PackService, TheSameFilesGiveTheSameContentHash) {
    auto first = pack("src", "ds1");
    ASSERT_TRUE(first);
    // Different mtimes and permissions of the directories do not change the pack.
    std::filesystem::last_write_time(m_dir.path() / "src/README",
                                     std::filesystem::file_time_type::clock::now() -
                                         std::chrono::hours(50));
    auto second = pack("src", "ds2");
    ASSERT_TRUE(second);
    EXPECT_EQ(first->manifest.content_hash, second->manifest.content_hash);
    test::write_file(m_dir.path() / "src/README", "Fashion");
    auto third = pack("src", "ds3");
    ASSERT_TRUE(third);
    EXPECT_NE(first->manifest.content_hash, third->manifest.content_hash);
}

TEST_F(PackService, PacksAnImageListWithItsLabels) {
    test::write_file(m_dir.path() / "src/train.txt",
                     "train/0/a.pgm 0\n# a comment\n\ntrain/1/b.pgm 1\r\ntest/0/c.pgm 0\n");
    auto summary = pack("src/train.txt", "ds");
    ASSERT_TRUE(summary) << summary.error().message;
    EXPECT_EQ(summary->manifest.files, 3U);
    EXPECT_TRUE(summary->manifest.labelled);
    const std::string index = test::read_file(m_dir.path() / "ds/index.tsv");
    EXPECT_NE(index.find("\t3000\t1\ttrain/1/b.pgm\n"), std::string::npos) << index;
    EXPECT_EQ(index.find("README"), std::string::npos);
}

TEST_F(PackService, ImageListPathsStartAtRoot) {
    test::write_file(m_dir.path() / "lists/val.txt", "train/1/b.pgm 4\n");
    auto summary = pack("lists/val.txt", "ds", "src");
    ASSERT_TRUE(summary) << summary.error().message;
    EXPECT_EQ(summary->manifest.payload_bytes, 3000U);
}

TEST_F(PackService, ImageListWithABadLabelNamesTheLine) {
    test::write_file(m_dir.path() / "src/train.txt", "train/0/a.pgm 0\ntrain/1/b.pgm one\n");
    auto summary = pack("src/train.txt", "ds");
    ASSERT_FALSE(summary);
    EXPECT_NE(summary.error().message.find("train.txt:2"), std::string::npos)
        << summary.error().message;
    EXPECT_FALSE(std::filesystem::exists(m_dir.path() / "ds"));
}

TEST_F(PackService, RefusesASymlinkAndLeavesNothingBehind) {
    std::filesystem::create_symlink("/etc/passwd", m_dir.path() / "src/train/link");
    auto summary = pack("src", "ds");
    ASSERT_FALSE(summary);
    EXPECT_NE(summary.error().message.find("symbolic link"), std::string::npos)
        << summary.error().message;
    EXPECT_EQ(names_in(m_dir.path()), (std::vector<std::string>{"src"}));
}

TEST_F(PackService, RefusesAnExistingOutputOrOneInsideTheSource) {
    std::filesystem::create_directories(m_dir.path() / "ds");
    auto exists = pack("src", "ds");
    ASSERT_FALSE(exists);
    EXPECT_NE(exists.error().message.find("already exists"), std::string::npos);
    auto inside = pack("src", "src/ds");
    ASSERT_FALSE(inside);
    EXPECT_NE(inside.error().message.find("inside the tree"), std::string::npos);
}

TEST_F(PackService, ThePackCommandReportsWhatItPacked) {
    auto run = test::run_shell(std::string(DLJOB_BINARY) + " pack " + (m_dir / "src") + " -o " +
                               (m_dir / "ds"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("packed 4 files"), std::string::npos) << run.output;
    // Not a terminal: no progress line.
    EXPECT_EQ(run.output.find("packing:"), std::string::npos) << run.output;
    auto missing = test::run_shell(std::string(DLJOB_BINARY) + " pack " + (m_dir / "nope") +
                                   " -o " + (m_dir / "ds2"));
    EXPECT_EQ(missing.exit_code, 7) << missing.output;
}

} // namespace
} // namespace dljob::app
