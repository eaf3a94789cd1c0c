#include "support/run_process.hpp"
#include "unit/data/data_test_support.hpp"

#include <dljob/app/data/pack.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/domain/dataset.hpp>

#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ; // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace dljob::app {
namespace {

using test::names_in;
using test::ScratchDir;
using test::snapshot;

GetEnv no_environment() {
    return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

/// Starts the real dljob with `args`, stdout and stderr to `log`.
pid_t spawn_dljob(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> argv_storage{DLJOB_BINARY};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    argv.reserve(argv_storage.size() + 1);
    for (std::string& arg : argv_storage) {
        argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = -1;
    posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    return pid;
}

int wait_exit_code(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Polls `condition` for up to 20 s (a liveness guard, not a timing assertion).
template <class Condition> bool eventually(Condition condition) {
    for (int i = 0; i < 2000; ++i) {
        if (condition()) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

class StageService : public ::testing::Test {
protected:
    void SetUp() override {
        for (int label = 0; label < 3; ++label) {
            for (int i = 0; i < 20; ++i) {
                test::write_file(m_dir.path() / fmt_path(label, i),
                                 std::string(static_cast<std::size_t>(100 + i * 37), 'a' + i));
            }
        }
        test::write_file(m_dir.path() / "src/big.bin", random_bytes(3U << 20U));
        std::filesystem::create_directories(m_dir.path() / "target");
        auto packed = pack_dataset({m_dir / "src", m_dir / "ds", ""}, {});
        ASSERT_TRUE(packed) << packed.error().message;
        m_manifest = packed->manifest;
    }
    static std::string fmt_path(int label, int i) {
        return "src/train/" + std::to_string(label) + "/" + std::to_string(i) + ".pgm";
    }
    static std::string random_bytes(std::size_t size) {
        std::string bytes(size, '\0');
        std::uint32_t state = 12345;
        for (char& c : bytes) {
            state = state * 1664525U + 1013904223U;
            c = static_cast<char>(state >> 24U);
        }
        return bytes;
    }
    StageRequest request(bool extract, const std::string& target = "target") const {
        StageRequest r;
        r.dataset = m_dir / "ds";
        r.to = m_dir / target;
        r.extract = extract;
        return r;
    }
    [[nodiscard]] std::string entry_dir(const std::string& target = "target") const {
        return m_dir / (target + "/dljob-cache-" + std::to_string(geteuid()) + "/" +
                        stage_cache_key(m_manifest));
    }
    ScratchDir m_dir;
    DatasetManifest m_manifest;
};

TEST_F(StageService, RoundTripPackStageExtractGivesTheSourceTree) {
    auto staged = stage_dataset(request(true), no_environment(), {});
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_FALSE(staged->cache_hit);
    EXPECT_EQ(staged->path, entry_dir() + "/tree");
    EXPECT_EQ(snapshot(staged->path), snapshot(m_dir.path() / "src"));
    // Read where it lies: no copy of the pack on the target beside the tree.
    EXPECT_EQ(names_in(entry_dir()), (std::vector<std::string>{"tree", "tree.complete"}));
    EXPECT_EQ(staged->bytes_copied, m_manifest.archive_bytes);
}

TEST_F(StageService, WithoutExtractStagesThePackOnly) {
    auto staged = stage_dataset(request(false), no_environment(), {});
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_EQ(staged->path, entry_dir() + "/pack");
    EXPECT_EQ(names_in(staged->path),
              (std::vector<std::string>{"data.tar", "index.tsv", "manifest.json"}));
    EXPECT_FALSE(std::filesystem::exists(entry_dir() + "/tree"));
}

TEST_F(StageService, APackLargerThanOneMapWindowIsCopiedByteForByte) {
    // The copy maps 4 MiB of the source at a time (stage_read.cpp): 9 MiB and an odd tail
    // take three windows, the last one short.
    test::write_file(m_dir.path() / "src2/big.bin", random_bytes((9U << 20U) + 12345U));
    ASSERT_TRUE(pack_dataset({m_dir / "src2", m_dir / "ds2", ""}, {}));
    StageRequest r = request(false);
    r.dataset = m_dir / "ds2";
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_TRUE(staged) << staged.error().message;
    for (const char* name : {"data.tar", "index.tsv", "manifest.json"}) {
        EXPECT_EQ(test::read_file(staged->path + "/" + name),
                  test::read_file(m_dir.path() / "ds2" / name))
            << name;
    }
}

TEST_F(StageService, ADamagedByteInTheLastMapWindowIsFound) {
    test::write_file(m_dir.path() / "src2/big.bin", random_bytes((9U << 20U) + 12345U));
    auto packed = pack_dataset({m_dir / "src2", m_dir / "ds2", ""}, {});
    ASSERT_TRUE(packed);
    {
        std::fstream archive(m_dir.path() / "ds2/data.tar",
                             std::ios::in | std::ios::out | std::ios::binary);
        archive.seekp(static_cast<std::streamoff>(9U << 20U));
        const char was = static_cast<char>(archive.peek());
        archive.seekp(static_cast<std::streamoff>(9U << 20U));
        archive.put(static_cast<char>(was ^ 0x20));
    }
    StageRequest r = request(false);
    r.dataset = m_dir / "ds2";
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_NE(staged.error().message.find("data.tar is corrupted"), std::string::npos)
        << staged.error().message;
    const std::string entry = m_dir / ("target/dljob-cache-" + std::to_string(geteuid()) + "/" +
                                       stage_cache_key(packed->manifest));
    EXPECT_TRUE(names_in(entry).empty()) << "a corrupted pack was left in the cache";
}

TEST_F(StageService, SecondStageOfSameDatasetHitsTheCache) {
    ASSERT_TRUE(stage_dataset(request(true), no_environment(), {}));
    // A file changed inside the staged tree proves the second stage copies nothing.
    test::write_file(entry_dir() + "/tree/marker-of-first-stage", "x");
    auto again = stage_dataset(request(true), no_environment(), {});
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_TRUE(again->cache_hit);
    EXPECT_EQ(again->bytes_copied, 0U);
    EXPECT_TRUE(std::filesystem::exists(entry_dir() + "/tree/marker-of-first-stage"));
}

TEST_F(StageService, AnIndexEditedAfterACachedStageIsRefusedByTheHitToo) {
    for (const bool extract : {false, true}) {
        ASSERT_TRUE(stage_dataset(request(extract), no_environment(), {}));
        const std::string index_path = m_dir.path() / "ds/index.tsv";
        const std::string original = test::read_file(index_path);
        std::string edited = original; // one byte, the same size: only the hash can tell
        edited[edited.size() / 2] = edited[edited.size() / 2] == '1' ? '2' : '1';
        test::write_file(index_path, edited);
        const auto before = snapshot(entry_dir());
        auto again = stage_dataset(request(extract), no_environment(), {});
        ASSERT_FALSE(again) << "extract " << extract << ": an edited index was staged from cache";
        EXPECT_NE(again.error().message.find("index.tsv is corrupted"), std::string::npos)
            << again.error().message;
        EXPECT_EQ(snapshot(entry_dir()), before) << "the refused stage changed the cache";
        test::write_file(index_path, original);
        auto restored = stage_dataset(request(extract), no_environment(), {});
        ASSERT_TRUE(restored) << restored.error().message;
        EXPECT_TRUE(restored->cache_hit);
    }
}

TEST_F(StageService, PacksOfOneDataTarWithOtherLabelsDoNotShareACacheEntry) {
    // Same images, other labels: data.tar is byte for byte the same, index.tsv is not.
    test::write_file(m_dir.path() / "src/a.txt", "train/0/0.pgm 0\ntrain/1/0.pgm 1\n");
    test::write_file(m_dir.path() / "src/b.txt", "train/0/0.pgm 7\ntrain/1/0.pgm 8\n");
    auto first = pack_dataset({m_dir / "src/a.txt", m_dir / "la", ""}, {});
    auto second = pack_dataset({m_dir / "src/b.txt", m_dir / "lb", ""}, {});
    ASSERT_TRUE(first && second);
    ASSERT_EQ(first->manifest.content_hash, second->manifest.content_hash);
    ASSERT_NE(first->manifest.index_hash, second->manifest.index_hash);
    for (const bool extract : {false, true}) {
        StageRequest a = request(extract);
        a.dataset = m_dir / "la";
        StageRequest b = request(extract);
        b.dataset = m_dir / "lb";
        auto staged_a = stage_dataset(a, no_environment(), {});
        auto staged_b = stage_dataset(b, no_environment(), {});
        ASSERT_TRUE(staged_a && staged_b);
        EXPECT_FALSE(staged_b->cache_hit) << "extract " << extract;
        EXPECT_NE(staged_a->path, staged_b->path);
        if (!extract) {
            EXPECT_EQ(test::read_file(staged_b->path + "/index.tsv"),
                      test::read_file(m_dir.path() / "lb/index.tsv"));
            EXPECT_EQ(test::read_file(staged_a->path + "/index.tsv"),
                      test::read_file(m_dir.path() / "la/index.tsv"));
        }
    }
    // What it was packed from (the manifest's "source") changes nothing a reader sees.
    test::write_file(m_dir.path() / "src/b-again.txt", test::read_file(m_dir.path() / "src/b.txt"));
    ASSERT_TRUE(pack_dataset({m_dir / "src/b-again.txt", m_dir / "lb-again", ""}, {}));
    StageRequest copy = request(false);
    copy.dataset = m_dir / "lb-again";
    auto staged_copy = stage_dataset(copy, no_environment(), {});
    ASSERT_TRUE(staged_copy);
    EXPECT_TRUE(staged_copy->cache_hit);
}

TEST_F(StageService, ExtractAfterAPackOnlyStageReusesTheCopiedPack) {
    ASSERT_TRUE(stage_dataset(request(false), no_environment(), {}));
    auto extracted = stage_dataset(request(true), no_environment(), {});
    ASSERT_TRUE(extracted) << extracted.error().message;
    EXPECT_EQ(extracted->bytes_copied, 0U);
    EXPECT_EQ(snapshot(extracted->path), snapshot(m_dir.path() / "src"));
}

TEST_F(StageService, CorruptedPackIsDetectedByTheManifestHash) {
    {
        std::fstream archive(m_dir.path() / "ds/data.tar",
                             std::ios::in | std::ios::out | std::ios::binary);
        archive.seekp(static_cast<std::streamoff>(m_manifest.archive_bytes / 2));
        archive.put('!');
    }
    auto staged = stage_dataset(request(true), no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_NE(staged.error().message.find("corrupted"), std::string::npos)
        << staged.error().message;
    EXPECT_TRUE(names_in(entry_dir()).empty()) << "a corrupted pack was left in the cache";
}

TEST_F(StageService, ADamagedHeaderIsReportedAsTheCorruptionItIs) {
    {
        // Inside the first member's name: libarchive fails on the header checksum, and the
        // manifest hash says why.
        std::fstream archive(m_dir.path() / "ds/data.tar",
                             std::ios::in | std::ios::out | std::ios::binary);
        archive.seekp(10);
        archive.put('!');
    }
    auto staged = stage_dataset(request(true), no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_NE(staged.error().message.find("data.tar is corrupted"), std::string::npos)
        << staged.error().message;
    EXPECT_TRUE(names_in(entry_dir()).empty());
}

TEST_F(StageService, TruncatedPackIsRefusedBeforeCopying) {
    std::filesystem::resize_file(m_dir.path() / "ds/data.tar", m_manifest.archive_bytes - 512);
    auto staged = stage_dataset(request(false), no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_NE(staged.error().message.find("truncated"), std::string::npos)
        << staged.error().message;
    EXPECT_TRUE(names_in(entry_dir()).empty());
}

TEST_F(StageService, APublishedDirectoryWithoutItsMarkerIsStagedAgain) {
    // What a stage killed between its rename and its marker leaves behind.
    test::write_file(entry_dir() + "/tree/stale", "half");
    test::write_file(entry_dir() + "/pack/data.tar", "half");
    test::write_file(entry_dir() + "/tree.partial.999999/x", "half");
    auto staged = stage_dataset(request(true), no_environment(), {});
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_FALSE(staged->cache_hit);
    EXPECT_EQ(snapshot(staged->path), snapshot(m_dir.path() / "src"));
    EXPECT_EQ(names_in(entry_dir()), (std::vector<std::string>{"tree", "tree.complete"}));
}

TEST_F(StageService, NotADatasetSaysHowToMakeOne) {
    StageRequest r = request(false);
    r.dataset = m_dir / "src";
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_EQ(staged.error().code, ErrorCode::not_found);
    EXPECT_NE(staged.error().hint.find("dljob pack"), std::string::npos);
}

TEST_F(StageService, TmpTargetComesFromTheEnvironment) {
    const std::string slurm_tmp = m_dir / "target";
    auto staged = stage_dataset(
        [&] {
            StageRequest r = request(false);
            r.to = "tmp";
            return r;
        }(),
        [&](const std::string& name) -> std::optional<std::string> {
            return name == "SLURM_TMPDIR" ? std::optional<std::string>(slurm_tmp) : std::nullopt;
        },
        {});
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_EQ(staged->path, entry_dir() + "/pack");
    EXPECT_EQ(staged->target_note, "$SLURM_TMPDIR");
}

TEST_F(StageService, CleanupRemovesTheStagedCopyUnlessKept) {
    ASSERT_TRUE(stage_dataset(request(true), no_environment(), {}));
    auto removed = cleanup_staged_dataset(request(true), no_environment());
    ASSERT_TRUE(removed);
    EXPECT_TRUE(removed->removed);
    EXPECT_FALSE(std::filesystem::exists(entry_dir()));
    StageRequest keep = request(true);
    keep.keep = true;
    ASSERT_TRUE(stage_dataset(keep, no_environment(), {}));
    auto kept = cleanup_staged_dataset(request(true), no_environment());
    ASSERT_TRUE(kept);
    EXPECT_FALSE(kept->removed);
    EXPECT_TRUE(kept->kept);
    EXPECT_TRUE(std::filesystem::exists(entry_dir() + "/tree.complete"));
}

// Two jobs on one node share a staged dataset: the first to end must not remove it from under
// the other, and a job killed without cleaning up must not pin it forever.
TEST_F(StageService, CleanupWaitsForTheLastLiveUserAndForgetsDeadOnes) {
    const pid_t other = fork(); // stands for a second job still training on this node
    if (other == 0) {
        pause();
        _exit(0);
    }
    ASSERT_GT(other, 0);
    StageRequest mine = request(false);
    mine.user_pid = getpid();
    StageRequest theirs = request(false);
    theirs.user_pid = other;
    ASSERT_TRUE(stage_dataset(mine, no_environment(), {}));
    auto hit = stage_dataset(theirs, no_environment(), {}); // a cache hit still registers
    ASSERT_TRUE(hit);
    EXPECT_TRUE(hit->cache_hit);
    EXPECT_TRUE(std::filesystem::exists(entry_dir() + "/users/" + std::to_string(other)));

    auto first = cleanup_staged_dataset(mine, no_environment());
    ASSERT_TRUE(first) << first.error().message;
    EXPECT_FALSE(first->removed);
    EXPECT_EQ(first->users_left, 1);
    EXPECT_TRUE(std::filesystem::exists(entry_dir() + "/pack.complete"));
    EXPECT_FALSE(std::filesystem::exists(entry_dir() + "/users/" + std::to_string(getpid())));

    kill(other, SIGKILL); // the other job dies without its cleanup
    waitpid(other, nullptr, 0);
    auto second = cleanup_staged_dataset(request(false), no_environment());
    ASSERT_TRUE(second) << second.error().message;
    EXPECT_TRUE(second->removed);
    EXPECT_EQ(second->users_left, 0);
    EXPECT_FALSE(std::filesystem::exists(entry_dir()));
}

// A job killed with SIGKILL never runs its cleanup. The next stage on the node does it for
// them: only copies every registered job of which has ended, never one staged by hand, kept, or
// still used.
TEST_F(StageService, AStageRemovesCopiesWhoseJobsAllEndedWithoutCleaningUp) {
    const pid_t ended = fork();
    if (ended == 0) {
        _exit(0);
    }
    ASSERT_GT(ended, 0);
    waitpid(ended, nullptr, 0);
    // Four more datasets, each its own cache entry.
    std::map<std::string, std::string> entries;
    for (const std::string name : {"by_hand", "kept", "in_use", "next"}) {
        test::write_file(m_dir.path() / ("src_" + name + "/file.txt"), "contents of " + name);
        auto packed = pack_dataset({m_dir / ("src_" + name), m_dir / name, ""}, {});
        ASSERT_TRUE(packed) << packed.error().message;
        entries[name] = m_dir / ("target/dljob-cache-" + std::to_string(geteuid()) + "/" +
                                 stage_cache_key(packed->manifest));
    }
    auto stage = [&](const std::string& dataset, std::optional<long> user, bool keep,
                     std::vector<std::string>* notices = nullptr) {
        StageRequest r = request(false);
        r.dataset = m_dir / dataset;
        r.user_pid = user;
        r.keep = keep;
        auto staged = stage_dataset(r, no_environment(), [notices](const std::string& line) {
            if (notices != nullptr) {
                notices->push_back(line);
            }
        });
        ASSERT_TRUE(staged) << staged.error().message;
    };
    stage("by_hand", {}, false); // staged by hand, no job registered
    stage("kept", ended, true);  // --keep
    stage("in_use", getpid(), false);
    stage("ds", ended, false); // its job was killed: abandoned
    ASSERT_TRUE(std::filesystem::exists(entry_dir() + "/pack.complete"));

    std::vector<std::string> notices;
    stage("next", getpid(), false, &notices);
    EXPECT_FALSE(std::filesystem::exists(entry_dir()));
    ASSERT_EQ(notices.size(), 1U);
    EXPECT_NE(notices[0].find(entry_dir()), std::string::npos) << notices[0];
    for (const std::string name : {"by_hand", "kept", "in_use", "next"}) {
        EXPECT_TRUE(std::filesystem::exists(entries[name] + "/pack.complete")) << name;
    }
}

TEST_F(StageService, CleanupOfANeverStagedDatasetSaysSo) {
    auto nothing = cleanup_staged_dataset(request(false), no_environment());
    ASSERT_TRUE(nothing);
    EXPECT_FALSE(nothing->found);
    EXPECT_FALSE(nothing->removed);
}

/// A small tmpfs, for the tests of a full disk; unmounted at the end.
class SmallTmpfs {
public:
    SmallTmpfs(const std::string& path, const std::string& size) : m_path(path) {
        std::filesystem::create_directories(path);
        m_mounted = mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    }
    ~SmallTmpfs() {
        if (m_mounted) {
            umount2(m_path.c_str(), MNT_DETACH);
        }
    }
    SmallTmpfs(const SmallTmpfs&) = delete;
    SmallTmpfs& operator=(const SmallTmpfs&) = delete;
    SmallTmpfs(SmallTmpfs&&) = delete;
    SmallTmpfs& operator=(SmallTmpfs&&) = delete;
    [[nodiscard]] bool mounted() const { return m_mounted; }

private:
    std::string m_path;
    bool m_mounted = false;
};

TEST_F(StageService, RefusesBeforeWritingWhenTheTargetIsTooSmall) {
    SmallTmpfs disk(m_dir / "small", "2m");
    if (!disk.mounted()) {
        GTEST_SKIP() << "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)";
    }
    StageRequest r = request(true, "small");
    r.reserve = 0;
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_NE(staged.error().message.find("free"), std::string::npos) << staged.error().message;
    EXPECT_TRUE(names_in(entry_dir("small")).empty());
}

TEST_F(StageService, ADiskThatFillsMidStageEndsWithAClearErrorAndNoPartialTree) {
    SmallTmpfs disk(m_dir / "small", "2m");
    if (!disk.mounted()) {
        GTEST_SKIP() << "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)";
    }
    StageRequest r = request(true, "small");
    r.skip_space_check = true; // as if another job filled the disk after the check
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_NE(staged.error().message.find("No space left"), std::string::npos)
        << staged.error().message;
    // Naming the file it could not write.
    EXPECT_NE(staged.error().message.find(entry_dir("small") + "/tree.partial."), std::string::npos)
        << staged.error().message;
    EXPECT_NE(staged.error().hint.find("full"), std::string::npos);
    EXPECT_TRUE(names_in(entry_dir("small")).empty());
}

// Members over 4 MiB are written by a thread of their own while the next chunks are read
// (stage_extract.cpp, StreamWriter): every byte arrives, and a write that fails mid-member
// ends the stage with the system's error, nothing published and no thread left waiting.
TEST_F(StageService, AMemberOverThePoolLimitIsStreamedWholeOrFailsCleanly) {
    test::write_file(m_dir.path() / "src2/huge.bin", random_bytes((9U << 20U) + 4321U));
    test::write_file(m_dir.path() / "src2/small.txt", "after the huge one");
    auto packed = pack_dataset({m_dir / "src2", m_dir / "ds2", ""}, {});
    ASSERT_TRUE(packed);
    StageRequest r = request(true);
    r.dataset = m_dir / "ds2";
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_EQ(snapshot(staged->path), snapshot(m_dir.path() / "src2"));

    SmallTmpfs disk(m_dir / "small", "4m");
    if (!disk.mounted()) {
        GTEST_SKIP() << "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)";
    }
    StageRequest full = request(true, "small");
    full.dataset = m_dir / "ds2";
    full.skip_space_check = true;
    auto failed = stage_dataset(full, no_environment(), {});
    ASSERT_FALSE(failed);
    EXPECT_NE(failed.error().message.find("huge.bin: No space left"), std::string::npos)
        << failed.error().message;
    EXPECT_TRUE(names_in(m_dir / ("small/dljob-cache-" + std::to_string(geteuid()) + "/" +
                                  stage_cache_key(packed->manifest)))
                    .empty());
}

bool has_partial_tree(const std::string& entry) {
    for (const std::string& name : names_in(entry)) {
        if (name.rfind("tree.partial.", 0) == 0) {
            return true;
        }
    }
    return false;
}

TEST_F(StageService, AStageKilledMidExtractionAndRerunGivesTheRightTree) {
    // A file-size limit below big.bin (3 MiB): its write raises SIGXFSZ, which kills the stager
    // in the middle of writing the tree, at the same point every time.
    auto killed = test::run_shell("ulimit -c 0; ulimit -f 1024; exec " + std::string(DLJOB_BINARY) +
                                  " stage-data " + (m_dir / "ds") + " --to " + (m_dir / "target") +
                                  " --extract");
    ASSERT_EQ(killed.exit_code, 128 + SIGXFSZ) << killed.output;
    EXPECT_TRUE(has_partial_tree(entry_dir())) << killed.output;
    EXPECT_FALSE(std::filesystem::exists(entry_dir() + "/tree.complete"));
    EXPECT_FALSE(std::filesystem::exists(entry_dir() + "/tree"));

    auto rerun = test::run_shell(std::string(DLJOB_BINARY) + " stage-data " + (m_dir / "ds") +
                                 " --to " + (m_dir / "target") + " --extract");
    ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
    EXPECT_NE(rerun.output.find(entry_dir() + "/tree\n"), std::string::npos) << rerun.output;
    EXPECT_EQ(snapshot(entry_dir() + "/tree"), snapshot(m_dir.path() / "src"));
    EXPECT_EQ(names_in(entry_dir()), (std::vector<std::string>{"tree", "tree.complete"}));
}

// A FIFO's open (and then its reads) wait for a writer that never comes: the stage hung. Each
// file stage-data reads is refused, named, unless it is a regular file.
TEST_F(StageService, AFifoInPlaceOfAPackFileIsRefusedNamedInsteadOfWaiting) {
    for (const char* name : {"manifest.json", "data.tar", "index.tsv"}) {
        for (const bool extract : {false, true}) {
            const std::string fake = m_dir / "fifo-ds";
            std::filesystem::remove_all(fake);
            std::filesystem::copy(m_dir.path() / "ds", fake);
            std::filesystem::remove(fake + "/" + name);
            ASSERT_EQ(mkfifo((fake + "/" + name).c_str(), 0600), 0);
            std::vector<std::string> args{"stage-data", fake, "--to", m_dir / "target"};
            if (extract) {
                args.emplace_back("--extract");
            }
            const std::string log = m_dir / "fifo.log";
            const pid_t stager = spawn_dljob(args, log);
            ASSERT_GT(stager, 0);
            int status = 0;
            const bool ended =
                eventually([&] { return waitpid(stager, &status, WNOHANG) == stager; });
            if (!ended) {
                kill(stager, SIGKILL);
                waitpid(stager, &status, 0);
            }
            ASSERT_TRUE(ended) << name << ": stage-data still waits on the FIFO";
            EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << name;
            const std::string output = test::read_file(log);
            EXPECT_NE(output.find(fake + "/" + name + " is a FIFO, expected a regular file"),
                      std::string::npos)
                << output;
            EXPECT_TRUE(names_in(entry_dir()).empty()) << name;
        }
    }
}

TEST_F(StageService, ConcurrentStagesOnOneNodeCopyOnce) {
    // The test holds the entry's lock, as a first stager would, until both have said they wait.
    const std::string root = m_dir / ("target/dljob-cache-" + std::to_string(geteuid()));
    std::filesystem::create_directories(root);
    std::filesystem::permissions(root, std::filesystem::perms::owner_all);
    const int lock = open((entry_dir() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(lock, 0);
    ASSERT_EQ(flock(lock, LOCK_EX), 0);
    const std::vector<std::string> args{"stage-data", m_dir / "ds", "--to", m_dir / "target",
                                        "--extract"};
    const pid_t first = spawn_dljob(args, m_dir / "first.log");
    const pid_t second = spawn_dljob(args, m_dir / "second.log");
    for (const char* log : {"first.log", "second.log"}) {
        ASSERT_TRUE(eventually([&] {
            return test::read_file(m_dir.path() / log).find("waiting for another") !=
                   std::string::npos;
        })) << test::read_file(m_dir.path() / log);
    }
    close(lock);
    EXPECT_EQ(wait_exit_code(first), 0) << test::read_file(m_dir.path() / "first.log");
    EXPECT_EQ(wait_exit_code(second), 0) << test::read_file(m_dir.path() / "second.log");
    const std::string logs =
        test::read_file(m_dir.path() / "first.log") + test::read_file(m_dir.path() / "second.log");
    const auto count = [&](const std::string& what) {
        std::size_t n = 0;
        for (auto at = logs.find(what); at != std::string::npos; at = logs.find(what, at + 1)) {
            ++n;
        }
        return n;
    };
    EXPECT_EQ(count("staged 3."), 1U) << logs;
    EXPECT_EQ(count("cache hit"), 1U) << logs;
    EXPECT_EQ(snapshot(entry_dir() + "/tree"), snapshot(m_dir.path() / "src"));
}

TEST_F(StageService, ACompressedShardedPackStagesEveryDataFileAndExtractsTheTree) {
    PackRequest packing{m_dir / "src", m_dir / "zds", ""};
    ASSERT_TRUE(parse_compression("zstd", packing));
    packing.shard_bytes = 1U << 20U; // big.bin (3 MiB) alone, the small files together
    auto packed = pack_dataset(packing, {});
    ASSERT_TRUE(packed) << packed.error().message;
    ASSERT_GE(packed->manifest.shards.size(), 2U);
    const std::string entry =
        "/dljob-cache-" + std::to_string(geteuid()) + "/" + stage_cache_key(packed->manifest);

    StageRequest copy = request(false);
    copy.dataset = m_dir / "zds";
    auto copied = stage_dataset(copy, no_environment(), {});
    ASSERT_TRUE(copied) << copied.error().message;
    for (const auto& shard : packed->manifest.shards) {
        EXPECT_EQ(test::read_file(copied->path + "/" + shard.file),
                  test::read_file(m_dir.path() / "zds" / shard.file))
            << shard.file;
    }
    EXPECT_TRUE(std::filesystem::exists(copied->path + "/chunks.tsv"));

    std::filesystem::create_directories(m_dir.path() / "target2");
    StageRequest extract = request(true, "target2");
    extract.dataset = m_dir / "zds";
    auto staged = stage_dataset(extract, no_environment(), {});
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_EQ(snapshot(staged->path), snapshot(m_dir.path() / "src"));
    EXPECT_EQ(names_in(m_dir / ("target2" + entry)),
              (std::vector<std::string>{"tree", "tree.complete"}));
}

// Large members: each shard is read (and decompressed) by its own thread, and each thread
// verifies the shards it reads.
TEST_F(StageService, AShardedPackOfLargeFilesExtractsEveryShardInParallel) {
    for (int i = 0; i < 4; ++i) {
        test::write_file(m_dir.path() / ("big/" + std::to_string(i) + ".bin"),
                         random_bytes((1U << 20U) + static_cast<std::size_t>(i)));
    }
    PackRequest packing{m_dir / "big", m_dir / "bigds", ""};
    ASSERT_TRUE(parse_compression("zstd", packing));
    packing.shard_bytes = 1U << 20U;
    auto packed = pack_dataset(packing, {});
    ASSERT_TRUE(packed) << packed.error().message;
    ASSERT_EQ(packed->manifest.shards.size(), 4U);
    StageRequest r = request(true);
    r.dataset = m_dir / "bigds";
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_TRUE(staged) << staged.error().message;
    EXPECT_EQ(snapshot(staged->path), snapshot(m_dir.path() / "big"));
    std::uint64_t shard_bytes = 0;
    for (const auto& shard : packed->manifest.shards) {
        shard_bytes += shard.bytes;
    }
    EXPECT_EQ(staged->bytes_copied, shard_bytes);

    // A damaged third shard, whichever thread reads it: named, and nothing published.
    std::filesystem::remove_all(m_dir.path() / "target");
    std::filesystem::create_directories(m_dir.path() / "target");
    const auto& third = packed->manifest.shards[2];
    std::string bytes = test::read_file(m_dir.path() / "bigds" / third.file);
    bytes[bytes.size() / 3] = static_cast<char>(bytes[bytes.size() / 3] ^ 0x10);
    test::write_file(m_dir.path() / "bigds" / third.file, bytes);
    auto damaged = stage_dataset(r, no_environment(), {});
    ASSERT_FALSE(damaged);
    EXPECT_NE(damaged.error().message.find(third.file + " is corrupted"), std::string::npos)
        << damaged.error().message;
    EXPECT_TRUE(names_in(m_dir / ("target/dljob-cache-" + std::to_string(geteuid()) + "/" +
                                  stage_cache_key(packed->manifest)))
                    .empty());
}

TEST_F(StageService, ADamagedByteInACompressedShardIsRefusedAndNothingIsPublished) {
    PackRequest packing{m_dir / "src", m_dir / "zds", ""};
    ASSERT_TRUE(parse_compression("zstd", packing));
    packing.shard_bytes = 1U << 20U;
    auto packed = pack_dataset(packing, {});
    ASSERT_TRUE(packed) << packed.error().message;
    const auto& last = packed->manifest.shards.back();
    std::string bytes = test::read_file(m_dir.path() / "zds" / last.file);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
    test::write_file(m_dir.path() / "zds" / last.file, bytes);
    StageRequest r = request(true);
    r.dataset = m_dir / "zds";
    auto staged = stage_dataset(r, no_environment(), {});
    ASSERT_FALSE(staged);
    EXPECT_NE(staged.error().message.find(last.file + " is corrupted"), std::string::npos)
        << staged.error().message;
    const std::string entry = m_dir / ("target/dljob-cache-" + std::to_string(geteuid()) + "/" +
                                       stage_cache_key(packed->manifest));
    EXPECT_FALSE(std::filesystem::exists(entry + "/pack.complete"));
    EXPECT_FALSE(std::filesystem::exists(entry + "/pack"));
    EXPECT_FALSE(std::filesystem::exists(entry + "/tree"));
}

} // namespace
} // namespace dljob::app
