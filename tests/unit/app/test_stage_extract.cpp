#include "support/run_process.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/adapters/archive_libarchive.hpp>
#include <dljob/app/data/stage_extract.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace dljob::app {
namespace {

using test::names_in;
using test::ScratchDir;
using test::snapshot;
using test::TarBuilder;

class SafeExtraction : public ::testing::Test {
protected:
    /// Writes `archive` and extracts it into a new `out` directory of an otherwise empty
    /// scratch `target/`.
    Result<ExtractSummary> extract(const std::string& archive, ExtractLimits limits = {}) {
        test::write_file(m_dir / "in.tar", archive);
        std::filesystem::create_directories(m_dir / "target");
        return extract_archive_file(m_dir / "in.tar", m_dir / "target/out", limits);
    }
    /// Refused with `expected` in the message, and nothing left in the target directory.
    void expect_refused(const std::string& archive, const std::string& expected,
                        ExtractLimits limits = {}) {
        auto result = extract(archive, limits);
        ASSERT_FALSE(result) << "extracted an archive that should be refused (" << expected << ")";
        EXPECT_NE(result.error().message.find(expected), std::string::npos)
            << result.error().message;
        EXPECT_TRUE(names_in(m_dir.path() / "target").empty());
        EXPECT_EQ(names_in(m_dir.path()), (std::vector<std::string>{"in.tar", "target"}))
            << "something was written beside the target";
    }
    ScratchDir m_dir;
};

TEST_F(SafeExtraction, ExtractsFilesDirectoriesAndInsideLinks) {
    TarBuilder tar;
    tar.directory("a").file("a/x.txt", "hello").file("./b/c/y.bin", std::string(5000, 'y'), 0755);
    tar.file("big", std::string((5U << 20U) + 3, 'z')).symlink("a/l", "../b/c/y.bin");
    tar.file("empty", "");
    auto result = extract(tar.bytes());
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(result->files, 4U);
    EXPECT_EQ(result->symlinks, 1U);
    const auto tree = snapshot(m_dir.path() / "target/out");
    EXPECT_EQ(tree.at("a/x.txt"), "f:hello");
    EXPECT_EQ(tree.at("b/c/y.bin"), "f+x:" + std::string(5000, 'y'));
    EXPECT_EQ(tree.at("big").size(), (5U << 20U) + 3 + 2);
    EXPECT_EQ(tree.at("a/l"), "l:../b/c/y.bin");
    EXPECT_EQ(tree.at("empty"), "f:");
    EXPECT_EQ(names_in(m_dir.path() / "target"), (std::vector<std::string>{"out"}));
}

TEST_F(SafeExtraction, RefusesDotDotPaths) {
    expect_refused(TarBuilder().file("ok", "1").file("../x", "evil").bytes(), "'..'");
    expect_refused(TarBuilder().file("a/../../x", "evil").bytes(), "'..'");
}

TEST_F(SafeExtraction, RefusesAbsolutePaths) {
    expect_refused(TarBuilder().file("/tmp/dljob-evil", "evil").bytes(), "absolute");
}

TEST_F(SafeExtraction, RefusesSymlinksPointingOutside) {
    expect_refused(TarBuilder().symlink("l", "../../etc").bytes(), "outside the tree");
    expect_refused(TarBuilder().symlink("l", "/etc").bytes(), "absolute");
}

TEST_F(SafeExtraction, RefusesWritingThroughASymlink) {
    // The classic: a link, then a file "through" it. Links are made last, so the file lands in
    // a real directory and the link then collides with it.
    expect_refused(TarBuilder().symlink("l", "sub").file("l/x", "evil").bytes(),
                   "two entries with this path");
}

TEST_F(SafeExtraction, RefusesHardLinks) {
    expect_refused(TarBuilder().file("a", "1").hardlink("h", "a").bytes(), "hard link");
    expect_refused(TarBuilder().hardlink("h", "/etc/passwd").bytes(), "hard link");
}

TEST_F(SafeExtraction, RefusesDevicesAndFifos) {
    expect_refused(TarBuilder().special("null", '3').bytes(), "character device");
    expect_refused(TarBuilder().special("disk", '4').bytes(), "block device");
    expect_refused(TarBuilder().special("pipe", '6').bytes(), "FIFO");
}

TEST_F(SafeExtraction, RefusesSetuidAndSetgidBits) {
    expect_refused(TarBuilder().file("su", "x", 04755).bytes(), "setuid");
    expect_refused(TarBuilder().directory("sg", 02755).bytes(), "setgid");
}

TEST_F(SafeExtraction, StopsADecompressionBombAtTheByteBudget) {
    // 16 MiB of zeros gzip to ~16 KiB; the budget allows 1 MiB.
    test::write_file(m_dir / "bomb.tar",
                     TarBuilder().file("zeros", std::string(16U << 20U, '\0')).bytes());
    ASSERT_EQ(test::run_shell("gzip -1 " + (m_dir / "bomb.tar")).exit_code, 0);
    std::filesystem::create_directories(m_dir / "target");
    ExtractLimits limits;
    limits.max_bytes = 1U << 20U;
    auto result = extract_archive_file(m_dir / "bomb.tar.gz", m_dir / "target/out", limits);
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("budget"), std::string::npos) << result.error().message;
    EXPECT_TRUE(names_in(m_dir.path() / "target").empty());
}

