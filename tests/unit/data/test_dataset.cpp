#include "support/env_of.hpp"

#include <dljob/domain/dataset.hpp>
#include <dljob/domain/stage.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace dljob {
namespace {

TEST(MemberPath, NormalisesDotAndEmptyComponents) {
    EXPECT_EQ(normalize_member_path("./a//b/./c/").value(), "a/b/c");
    EXPECT_EQ(normalize_member_path("train/3/00017.pgm").value(), "train/3/00017.pgm");
}

TEST(MemberPath, RefusesEscapesAndOddNames) {
    for (const std::string& bad : std::vector<std::string>{
             "../x", "a/../../x", "a/..", "/etc/passwd", "", ".", "./", std::string("a\nb"),
             std::string("a\tb"), std::string(1025, 'x')}) {
        EXPECT_FALSE(normalize_member_path(bad)) << "accepted '" << bad << "'";
    }
    std::string deep;
    for (int i = 0; i < 65; ++i) {
        deep += "d/";
    }
    EXPECT_FALSE(normalize_member_path(deep + "f"));
    EXPECT_NE(normalize_member_path("../x").error().message.find(".."), std::string::npos);
}

TEST(SymlinkTarget, AcceptsTargetsThatStayInsideTheTree) {
    EXPECT_TRUE(check_symlink_target("a/l", "b"));
    EXPECT_TRUE(check_symlink_target("a/l", "../b/c"));
    EXPECT_TRUE(check_symlink_target("a/b/l", "../../x"));
    EXPECT_TRUE(check_symlink_target("l", "./x"));
}

TEST(SymlinkTarget, RefusesTargetsThatCanLeaveTheTree) {
    EXPECT_FALSE(check_symlink_target("l", "../x"));
    EXPECT_FALSE(check_symlink_target("a/l", "../../x"));
    EXPECT_FALSE(check_symlink_target("l", "/etc"));
    EXPECT_FALSE(check_symlink_target("l", ""));
    // `d` may itself be a link to `.`, making `d/..` the tree's parent.
    EXPECT_FALSE(check_symlink_target("l", "d/../x"));
}

TEST(DatasetManifest, SurvivesAJsonRoundTrip) {
    DatasetManifest manifest;
    manifest.content_hash = "0123456789abcdef0123456789abcdef";
    manifest.index_hash = "fedcba9876543210fedcba9876543210";
    manifest.archive_bytes = 107'520'000;
    manifest.index_bytes = 3'000'000;
    manifest.files = 70'000;
    manifest.directories = 20;
    manifest.payload_bytes = 55'790'000;
    manifest.allocated_bytes = 286'720'000;
    manifest.max_path_length = 21;
    manifest.labelled = true;
    manifest.source = "/project/fmnist";
    auto parsed = parse_manifest(to_json(manifest), "m.json");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->content_hash, manifest.content_hash);
    EXPECT_EQ(parsed->index_hash, manifest.index_hash);
    EXPECT_EQ(parsed->files, 70'000U);
    EXPECT_EQ(parsed->allocated_bytes, 286'720'000U);
    EXPECT_TRUE(parsed->labelled);
}

TEST(DatasetManifest, RejectsForeignOrDamagedDocumentsNamingTheFile) {
    auto not_json = parse_manifest("{", "x/manifest.json");
    ASSERT_FALSE(not_json);
    EXPECT_NE(not_json.error().message.find("x/manifest.json"), std::string::npos);
    auto foreign = parse_manifest(R"({"format": "webdataset"})", "m.json");
    ASSERT_FALSE(foreign);
    EXPECT_NE(foreign.error().message.find("dljob-dataset"), std::string::npos);
    DatasetManifest manifest;
    manifest.content_hash = "0123456789abcdef0123456789abcdef";
    manifest.index_hash = "not-a-hash";
    auto bad_hash = parse_manifest(to_json(manifest), "m.json");
    ASSERT_FALSE(bad_hash);
    EXPECT_NE(bad_hash.error().message.find("index_hash"), std::string::npos);
}

// Every number of a manifest is range-checked: nlohmann's get<int>() made 2^70 -2147483648,
// get<uint64_t>() made -1 2^64-1 and 1.5 1.
TEST(DatasetManifest, RefusesNumbersOutOfRangeSayingWhatWasExpected) {
    DatasetManifest base;
    base.content_hash = "0123456789abcdef0123456789abcdef";
    base.index_hash = "fedcba9876543210fedcba9876543210";
    base.archive_bytes = 4096;
    base.shards = {{"data.tar.zst", 4096, base.content_hash, 8192}};
    base.version = dataset_layout_format_version;
    base.compression = "zstd";
    base.chunks_hash = base.index_hash;
    const std::string good = to_json(base);
    ASSERT_TRUE(parse_manifest(good, "m.json"));
    struct Case {
        std::string from;
        std::string to;
        std::string said;
    };
    const std::vector<Case> cases{
        {"\"version\": 2", "\"version\": 1180591620717411303424",
         "m.json: \"version\": expected the dataset format version, an integer (1 or 2), got "
         "1.1805916207174113e+21"},
        {"\"version\": 2", "\"version\": 4294967298", "got 4294967298"},
        {"\"version\": 2", "\"version\": -1", "got -1"},
        {"\"version\": 2", "\"version\": \"2\"", "got \"2\""},
        {"\"files\": 0", "\"files\": -1",
         "m.json: \"files\": expected an integer from 0 to 18446744073709551615, got -1"},
        {"\"files\": 0", "\"files\": 1.5", "got 1.5"},
        {"\"files\": 0", "\"files\": 1180591620717411303424", "\"files\": expected an integer"},
        {"\"payload_bytes\": 0,", "", "\"payload_bytes\" is missing"},
        {"\"compression_level\": 0", "\"compression_level\": 4294967296",
         "\"compression_level\": expected an integer from -131072 to 22, got 4294967296"},
        {"\"bytes\": 4096", "\"bytes\": 4097",
         "\"shards[0].bytes\": expected an integer from 0 "
         "to 4096"},
        {"\"tar_bytes\": 8192", "\"tar_bytes\": -8192", "\"shards[0].tar_bytes\""},
        {"\"chunks_bytes\": 0", "\"chunks_bytes\": true", "\"chunks_bytes\": expected an integer"},
        {"\"labelled\": false", "\"labelled\": 1", "\"labelled\": expected true or false, got 1"},
        {"\"compression\": \"zstd\"", "\"compression\": 1", "\"compression\": expected a string"},
    };
    for (const Case& c : cases) {
        std::string text = good;
        const auto at = text.find(c.from);
        ASSERT_NE(at, std::string::npos) << c.from << " not in\n" << good;
        text.replace(at, c.from.size(), c.to);
        auto parsed = parse_manifest(text, "m.json");
        ASSERT_FALSE(parsed) << c.to;
        EXPECT_NE(parsed.error().message.find(c.said), std::string::npos) << parsed.error().message;
    }
    std::string format = good;
    format.replace(format.find("\"dljob-dataset\""), 15, "7");
    EXPECT_FALSE(parse_manifest(format, "m.json")); // threw out of parse_manifest before
}

TEST(IndexLine, SurvivesARoundTripWithAndWithoutLabel) {
    const IndexEntry labelled{IndexEntryType::file, 1536, 797, 7, "train/7/1.pgm"};
    auto parsed = parse_index_line(format_index_line(labelled), "i", 2);
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->offset, 1536U);
    EXPECT_EQ(parsed->size, 797U);
    EXPECT_EQ(parsed->label, 7);
    EXPECT_EQ(parsed->path, "train/7/1.pgm");
    auto dir = parse_index_line("d\t0\t0\t-\ttrain", "i", 3);
    ASSERT_TRUE(dir);
    EXPECT_EQ(dir->type, IndexEntryType::directory);
    EXPECT_FALSE(dir->label.has_value());
    auto bad = parse_index_line("f\tx\t1\t-\tp", "index.tsv", 9);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("index.tsv:9"), std::string::npos);
    EXPECT_FALSE(parse_index_line("f\t0\t1\t-\t../p", "i", 1));
}

