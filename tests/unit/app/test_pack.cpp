#include "support/run_process.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/adapters/compress_zstd.hpp>
#include <dljob/app/data/pack.hpp>
#include <dljob/domain/dataset.hpp>

#include <gtest/gtest.h>
#include <sys/stat.h>

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

// A list follows the tree's rule: no link is followed, whether the line names the link itself
// or a path through a linked directory, and wherever the link points.
TEST_F(PackService, ImageListRefusesSymlinksAsATreeDoes) {
    test::write_file(m_dir.path() / "outside/secret.pgm", "not in the tree");
    std::filesystem::create_symlink(m_dir.path() / "outside/secret.pgm",
                                    m_dir.path() / "src/train/out.pgm");
    std::filesystem::create_symlink("a.pgm", m_dir.path() / "src/train/0/same.pgm");
    std::filesystem::create_directory_symlink(m_dir.path() / "outside",
                                              m_dir.path() / "src/train/linked");
    for (const char* line : {"train/out.pgm 1\n", "train/0/same.pgm 1\n",
                             "train/linked/secret.pgm 1\n", "./train//linked/secret.pgm 1\n"}) {
        test::write_file(m_dir.path() / "src/list.txt", std::string("train/0/a.pgm 0\n") + line);
        auto summary = pack("src/list.txt", "ds");
        ASSERT_FALSE(summary) << line;
        EXPECT_NE(summary.error().message.find("list.txt:2"), std::string::npos)
            << summary.error().message;
        EXPECT_NE(summary.error().message.find("is a symbolic link"), std::string::npos)
            << summary.error().message;
        EXPECT_EQ(names_in(m_dir.path()), (std::vector<std::string>{"outside", "src"})) << line;
    }
    // The tree with the same links: refused too.
    auto tree = pack("src", "ds");
    ASSERT_FALSE(tree);
    EXPECT_NE(tree.error().message.find("symbolic link"), std::string::npos);
}

TEST_F(PackService, ImageListNamingAFileTwiceIsRefusedAtPackTime) {
    for (const char* second :
         {"train/0/a.pgm 1\n", "./train/0/a.pgm 0\n", "train//0/./a.pgm 3\n"}) {
        test::write_file(m_dir.path() / "src/list.txt",
                         std::string("train/0/a.pgm 0\ntrain/1/b.pgm 1\n") + second);
        auto summary = pack("src/list.txt", "ds");
        ASSERT_FALSE(summary) << second;
        EXPECT_NE(summary.error().message.find("list.txt:3: train/0/a.pgm is already listed on "
                                               "line 1"),
                  std::string::npos)
            << summary.error().message;
        EXPECT_EQ(names_in(m_dir.path()), (std::vector<std::string>{"src"}));
    }
}

