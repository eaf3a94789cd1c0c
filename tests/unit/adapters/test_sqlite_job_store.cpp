#include <dljob/adapters/sqlite_db.hpp>
#include <dljob/adapters/sqlite_job_store.hpp>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace dljob::adapters {
namespace {

SchedulerStatus make_status(JobState state, std::string native, std::string reason,
                            std::optional<int> exit_code) {
    SchedulerStatus s;
    s.state = state;
    s.native_state = std::move(native);
    s.reason = std::move(reason);
    s.exit_code = exit_code;
    return s;
}

class SqliteStore : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-store-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        path = dir / "sub" / "jobs.db";
    }
    void TearDown() override { std::filesystem::remove_all(dir); }

    std::unique_ptr<SqliteJobStore> open_store(StoreOptions options = {}) {
        auto store = SqliteJobStore::open(path, options);
        EXPECT_TRUE(store) << (store ? "" : store.error().message);
        return std::move(store.value());
    }

    static Job new_job(const std::string& token) {
        Job job;
        job.token = token;
        job.name = "train";
        job.site = "local";
        job.scheduler = "local";
        job.run_dir = "/runs/" + token;
        job.created_at = 1000;
        return job;
    }

    std::filesystem::path dir;
    std::filesystem::path path;
};

TEST_F(SqliteStore, CreatesDirectoryAndCommitsJobBeforeSubmission) {
    auto store = open_store();
    auto job = store->create(new_job("tok1"));
    ASSERT_TRUE(job);
    EXPECT_GT(job->id, 0);
    auto reopened = open_store();
    auto found = reopened->find_by_token("tok1");
    ASSERT_TRUE(found);
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->phase, SubmitPhase::submitting);
    EXPECT_EQ((*found)->state, JobState::pending);
    EXPECT_EQ((*found)->run_dir, "/runs/tok1");
}

TEST_F(SqliteStore, RejectsDuplicateToken) {
    auto store = open_store();
    ASSERT_TRUE(store->create(new_job("same")));
    auto again = store->create(new_job("same"));
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, ErrorCode::store);
}

TEST_F(SqliteStore, RecordsSchedulerIdAndStateEvents) {
    auto store = open_store();
    auto job = store->create(new_job("t"));
    ASSERT_TRUE(store->mark_submitted(job->id, "42", "42.server", 1001));
    auto changed = store->update_state(
        job->id, make_status(JobState::pending, "PENDING", "Resources", std::nullopt), 1002);
    ASSERT_TRUE(changed);
    EXPECT_TRUE(*changed);
    // The same observation again is not a change and adds no event.
    EXPECT_FALSE(*store->update_state(
        job->id, make_status(JobState::pending, "PENDING", "Resources", std::nullopt), 1003));
    EXPECT_TRUE(*store->update_state(
        job->id, make_status(JobState::failed, "FAILED", "NonZeroExitCode", 3), 1010));
    auto found = store->find(job->id);
    ASSERT_TRUE(found && found->has_value());
    const Job& stored = **found;
    EXPECT_EQ(stored.scheduler_id, "42");
    EXPECT_EQ(stored.secondary_id, "42.server");
    EXPECT_EQ(stored.state, JobState::failed);
    EXPECT_EQ(stored.exit_code, 3);
    EXPECT_EQ(stored.finished_at, 1010);
    auto events = store->events(job->id);
    ASSERT_TRUE(events);
    ASSERT_EQ(events->size(), 3U); // submitting, pending (Resources), failed
    EXPECT_EQ(events->at(1).reason, "Resources");
    EXPECT_EQ(events->at(2).state, JobState::failed);
}