TEST_F(SafeExtraction, RefusesTruncatedArchivesAndRemovesWhatWasWritten) {
    TarBuilder tar;
    tar.file("first", "complete").file("second", std::string(10000, 's'));
    // Cut inside the second member's data: the first file was already written.
    expect_refused(tar.truncated(512 + 512 + 512 + 3000), "runcated");
}

TEST_F(SafeExtraction, RefusesDuplicatePaths) {
    expect_refused(TarBuilder().file("a", "1").file("a", "2").bytes(), "two entries");
    expect_refused(TarBuilder().file("a", "1").file("a/b", "2").bytes(), "two entries");
    expect_refused(TarBuilder().directory("d").directory("d").bytes(), "second entry");
}

TEST_F(SafeExtraction, RefusesControlCharactersInNames) {
    expect_refused(TarBuilder()
                       .file(std::string("a\x01"
                                         "b"),
                             "1")
                       .bytes(),
                   "control character");
}

TEST_F(SafeExtraction, RefusesMoreEntriesThanAllowed) {
    ExtractLimits limits;
    limits.max_entries = 2;
    expect_refused(TarBuilder().file("a", "1").file("b", "2").file("c", "3").bytes(),
                   "more than 2 entries", limits);
}

TEST_F(SafeExtraction, RefusesANonArchive) {
    expect_refused(std::string(3000, 'x'), "in.tar");
}

TEST_F(SafeExtraction, RefusesAnExistingDestination) {
    std::filesystem::create_directories(m_dir / "target/out");
    test::write_file(m_dir / "in.tar", TarBuilder().file("a", "1").bytes());
    auto result = extract_archive_file(m_dir / "in.tar", m_dir / "target/out", {});
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("already exists"), std::string::npos);
}

/// Several archives into one tree, each read by its own thread (a sharded pack).
class ParallelExtraction : public SafeExtraction {
protected:
    Result<ExtractSummary> extract_all(const std::vector<std::string>& archives,
                                       ExtractLimits limits = {}) {
        std::vector<std::unique_ptr<ArchiveReader>> owned;
        std::vector<ArchiveReader*> readers;
        for (std::size_t i = 0; i < archives.size(); ++i) {
            const std::string path = m_dir / ("in" + std::to_string(i) + ".tar");
            test::write_file(path, archives[i]);
            auto reader = adapters::open_archive_reader(path);
            if (!reader) {
                return fail(reader.error());
            }
            owned.push_back(std::move(*reader));
            readers.push_back(owned.back().get());
        }
        std::filesystem::create_directories(m_dir / "target");
        return extract_archives(readers, m_dir / "target/out", limits, "shards");
    }
};

TEST_F(ParallelExtraction, BuildsOneTreeFromEveryArchive) {
    std::vector<std::string> archives;
    for (int shard = 0; shard < 4; ++shard) {
        TarBuilder tar;
        for (int i = 0; i < 200; ++i) {
            // Every shard writes into the same directories, as a pack's shards do.
            tar.file(
                fmt::format("d{}/s{}-{}.bin", i % 3, shard, i),
                std::string(static_cast<std::size_t>(100 + i), static_cast<char>('a' + shard)));
        }
        archives.push_back(tar.bytes());
    }
    auto result = extract_all(archives);
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(result->files, 800U);
    const auto tree = snapshot(m_dir.path() / "target/out");
    EXPECT_EQ(tree.size(), 803U); // the files and d0, d1, d2
    EXPECT_EQ(tree.at("d1/s2-199.bin"), "f:" + std::string(299, 'c'));
}

TEST_F(ParallelExtraction, ChecksHoldAcrossArchives) {
    // One path in two archives, read at the same time: refused whichever thread comes second.
    auto duplicate = extract_all({TarBuilder().file("a/x", "1").file("a/y", "1").bytes(),
                                  TarBuilder().file("b", "2").file("a/x", "2").bytes()});
    ASSERT_FALSE(duplicate);
    EXPECT_NE(duplicate.error().message.find("two entries"), std::string::npos)
        << duplicate.error().message;
    EXPECT_TRUE(names_in(m_dir.path() / "target").empty());

    // The budgets count every archive together.
    ExtractLimits limits;
    limits.max_entries = 3;
    std::filesystem::remove_all(m_dir.path());
    std::filesystem::create_directories(m_dir.path());
    auto too_many = extract_all({TarBuilder().file("a", "1").file("b", "2").bytes(),
                                 TarBuilder().file("c", "3").file("d", "4").bytes()},
                                limits);
    ASSERT_FALSE(too_many);
    EXPECT_NE(too_many.error().message.find("more than 3 entries"), std::string::npos)
        << too_many.error().message;
    EXPECT_TRUE(names_in(m_dir.path() / "target").empty());
}

TEST_F(ParallelExtraction, AnUnsafeEntryInOneArchiveStopsAllAndLeavesNothing) {
    TarBuilder good;
    for (int i = 0; i < 2000; ++i) {
        good.file(fmt::format("ok/{}", i), "data");
    }
    auto result = extract_all({good.bytes(), TarBuilder().file("../evil", "x").bytes()});
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("'..'"), std::string::npos) << result.error().message;
    EXPECT_TRUE(names_in(m_dir.path() / "target").empty());
}

} // namespace
} // namespace dljob::app