// A FIFO's open waits for a writer: named and refused instead, as a member, in a list, or as
// the list itself.
TEST_F(PackService, RefusesAFifoWhereverItIsWithoutWaiting) {
    ASSERT_EQ(mkfifo((m_dir / "src/train/pipe.pgm").c_str(), 0600), 0);
    test::write_file(m_dir.path() / "src/list.txt", "train/pipe.pgm 0\n");
    auto listed = pack("src/list.txt", "ds");
    ASSERT_FALSE(listed);
    EXPECT_NE(listed.error().message.find("pipe.pgm is a FIFO, expected a regular file"),
              std::string::npos)
        << listed.error().message;
    auto tree = pack("src", "ds");
    ASSERT_FALSE(tree);
    EXPECT_NE(tree.error().message.find("pipe.pgm"), std::string::npos) << tree.error().message;
    ASSERT_EQ(mkfifo((m_dir / "list-pipe").c_str(), 0600), 0);
    auto list_fifo = pack("list-pipe", "ds");
    ASSERT_FALSE(list_fifo);
    EXPECT_NE(list_fifo.error().message.find("list-pipe is a FIFO"), std::string::npos)
        << list_fifo.error().message;
    EXPECT_EQ(names_in(m_dir.path()), (std::vector<std::string>{"list-pipe", "src"}));
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

/// The uncompressed tar of data file `shard`, rebuilt frame by frame from chunks.tsv alone.
std::string tar_from_chunks(const std::filesystem::path& pack, const DatasetManifest& manifest,
                            std::uint32_t shard) {
    const std::string stored = test::read_file(pack / manifest.shards.at(shard).file);
    std::ifstream chunks(pack / dataset_chunks_name);
    std::string line;
    std::getline(chunks, line);
    EXPECT_EQ(line, chunks_header_line);
    std::string tar;
    for (std::uint64_t number = 2; std::getline(chunks, line); ++number) {
        auto chunk = parse_chunk_line(line, "chunks.tsv", number);
        EXPECT_TRUE(chunk) << chunk.error().message;
        if (!chunk || chunk->shard != shard) {
            continue;
        }
        EXPECT_EQ(chunk->raw_offset, tar.size());
        auto raw = adapters::zstd_decompress_frame(stored.data() + chunk->stored_offset,
                                                   chunk->stored_size, chunk->raw_size, "frame");
        EXPECT_TRUE(raw) << raw.error().message;
        if (raw) {
            tar.append(raw->data(), raw->size());
        }
    }
    return tar;
}

/// Every file line of a version 2 index: each member's bytes, found at its shard and offset in
/// `tars`, equal the source file.
int check_members(const std::filesystem::path& pack, const std::filesystem::path& source,
                  const std::vector<std::string>& tars) {
    std::ifstream index(pack / dataset_index_name);
    std::string line;
    std::getline(index, line);
    EXPECT_EQ(line, index_header_line_v2);
    int files = 0;
    for (std::uint64_t number = 2; std::getline(index, line); ++number) {
        auto entry = parse_index_line(line, "index.tsv", number, dataset_layout_format_version);
        EXPECT_TRUE(entry) << entry.error().message;
        if (!entry || entry->type != IndexEntryType::file) {
            continue;
        }
        ++files;
        EXPECT_LT(entry->shard, tars.size()) << entry->path;
        if (entry->shard < tars.size()) {
            EXPECT_EQ(tars[entry->shard].substr(entry->offset, entry->size),
                      test::read_file(source / entry->path))
                << entry->path << " in shard " << entry->shard;
        }
    }
    return files;
}

TEST_F(PackService, CompressedPackIsSeekableZstdThatTarReads) {
    // More than one 4 MiB frame, so members straddle frames.
    std::string big(5U << 20U, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) {
        big[i] = static_cast<char>((i * 2654435761U) >> 13U);
    }
    test::write_file(m_dir.path() / "src/train/big.bin", big);
    PackRequest request{m_dir / "src", m_dir / "ds", ""};
    ASSERT_TRUE(parse_compression("zstd:5", request));
    auto summary = pack_dataset(request, {});
    ASSERT_TRUE(summary) << summary.error().message;
    const auto& m = summary->manifest;
    EXPECT_EQ(m.version, dataset_layout_format_version);
    EXPECT_EQ(m.compression, "zstd");
    EXPECT_EQ(m.compression_level, 5);
    EXPECT_EQ(
        names_in(m_dir.path() / "ds"),
        (std::vector<std::string>{"chunks.tsv", "data.tar.zst", "index.tsv", "manifest.json"}));
    const std::string tar = tar_from_chunks(m_dir.path() / "ds", m, 0);
    EXPECT_EQ(tar.size(), m.shards.at(0).tar_bytes);
    EXPECT_GT(tar.size(), pack_chunk_bytes) << "expected more than one frame";
    EXPECT_EQ(check_members(m_dir.path() / "ds", m_dir.path() / "src", {tar}), 5);
    auto reparsed =
        parse_manifest(test::read_file(m_dir.path() / "ds/manifest.json"), "manifest.json");
    ASSERT_TRUE(reparsed) << reparsed.error().message;
    EXPECT_EQ(reparsed->content_hash, m.content_hash);
    EXPECT_EQ(reparsed->chunks_hash, m.chunks_hash);

    if (test::run_shell("command -v zstd >/dev/null").exit_code != 0) {
        GTEST_SKIP() << "zstd is not installed: the check with the real tar --zstd is skipped";
    }
    const std::string archive = m_dir / "ds/data.tar.zst";
    auto listed = test::run_shell("tar --zstd -tf " + archive);
    ASSERT_EQ(listed.exit_code, 0) << listed.output;
    for (const char* member : {"README", "empty/", "train/0/a.pgm", "train/big.bin"}) {
        EXPECT_NE(listed.output.find(member), std::string::npos) << member << " not in\n"
                                                                 << listed.output;
    }
    std::filesystem::create_directories(m_dir.path() / "untarred");
    ASSERT_EQ(test::run_shell("zstd -dc " + archive + " | tar -xf - -C " + (m_dir / "untarred"))
                  .exit_code,
              0);
    EXPECT_EQ(snapshot(m_dir.path() / "untarred"), snapshot(m_dir.path() / "src"));
}

TEST_F(PackService, ShardsHoldWholeMembersAndEachIsATarOfItsOwn) {
    for (int i = 0; i < 6; ++i) {
        test::write_file(m_dir.path() / ("src/many/" + std::to_string(i)),
                         std::string(3000, static_cast<char>('k' + i)));
    }
    PackRequest request{m_dir / "src", m_dir / "ds", ""};
    request.shard_bytes = 8192;
    auto summary = pack_dataset(request, {});
    ASSERT_TRUE(summary) << summary.error().message;
    const auto& m = summary->manifest;
    ASSERT_GE(m.shards.size(), 3U);
    std::vector<std::string> tars;
    std::uint64_t stored = 0;
    for (std::size_t i = 0; i < m.shards.size(); ++i) {
        EXPECT_EQ(m.shards[i].file,
                  dataset_shard_file_name(static_cast<std::uint32_t>(i), true, false));
        tars.push_back(test::read_file(m_dir.path() / "ds" / m.shards[i].file));
        stored += tars.back().size();
        EXPECT_EQ(tars.back().size(), m.shards[i].bytes);
        // A member never spans shards, so a shard stays within the size unless one member
        // alone is larger (none is here).
        EXPECT_LE(tars.back().size(), request.shard_bytes) << m.shards[i].file;
        auto listed = test::run_shell("tar -tf " + (m_dir / "ds/" + m.shards[i].file));
        EXPECT_EQ(listed.exit_code, 0) << m.shards[i].file << ": " << listed.output;
    }
    EXPECT_EQ(stored, m.archive_bytes);
    EXPECT_EQ(check_members(m_dir.path() / "ds", m_dir.path() / "src", tars), 10);
    std::filesystem::create_directories(m_dir.path() / "untarred");
    for (const auto& shard : m.shards) {
        ASSERT_EQ(test::run_shell("tar -xf " + (m_dir / "ds/" + shard.file) + " -C " +
                                  (m_dir / "untarred"))
                      .exit_code,
                  0);
    }
    EXPECT_EQ(snapshot(m_dir.path() / "untarred"), snapshot(m_dir.path() / "src"));
}

TEST_F(PackService, ThePlainUnshardedPackStaysFormatVersion1) {
    auto summary = pack("src", "ds");
    ASSERT_TRUE(summary);
    const std::string manifest = test::read_file(m_dir.path() / "ds/manifest.json");
    EXPECT_NE(manifest.find("\"version\": 1"), std::string::npos) << manifest;
    EXPECT_EQ(manifest.find("shards"), std::string::npos) << manifest;
    auto parsed = parse_manifest(manifest, "manifest.json");
    ASSERT_TRUE(parsed);
    ASSERT_EQ(parsed->shards.size(), 1U);
    EXPECT_EQ(parsed->shards[0].file, "data.tar");
    EXPECT_EQ(parsed->shards[0].hash, parsed->content_hash);
}

TEST_F(PackService, AnUnknownCompressionOrLevelIsAUsageErrorAndWritesNothing) {
    PackRequest request{m_dir / "src", m_dir / "ds", ""};
    for (const char* bad : {"gzip", "zstd:", "zstd:x", "zstd:99", "none:3"}) {
        auto parsed = parse_compression(bad, request);
        ASSERT_FALSE(parsed) << bad;
        EXPECT_EQ(parsed.error().code, ErrorCode::usage) << bad;
        EXPECT_NE(parsed.error().message.find(bad), std::string::npos) << parsed.error().message;
    }
    request.compression = "zstd";
    request.compression_level = 1000;
    EXPECT_FALSE(pack_dataset(request, {}));
    EXPECT_FALSE(std::filesystem::exists(m_dir.path() / "ds"));
    EXPECT_EQ(names_in(m_dir.path()), (std::vector<std::string>{"src"}));
}

} // namespace
} // namespace dljob::app