using test::env_of;

TEST(StageTarget, TmpFollowsTheDocumentedOrder) {
    EXPECT_EQ(resolve_stage_target(
                  "tmp", env_of({{"SLURM_TMPDIR", "/s"}, {"TMPDIR", "/t"}, {"LSCRATCH", "/l"}}))
                  ->directory,
              "/s");
    EXPECT_EQ(
        resolve_stage_target("tmp", env_of({{"TMPDIR", "/t"}, {"LSCRATCH", "/l"}}))->directory,
        "/t");
    EXPECT_EQ(resolve_stage_target("tmp", env_of({{"TMPDIR", ""}, {"LSCRATCH", "/l"}}))->directory,
              "/l");
    EXPECT_EQ(resolve_stage_target("tmp", env_of({}))->directory, "/tmp");
}

TEST(StageTarget, RamdiskPrefersRamdiskVariableOverDevShm) {
    EXPECT_EQ(resolve_stage_target("ramdisk", env_of({{"RAMDISK", "/r"}}))->directory, "/r");
    EXPECT_EQ(resolve_stage_target("ramdisk", env_of({{"TMPDIR", "/t"}}))->directory, "/dev/shm");
    auto path = resolve_stage_target("/scratch/me", env_of({{"TMPDIR", "/t"}}));
    EXPECT_EQ(path->directory, "/scratch/me");
    EXPECT_EQ(path->kind, StageTierKind::path);
}

TEST(StageTarget, ExpandsVariablesAndSkipsUnsetOnes) {
    auto env = env_of({{"USER", "ann"}, {"JOB", "42"}});
    EXPECT_EQ(expand_variables("/mnt/bb/$USER/${JOB}x", env), "/mnt/bb/ann/42x");
    EXPECT_FALSE(expand_variables("$SLURM_TMPDIR/data", env));
}

TEST(SpaceCheck, CountsReserveAndInodes) {
    FilesystemSpace space;
    space.block_size = 4096;
    space.bytes_total = 100 << 20;
    space.bytes_available = 10 << 20;
    space.inodes_available = 100;
    space.type_name = "tmpfs";
    EXPECT_TRUE(check_space({9 << 20, 50}, space, 0, "/dev/shm"));
    auto reserve = check_space({9 << 20, 50}, space, 2 << 20, "/dev/shm");
    ASSERT_FALSE(reserve);
    EXPECT_NE(reserve.error().message.find("/dev/shm"), std::string::npos);
    EXPECT_NE(reserve.error().message.find("reserve"), std::string::npos);
    auto inodes = check_space({1 << 20, 101}, space, 0, "/dev/shm");
    ASSERT_FALSE(inodes);
    EXPECT_NE(inodes.error().message.find("inodes"), std::string::npos);
}

TEST(SpaceCheck, RoundsEachFileUpToABlock) {
    // 70,000 Fashion-MNIST images of 797 bytes take 286.7 MB of tmpfs, not 55.8 MB.
    EXPECT_EQ(70'000 * round_up(797, 4096), 286'720'000U);
    EXPECT_EQ(round_up(0, 4096), 0U);
    EXPECT_EQ(round_up(4097, 4096), 8192U);
}

} // namespace
} // namespace dljob