// A local pid is handed out again once its job's group is gone (so is a Slurm id after
// MaxJobId): the new job records it, and the older row keeps it marked as no longer its own.
TEST_F(SqliteStore, AnIdHandedOutAgainGoesToTheNewJob) {
    auto store = open_store();
    auto old_job = store->create(new_job("old"));
    ASSERT_TRUE(store->mark_submitted(old_job->id, "4242", "", 1001));
    auto new_job_row = store->create(new_job("new"));
    auto marked = store->mark_submitted(new_job_row->id, "4242", "", 2001);
    ASSERT_TRUE(marked) << marked.error().message;
    EXPECT_EQ((*store->find(new_job_row->id))->scheduler_id, "4242");
    EXPECT_EQ((*store->find(old_job->id))->scheduler_id, "4242~" + std::to_string(old_job->id));
    // Recorded twice for the same job (submit and a status that found it): nothing changes.
    ASSERT_TRUE(store->mark_submitted(new_job_row->id, "4242", "", 2002));
    EXPECT_EQ((*store->find(new_job_row->id))->scheduler_id, "4242");
}

TEST_F(SqliteStore, NeverOverwritesATerminalState) {
    auto store = open_store();
    auto job = store->create(new_job("t"));
    ASSERT_TRUE(
        store->update_state(job->id, make_status(JobState::cancelled, "CANCELLED", "", {}), 5));
    EXPECT_FALSE(*store->update_state(job->id, make_status(JobState::unknown, "", "gone", {}), 6));
    EXPECT_EQ((*store->find(job->id))->state, JobState::cancelled);
}

TEST_F(SqliteStore, RemovedJobLeavesNoRowsOrEvents) {
    auto store = open_store();
    auto job = store->create(new_job("t"));
    ASSERT_TRUE(store->remove(job->id));
    EXPECT_FALSE(store->find(job->id)->has_value());
    EXPECT_TRUE(store->events(job->id)->empty());
    EXPECT_TRUE(store->list({})->empty());
}

TEST_F(SqliteStore, ListsActiveJobsNewestFirst) {
    auto store = open_store();
    auto a = store->create(new_job("a"));
    auto b = store->create(new_job("b"));
    auto c = store->create(new_job("c"));
    ASSERT_TRUE(store->mark_submitted(a->id, "1", "", 1));
    ASSERT_TRUE(
        store->update_state(a->id, make_status(JobState::completed, "COMPLETED", "", 0), 2));
    ASSERT_TRUE(store->mark_submitted(b->id, "2", "", 1));
    JobQuery query;
    query.active_only = true;
    auto active = store->list(query);
    ASSERT_TRUE(active);
    ASSERT_EQ(active->size(), 2U);
    EXPECT_EQ(active->at(0).token, "c"); // still submitting: active
    EXPECT_EQ(active->at(1).token, "b");
    EXPECT_EQ(store->list({})->size(), 3U);
}

TEST_F(SqliteStore, StoresLatestMetrics) {
    auto store = open_store();
    auto job = store->create(new_job("t"));
    JobMetrics m;
    m.iter = 100;
    m.max_iter = 1000;
    m.loss = 0.5;
    ASSERT_TRUE(store->update_metrics(job->id, m));
    m.iter = 200;
    m.accuracy = 0.9;
    m.start_iter = 150;
    m.ranks = 4;
    ASSERT_TRUE(store->update_metrics(job->id, m));
    auto stored = store->metrics(job->id);
    ASSERT_TRUE(stored && stored->has_value());
    EXPECT_EQ((*stored)->iter, 200);
    EXPECT_EQ((*stored)->start_iter, 150);
    EXPECT_EQ((*stored)->ranks, 4);
    EXPECT_EQ(store->all_metrics()->at(job->id).ranks, 4);
    EXPECT_EQ(store->all_metrics()->at(job->id).start_iter, 150);
    EXPECT_DOUBLE_EQ(*(*stored)->accuracy, 0.9);
    EXPECT_FALSE((*stored)->images_per_s.has_value());
}

TEST_F(SqliteStore, GrantsOnePollPerIntervalAndBacksOff) {
    auto store = open_store();
    auto first = store->claim_poll("slurm@site", 100, 10);
    ASSERT_TRUE(first);
    EXPECT_TRUE(first->granted);
    auto second = store->claim_poll("slurm@site", 105, 10);
    EXPECT_FALSE(second->granted);
    EXPECT_EQ(second->next_poll_at, 110);
    EXPECT_TRUE(store->claim_poll("pbs@other", 105, 10)->granted); // per scheduler
    ASSERT_TRUE(store->record_poll("slurm@site", false, false, 10, 60));
    auto backed_off = store->claim_poll("slurm@site", 110, 10);
    EXPECT_FALSE(backed_off->granted);
    EXPECT_EQ(backed_off->interval_s, 15);
    EXPECT_TRUE(store->claim_poll("slurm@site", 115, 10)->granted);
    ASSERT_TRUE(store->record_poll("slurm@site", true, false, 10, 60));
    EXPECT_EQ(store->claim_poll("slurm@site", 116, 10)->interval_s, 10);
}

TEST_F(SqliteStore, RefusesAFileFromAnotherApplication) {
    std::filesystem::create_directories(path.parent_path());
    { auto store = open_store(); }
    // Another program's database: same format, different application_id.
    std::filesystem::remove(path);
    auto other = SqliteJobStore::open(path);
    ASSERT_TRUE(other);
    other.value().reset();
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(68); // application_id lives at byte offset 68 of the header
    file.write("\x12\x34\x56\x78", 4);
    file.close();
    auto refused = SqliteJobStore::open(path);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::store);
    EXPECT_NE(refused.error().message.find("not a dljob job store"), std::string::npos);
}

TEST_F(SqliteStore, RefusesASchemaFromANewerDljob) {
    { auto store = open_store(); }
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(60); // user_version: big-endian at offset 60
    file.write("\x00\x00\x03\xe7", 4);
    file.close();
    auto refused = SqliteJobStore::open(path);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("newer"), std::string::npos);
}

TEST_F(SqliteStore, UsesWalOnlyWhenAsked) {
    EXPECT_TRUE(open_store({.wal = true})->wal());
    EXPECT_FALSE(std::filesystem::exists(path.string() + "-journal"));
    auto rollback = open_store({.wal = false});
    EXPECT_FALSE(rollback->wal());
}

// SQLite refuses a journal-mode change at once (no busy handler) while another connection
// holds a lock; the store must wait for it like for any other lock.
TEST_F(SqliteStore, SwitchingToWalWaitsForAnotherWriterInsteadOfFailing) {
    { auto store = open_store({.wal = false}); }
    std::array<int, 2> ready{};
    ASSERT_EQ(::pipe(ready.data()), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(ready[0]);
        Db db(path.string(), JournalMode::rollback, 1000);
        Txn txn(db);
        db.exec("UPDATE jobs SET name = name");
        (void)!::write(ready[1], "x", 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        txn.commit();
        ::_exit(0);
    }
    ::close(ready[1]);
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the lock holder did not start";
    ::close(ready[0]);

    auto store = SqliteJobStore::open(path, {.busy_timeout_ms = 10000, .wal = true});
    EXPECT_TRUE(store) << (store ? "" : store.error().message);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    Db check(path.string(), JournalMode::wal, 1000);
    auto mode = check.prepare("PRAGMA journal_mode");
    ASSERT_TRUE(mode.step());
    EXPECT_EQ(mode.text(0), "wal");
}

TEST_F(SqliteStore, ManyProcessesOpeningAFreshStoreTogetherAllGetIt) {
    constexpr int processes = 16;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            auto store = SqliteJobStore::open(path);
            ::_exit(store && (*store)->create(new_job("fresh-" + std::to_string(p))) ? 0 : 1);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(open_store()->list({})->size(), static_cast<std::size_t>(processes));
}

// A store written by the dljob before continuations (schema 1) is upgraded in place: its jobs
// stay, as first attempts that no one will continue.
TEST_F(SqliteStore, AVersionOneStoreIsUpgradedKeepingItsJobs) {
    {
        auto store = open_store();
        ASSERT_TRUE(store->create(new_job("old")));
    }
    {
        Db db(path.string(), JournalMode::wal, 1000);
        db.exec("DROP INDEX jobs_continues");
        for (const char* column :
             {"attempt", "continues", "max_continuations", "submit_argv", "progress_mark",
              "after_job", "after_ok", "sweep", "sweep_point"}) {
            db.exec(std::string("ALTER TABLE jobs DROP COLUMN ") + column);
        }
        db.exec("ALTER TABLE metrics DROP COLUMN start_iter");
        db.exec("ALTER TABLE metrics DROP COLUMN ranks");
        db.exec("PRAGMA user_version=1");
    }
    auto store = open_store();
    auto job = store->find_by_token("old");
    ASSERT_TRUE(job && job->has_value());
    EXPECT_EQ((*job)->attempt, 1);
    EXPECT_EQ((*job)->continues, 0);
    EXPECT_EQ((*job)->max_continuations, 0);
    EXPECT_TRUE((*job)->submit_argv.empty());
    EXPECT_EQ((*job)->after, 0);
    Db check(path.string(), JournalMode::wal, 1000);
    auto version = check.prepare("PRAGMA user_version");
    ASSERT_TRUE(version.step());
    EXPECT_EQ(version.int64(0), SqliteJobStore::schema_version());
}

TEST_F(SqliteStore, KeepsTheDependencyOfAJob) {
    auto store = open_store();
    auto first = store->create(new_job("first"));
    ASSERT_TRUE(first);
    Job second = new_job("second");
    second.after = first->id;
    second.after_ok = false;
    ASSERT_TRUE(store->create(second));
    auto found = store->find_by_token("second");
    ASSERT_TRUE(found && found->has_value());
    EXPECT_EQ((*found)->after, first->id);
    EXPECT_FALSE((*found)->after_ok);
    auto plain = store->find(first->id);
    ASSERT_TRUE(plain && plain->has_value());
    EXPECT_EQ((*plain)->after, 0);
    EXPECT_TRUE((*plain)->after_ok);
}

TEST_F(SqliteStore, KeepsTheContinuationFieldsAndOneContinuationPerJob) {
    auto store = open_store();
    Job first = new_job("first");
    first.max_continuations = 4;
    first.submit_argv = {"sqsub", "-q", "gpu", "-o", "job.log", "a \"quoted\" word", "job.sh"};
    auto created = store->create(first);
    ASSERT_TRUE(created);
    Job next = new_job("next");
    next.attempt = 2;
    next.continues = created->id;
    next.progress_mark = "iter_00000100.ckpt 1234 5678";
    auto continued = store->create(next);
    ASSERT_TRUE(continued);
    auto read = store->find(created->id);
    EXPECT_EQ((*read)->submit_argv, first.submit_argv);
    EXPECT_EQ((*read)->max_continuations, 4);
    auto found = store->continuation_of(created->id);
    ASSERT_TRUE(found && found->has_value());
    EXPECT_EQ((*found)->attempt, 2);
    EXPECT_EQ((*found)->progress_mark, next.progress_mark);
    Job twice = new_job("twice");
    twice.continues = created->id;
    auto refused = store->create(twice);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("already continued"), std::string::npos);
    EXPECT_FALSE(store->find_by_token("twice")->has_value());
}

TEST_F(SqliteStore, ConcurrentProcessesLoseAndDuplicateNothing) {
    { auto store = open_store(); }
    constexpr int processes = 8;
    constexpr int per_process = 25;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            auto store = SqliteJobStore::open(path);
            int ok = 0;
            for (int i = 0; store && i < per_process; ++i) {
                ok +=
                    (*store)->create(new_job(std::to_string(p) + "-" + std::to_string(i))) ? 1 : 0;
            }
            ::_exit(ok == per_process ? 0 : 1);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    auto store = open_store();
    EXPECT_EQ(store->list({})->size(), static_cast<std::size_t>(processes * per_process));
}

} // namespace
} // namespace dljob::adapters
