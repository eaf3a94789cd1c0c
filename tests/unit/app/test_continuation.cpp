// Continuations: which ended jobs are submitted again, and what the new attempt looks like.
// A real SQLite store and run directory; sbatch is the fake runner's.

#include "unit/schedulers/fake_process_runner.hpp"

#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/app/jobs/cancel.hpp>
#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/sweep.hpp>
#include <dljob/app/reports/show.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/app/reports/sweep_table.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace dljob::app {
namespace {

namespace fs = std::filesystem;

class Continuation : public ::testing::Test {
protected:
    void SetUp() override {
        dir = fs::temp_directory_path() /
              ("dljob-continuation-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir);
        fs::create_directories(dir / "run");
        auto store = adapters::SqliteJobStore::open(dir / "jobs.db");
        EXPECT_TRUE(store) << (store ? "" : store.error().message);
        auto runner = std::make_unique<dljob::testing::FakeProcessRunner>();
        runner_ = runner.get();
        context_.emplace(std::move(store.value()), std::move(runner));
    }
    void TearDown() override { fs::remove_all(dir); }

    /// A Slurm job that ran and ended (exit code file written), with a checkpoint or not.
    Job ended_job(int attempt, int max_continuations, const std::string& progress_mark,
                  JobState state = JobState::timeout, const std::string& sweep = "",
                  const std::vector<std::string>& sweep_point = {}) {
        Job job;
        job.token = "tok" + std::to_string(++jobs_made_);
        job.name = "lenet";
        job.site = "cluster";
        job.scheduler = "slurm";
        job.run_dir = (dir / "run").string();
        job.script_path = (dir / "run" / "job.sh").string();
        job.walltime_s = 3600;
        job.created_at = 1000;
        job.attempt = attempt;
        job.max_continuations = max_continuations;
        job.submit_argv = {"sbatch", "--parsable", job.script_path};
        job.progress_mark = progress_mark;
        job.sweep = sweep;
        job.sweep_point = sweep_point;
        auto created = context_->store().create(job);
        EXPECT_TRUE(created);
        EXPECT_TRUE(context_->store().mark_submitted(created->id, "10" + job.token, "", 1001));
        SchedulerStatus end;
        end.state = state;
        end.exit_code = 75;
        EXPECT_TRUE(context_->store().update_state(created->id, end, 1010));
        std::ofstream(dir / "run" / "exit_code") << "75\n";
        std::ofstream(dir / "run" / "job_identity") << "token=x\nstarted=1002\n";
        std::ofstream(dir / "run" / "job.log") << "attempt " << attempt << "\n";
        return *context_->store().find(created->id).value();
    }
    void write_checkpoint(const std::string& name) {
        fs::create_directories(dir / "run" / "checkpoints");
        std::ofstream(dir / "run" / "checkpoints" / name) << name;
    }

    fs::path dir;
    dljob::testing::FakeProcessRunner* runner_ = nullptr;
    std::optional<JobContext> context_;
    int jobs_made_ = 0;
};

TEST_F(Continuation, TheProgressMarkIsTheNewestCheckpoint) {
    EXPECT_EQ(progress_mark(dir / "run"), "");
    write_checkpoint("iter_00000100.ckpt");
    const std::string first = progress_mark(dir / "run");
    EXPECT_EQ(first.rfind("iter_00000100.ckpt 18 ", 0), 0U) << first;
    EXPECT_EQ(progress_mark(dir / "run"), first); // nothing written: the same mark
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    write_checkpoint("iter_00000200.ckpt");
    EXPECT_EQ(progress_mark(dir / "run").rfind("iter_00000200.ckpt 18 ", 0), 0U);
}

TEST_F(Continuation, ACheckpointedJobWithProgressIsSubmittedAgainAsItsNextAttempt) {
    const Job ended = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    const Job& job = *next;
    EXPECT_EQ(job.attempt, 2);
    EXPECT_EQ(job.continues, ended.id);
    EXPECT_NE(job.token, ended.token);
    EXPECT_EQ(job.run_dir, ended.run_dir);
    EXPECT_EQ(job.script_path, ended.script_path);
    EXPECT_EQ(job.max_continuations, 3);
    EXPECT_EQ(job.scheduler_id, "4242");
    EXPECT_EQ(job.progress_mark, progress_mark(dir / "run"));
    EXPECT_EQ(job.phase, SubmitPhase::submitted);
    ASSERT_EQ(runner_->calls.size(), 1U);
    EXPECT_EQ(runner_->calls[0].front(), "sbatch");
    EXPECT_EQ(runner_->calls[0].back(), ended.script_path);
    // The ended attempt's exit code and identity would read as the new attempt's end.
    EXPECT_FALSE(fs::exists(dir / "run" / "exit_code"));
    EXPECT_FALSE(fs::exists(dir / "run" / "job_identity"));
    // Its log is kept under the attempt's name: Torque would overwrite job.log.
    EXPECT_FALSE(fs::exists(dir / "run" / "job.log"));
    EXPECT_TRUE(fs::exists(dir / "run" / "job.attempt1.log"));
    auto found = context_->store().continuation_of(ended.id);
    ASSERT_TRUE(found && found->has_value());
    EXPECT_EQ((*found)->id, job.id);
    EXPECT_EQ((*found)->submit_argv, ended.submit_argv);

    // Never twice, and the next attempt's files are left alone.
    std::ofstream(dir / "run" / "exit_code") << "75\n";
    std::ofstream(dir / "run" / "job.log") << "attempt 2 is running\n";
    std::string again;
    auto second = continue_if_checkpointed(*context_, ended, 75, again);
    EXPECT_FALSE(second.has_value());
    EXPECT_NE(again.find("already continued by job"), std::string::npos) << again;
    EXPECT_EQ(runner_->calls.size(), 1U);
    EXPECT_TRUE(fs::exists(dir / "run" / "exit_code"));
    EXPECT_TRUE(fs::exists(dir / "run" / "job.log"));
}

// The status that continues a job moves its dependants too (a scheduler without
// kill_invalid_depend still holds them pending), to the attempt it submitted.
TEST_F(Continuation, AStatusThatContinuesAJobMovesItsDependantsToTheNextAttempt) {
    const Job ended = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    ASSERT_TRUE(record_dependant(dir / "run", "5000", true));
    runner_->reply("sbatch", 0, "4242\n");
    runner_->reply("scontrol", 0, "");
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    ASSERT_EQ(runner_->calls.size(), 2U);
    EXPECT_EQ(runner_->calls[1], (std::vector<std::string>{"scontrol", "update", "JobId=5000",
                                                           "Dependency=afterok:4242"}));
    EXPECT_TRUE(note.empty()) << note;
}

// Issue 22: a continued sweep point is one point, in its latest attempt's state, in the
// folded status line and in `dljob sweep`'s table.
TEST_F(Continuation, AContinuedSweepPointCountsOnceInItsLatestAttemptsState) {
    const Job point_a = ended_job(1, 3, "", JobState::timeout, "sw-0000aa", {"a=1"});
    const Job point_b = ended_job(1, 3, "", JobState::completed, "sw-0000aa", {"a=2"});
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    auto next = continue_if_checkpointed(*context_, point_a, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    EXPECT_EQ(next->sweep, "sw-0000aa");
    EXPECT_EQ(next->sweep_point, (std::vector<std::string>{"a=1"}));

    // Every attempt listed (status --all): the first attempt's TIMEOUT is not a point of its own.
    auto listed = context_->store().list(JobQuery{});
    ASSERT_TRUE(listed);
    ASSERT_EQ(listed->size(), 3U);
    std::vector<JobView> views;
    for (const auto& job : *listed) {
        views.push_back(JobView{job, std::nullopt});
    }
    std::ostringstream folded;
    print_status_table(folded, views, 2000, true);
    EXPECT_NE(folded.str().find("SWEEP 2: 1 PENDING 1 COMPLETED "), std::string::npos)
        << folded.str();
    const std::string text = folded.str();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
    // A later attempt recorded without the sweep (by an older dljob) still folds into it.
    for (auto& view : views) {
        if (view.job.continues != 0) {
            view.job.sweep.clear();
        }
    }
    std::ostringstream legacy;
    print_status_table(legacy, views, 2000, true);
    EXPECT_EQ(legacy.str(), folded.str());

    // The table: one row per point, the continued one at its latest attempt.
    SchedulerStatus done;
    done.state = JobState::completed;
    ASSERT_TRUE(context_->store().update_state(next->id, done, 1100));
    std::vector<std::string> warnings;
    auto rows = sweep_table(*context_, "sw-0000aa", warnings);
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 2U);
    std::vector<std::int64_t> ids;
    for (const auto& row : *rows) {
        ids.push_back(row.latest.job.id);
        EXPECT_EQ(row.latest.job.state, JobState::completed);
        EXPECT_EQ(row.values.size(), 1U);
    }
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<std::int64_t>{point_b.id, next->id}));
}

// `dljob cancel SWEEP`: every point at its latest attempt, the last point first (a point of a
// --sweep-limit waits on an earlier one and must not start between the two cancels).
TEST_F(Continuation, CancellingASweepNamesEveryPointsLatestAttemptLastPointFirst) {
    const Job point_a = ended_job(1, 3, "", JobState::timeout, "sw-0000bb", {"a=1"});
    const Job point_b = ended_job(1, 3, "", JobState::completed, "sw-0000bb", {"a=2"});
    const Job other = ended_job(1, 3, "", JobState::completed);
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    auto next = continue_if_checkpointed(*context_, point_a, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    auto ids = sweep_cancel_ids(*context_, "sw-0000bb");
    ASSERT_TRUE(ids) << ids.error().message;
    EXPECT_EQ(*ids,
              (std::vector<std::string>{std::to_string(point_b.id), std::to_string(next->id)}));
    EXPECT_EQ(std::find(ids->begin(), ids->end(), std::to_string(other.id)), ids->end());
    runner_->reply("scancel", 0, "");
    auto cancelled = cancel_job(*context_, (*ids)[1]);
    ASSERT_TRUE(cancelled) << cancelled.error().message;
    EXPECT_EQ(cancelled->state, JobState::cancelled);
    auto unknown = sweep_cancel_ids(*context_, "sw-ffffff");
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
}

// An `ok` dependant of a job that checkpointed and was continued: the scheduler judged the
// dependency by the first attempt's exit 75 (not covered: docs/schedulers.md), so status says
// which job the chain goes on as, and to wait for that one, instead of "ended TIMEOUT".
TEST_F(Continuation, AnOkDependantOfAContinuedJobIsToldWhichAttemptToWaitFor) {
    const Job first = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    auto next = continue_if_checkpointed(*context_, first, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    Job dependant;
    dependant.token = "waiting";
    dependant.name = "eval";
    dependant.site = "cluster";
    dependant.scheduler = "slurm";
    dependant.run_dir = (dir / "eval").string();
    dependant.after = first.id;
    dependant.after_ok = true;
    auto created = context_->store().create(dependant);
    ASSERT_TRUE(created);
    ASSERT_TRUE(context_->store().mark_submitted(created->id, "5000", "", 1001));
    runner_->reply("squeue", 0, "5000|PENDING|DependencyNeverSatisfied\n");
    runner_->reply("scancel", 0, "");
    StatusOptions options;
    options.ids = {std::to_string(created->id)};
    options.force = true;
    std::vector<std::string> warnings;
    auto views = job_status(*context_, options, warnings);
    ASSERT_TRUE(views) << views.error().message;
    ASSERT_EQ(views->size(), 1U);
    EXPECT_EQ(views->front().job.reason,
              fmt::format("never runs: job {} it waited on (afterok) checkpointed (exit 75) and "
                          "goes on as job {}; submit it again with --after {}",
                          first.id, next->id, next->id));
}

TEST_F(Continuation, NoProgressSinceTheAttemptStartedIsNotContinued) {
    write_checkpoint("iter_00000100.ckpt");
    const Job ended = ended_job(2, 5, progress_mark(dir / "run"));
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    EXPECT_FALSE(next.has_value());
    EXPECT_NE(note.find("makes no progress"), std::string::npos) << note;
    EXPECT_TRUE(runner_->calls.empty());
    EXPECT_TRUE(fs::exists(dir / "run" / "exit_code")); // left as it was
}

TEST_F(Continuation, TheLastAllowedAttemptIsNotContinued) {
    const Job ended = ended_job(3, 2, "");
    write_checkpoint("iter_00000300.ckpt");
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    EXPECT_FALSE(next.has_value());
    EXPECT_NE(note.find("submitted 3 times already (checkpoint.max_continuations: 2)"),
              std::string::npos)
        << note;
    EXPECT_TRUE(runner_->calls.empty());
}

TEST_F(Continuation, OnlyExit75OfAJobThatMayBeContinuedAsksForIt) {
    write_checkpoint("iter_00000100.ckpt");
    for (const auto& [exit_code, max_continuations] :
         {std::pair{0, 3}, std::pair{1, 3}, std::pair{75, 0}}) {
        const Job ended = ended_job(1, max_continuations, "");
        std::string note;
        auto next = continue_if_checkpointed(*context_, ended, exit_code, note);
        EXPECT_FALSE(next.has_value()) << exit_code << " " << max_continuations;
        EXPECT_EQ(note, "");
    }
    EXPECT_TRUE(runner_->calls.empty());
}

// scancel sends TERM: dltrain checkpoints and exits 75, but the user ended the job.
TEST_F(Continuation, ACancelledJobThatCheckpointedIsNotContinued) {
    write_checkpoint("iter_00000100.ckpt");
    const Job ended = ended_job(1, 3, "", JobState::cancelled);
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    EXPECT_FALSE(next.has_value());
    EXPECT_EQ(note, "");
    EXPECT_TRUE(runner_->calls.empty());
}

// Through `dljob status`: Slurm no longer lists the job, sacct says FAILED with exit 75, and
// the exit-code file is not visible yet (NFS): the job is TIMEOUT and is continued, once.
TEST_F(Continuation, StatusContinuesAJobFromTheSchedulersExitStatusAlone) {
    Job job;
    job.token = "slurmtok01";
    job.name = "lenet";
    job.site = "cluster";
    job.scheduler = "slurm";
    job.run_dir = (dir / "run").string();
    job.script_path = (dir / "run" / "job.sh").string();
    job.walltime_s = 3600;
    job.created_at = util::unix_now() - 600;
    job.max_continuations = 2;
    job.submit_argv = {"sbatch", "--parsable", job.script_path};
    auto created = context_->store().create(job);
    ASSERT_TRUE(created);
    ASSERT_TRUE(context_->store().mark_submitted(created->id, "501", "", job.created_at));
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("squeue", 0, "");
    runner_->reply("sacct", 0, "501|FAILED|75:0|None\n");
    runner_->reply("sbatch", 0, "502\n");
    StatusOptions options;
    options.force = true;
    std::vector<std::string> warnings;
    auto views = job_status(*context_, options, warnings);
    ASSERT_TRUE(views) << views.error().message;
    auto ended = context_->store().find(created->id);
    EXPECT_EQ((*ended)->state, JobState::timeout);
    EXPECT_EQ((*ended)->reason, "checkpointed before the walltime");
    auto next = context_->store().continuation_of(created->id);
    ASSERT_TRUE(next && next->has_value()) << (warnings.empty() ? "" : warnings.front());
    EXPECT_EQ((*next)->scheduler_id, "502");
    EXPECT_EQ((*next)->attempt, 2);
    EXPECT_EQ(runner_->calls.back().front(), "sbatch");
}

// What people see of a chain: show names the attempt and both links, status the attempt.
TEST_F(Continuation, ShowAndStatusTellTheAttemptsApart) {
    const Job ended = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    const Job& job = *next;

    std::ostringstream first;
    ASSERT_TRUE(show_job(*context_, std::to_string(ended.id), first));
    EXPECT_NE(first.str().find("  attempt:    1 of at most 4\n"), std::string::npos) << first.str();
    EXPECT_NE(first.str().find(fmt::format("  continued:  by job {} (attempt 2)\n", job.id)),
              std::string::npos)
        << first.str();
    std::ostringstream second;
    ASSERT_TRUE(show_job(*context_, std::to_string(job.id), second));
    EXPECT_NE(second.str().find(
                  fmt::format("  attempt:    2 of at most 4 (continues job {})\n", ended.id)),
              std::string::npos)
        << second.str();
    EXPECT_EQ(second.str().find("continued:"), std::string::npos) << second.str();

    std::ostringstream table;
    print_status_table(table, {JobView{job, std::nullopt}}, util::unix_now());
    EXPECT_NE(table.str().find(" lenet#2 "), std::string::npos) << table.str();
    std::ostringstream json;
    print_status_json(json, {JobView{ended, std::nullopt}, JobView{job, std::nullopt}});
    std::istringstream lines(json.str());
    std::vector<nlohmann::json> rows;
    for (std::string line; std::getline(lines, line);) {
        rows.push_back(nlohmann::json::parse(line));
    }
    ASSERT_EQ(rows.size(), 2U) << json.str();
    EXPECT_EQ(rows.at(0).at("attempt"), 1);
    EXPECT_TRUE(rows.at(0).at("continues").is_null());
    EXPECT_EQ(rows.at(1).at("attempt"), 2);
    EXPECT_EQ(rows.at(1).at("continues"), ended.id);
}

TEST_F(Continuation, ARefusedContinuationLeavesNoRow) {
    const Job ended = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 1, "", "sbatch: error: QOSMaxSubmitJobPerUserLimit");
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    EXPECT_FALSE(next.has_value());
    EXPECT_NE(note.find("submitting attempt 2 failed"), std::string::npos) << note;
    EXPECT_NE(note.find("QOSMaxSubmitJobPerUserLimit"), std::string::npos) << note;
    auto found = context_->store().continuation_of(ended.id);
    ASSERT_TRUE(found);
    EXPECT_FALSE(found->has_value());
}

// Issue 25: a local job that exits 75 is continued by its wrapper, with nobody running dljob;
// it leaves its decision in continuation.<token>. The next `dljob status` records the attempts
// the job started (by token, with the id the record names), starts nothing itself, and follows
// the chain to its current attempt in the same call.
class UnattendedContinuation : public Continuation {
protected:
    Job running_local(const std::string& token, int pid) {
        Job job;
        job.token = token;
        job.name = "lenet";
        job.site = "local";
        job.scheduler = "local";
        job.run_dir = (dir / "run").string();
        job.script_path = (dir / "run" / "job.sh").string();
        job.walltime_s = 3600;
        job.created_at = util::unix_now() - 600;
        job.max_continuations = 5;
        auto created = context_->store().create(job);
        EXPECT_TRUE(created);
        EXPECT_TRUE(
            context_->store().mark_submitted(created->id, std::to_string(pid), "", job.created_at));
        return *context_->store().find(created->id).value();
    }
    void record(const std::string& token, const std::string& rest) {
        std::ofstream(dir / "run" / ("continuation." + token))
            << "exit_code=75\ntimeout=0\nended=" << util::unix_now() - 60 << "\n"
            << rest;
    }
    std::vector<std::string> status() {
        StatusOptions options;
        options.all = true;
        std::vector<std::string> warnings;
        auto views = job_status(*context_, options, warnings);
        EXPECT_TRUE(views) << views.error().message;
        return warnings;
    }
    std::vector<Job> chain() {
        auto all = context_->store().list(JobQuery{});
        EXPECT_TRUE(all);
        std::vector<Job> jobs = *all;
        std::sort(jobs.begin(), jobs.end(),
                  [](const Job& a, const Job& b) { return a.attempt < b.attempt; });
        return jobs;
    }
};

TEST_F(UnattendedContinuation, TheAttemptsTheJobStartedAreRecordedAndNothingIsSubmitted) {
    const Job first = running_local("tokfirst01", 4242);
    record("tokfirst01", "attempt=1\nnext_token=toksecond2\npid=5001\n");
    record("toksecond2", "attempt=2\nnext_token=tokthird03\npid=5002\n");
    ProcessInfo third; // the third attempt's wrapper, running
    third.pid = 5002;
    third.pgid = 5002;
    third.environment = {"DLJOB_JOB_TOKEN=tokthird03"};
    runner_->processes.push_back(third);

    for (int look = 0; look < 2; ++look) { // a second status changes nothing
        status();
        const auto jobs = chain();
        ASSERT_EQ(jobs.size(), 3U);
        EXPECT_EQ(jobs[0].id, first.id);
        EXPECT_EQ(jobs[0].state, JobState::timeout);
        EXPECT_EQ(jobs[0].exit_code, 75);
        EXPECT_EQ(jobs[1].token, "toksecond2");
        EXPECT_EQ(jobs[1].continues, first.id);
        EXPECT_EQ(jobs[1].scheduler_id, "5001");
        EXPECT_EQ(jobs[1].state, JobState::timeout);
        EXPECT_EQ(jobs[2].token, "tokthird03");
        EXPECT_EQ(jobs[2].attempt, 3);
        EXPECT_EQ(jobs[2].continues, jobs[1].id);
        EXPECT_EQ(jobs[2].scheduler_id, "5002");
        EXPECT_EQ(jobs[2].state, JobState::running);
    }
    EXPECT_TRUE(runner_->detached.empty()) << "dljob started an attempt itself";
}

TEST_F(UnattendedContinuation, AnAttemptTheJobDeclinedToContinueIsNotContinuedByStatus) {
    running_local("tokstall01", 4242);
    record("tokstall01", "attempt=1\ndeclined=no progress\n");
    write_checkpoint("iter_00000100.ckpt"); // status alone would see progress here
    const auto warnings = status();
    const auto jobs = chain();
    ASSERT_EQ(jobs.size(), 1U);
    EXPECT_EQ(jobs[0].state, JobState::timeout);
    EXPECT_TRUE(runner_->detached.empty());
    ASSERT_EQ(warnings.size(), 1U);
    EXPECT_NE(warnings[0].find("no progress"), std::string::npos) << warnings[0];
}

// Cancelling the attempt the store shows running also cancels the one the job started since.
TEST_F(UnattendedContinuation, CancelReachesTheAttemptTheJobStartedItself) {
    const Job first = running_local("tokfirst01", 4242);
    record("tokfirst01", "attempt=1\nnext_token=toksecond2\npid=5001\n");
    ProcessInfo second;
    second.pid = 5001;
    second.pgid = 5001;
    second.environment = {"DLJOB_JOB_TOKEN=toksecond2"};
    runner_->processes.push_back(second);
    runner_->alive_groups.insert(5001);
    auto cancelled = cancel_job(*context_, std::to_string(first.id));
    ASSERT_TRUE(cancelled) << cancelled.error().message;
    const auto jobs = chain();
    ASSERT_EQ(jobs.size(), 2U);
    EXPECT_EQ(jobs[0].state, JobState::cancelled);
    EXPECT_EQ(jobs[1].token, "toksecond2");
    EXPECT_EQ(jobs[1].state, JobState::cancelled);
    EXPECT_EQ(runner_->signals, (std::vector<std::pair<int, int>>{{5001, SIGTERM}}));
}

// When status gets there first (a scheduler job, or a job started by an older dljob), it
// claims the decision before it submits, so the job cannot start a second next attempt; and a
// decision already made is followed, not made again.
TEST_F(Continuation, StatusClaimsTheDecisionBeforeSubmittingAndFollowsOneMadeBefore) {
    const Job ended = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    auto claimed = read_continuation_record(dir / "run", ended.token);
    ASSERT_TRUE(claimed.has_value());
    EXPECT_EQ(claimed->next_token, next->token);

    const Job other = ended_job(1, 3, "");
    std::ofstream(dir / "run" / ("continuation." + other.token))
        << "exit_code=75\nnext_token=madebyjob1\npid=777\n";
    const auto calls = runner_->calls.size();
    next = continue_if_checkpointed(*context_, other, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    EXPECT_EQ(next->token, "madebyjob1");
    EXPECT_EQ(next->scheduler_id, "777");
    EXPECT_EQ(runner_->calls.size(), calls) << "submitted although the job had";
}

// Issue 25 on the batch families: the job script's epilogue runs `dljob continue-job` when the
// training exits 75 (continue_from_job), on the compute node, without the store: it decides
// within the same bounds, claims the same record as status, submits the next attempt with its
// own token and adds that attempt's id to the record; the next status records it.
class JobSideContinuation : public UnattendedContinuation {
protected:
    void SetUp() override {
        UnattendedContinuation::SetUp();
        Job chain;
        chain.name = "lenet";
        chain.site = "cluster";
        chain.scheduler = "slurm";
        chain.run_dir = (dir / "run").string();
        chain.script_path = (dir / "run" / "job.sh").string();
        chain.walltime_s = 3600;
        chain.max_continuations = 3;
        chain.submit_argv = {"sbatch", chain.script_path};
        ASSERT_TRUE(write_chain_file(chain));
    }
    Job running_slurm(const std::string& token) {
        Job job;
        job.token = token;
        job.name = "lenet";
        job.site = "cluster";
        job.scheduler = "slurm";
        job.run_dir = (dir / "run").string();
        job.script_path = (dir / "run" / "job.sh").string();
        job.walltime_s = 3600;
        job.created_at = util::unix_now() - 600;
        job.max_continuations = 3;
        auto created = context_->store().create(job);
        EXPECT_TRUE(created);
        EXPECT_TRUE(context_->store().mark_submitted(created->id, "4000", "", job.created_at));
        return *context_->store().find(created->id).value();
    }
    JobSideAttempt attempt(const std::string& token, int number, const std::string& previous = "") {
        JobSideAttempt a;
        a.run_dir = dir / "run";
        a.token = token;
        a.attempt = number;
        a.previous_token = previous;
        a.started = util::unix_now() - 300;
        return a;
    }
    std::size_t sbatch_calls() const {
        return static_cast<std::size_t>(
            std::count_if(runner_->calls.begin(), runner_->calls.end(),
                          [](const auto& argv) { return argv.front() == "sbatch"; }));
    }
};

// `--after A:ok` renders afterok on A's attempt running then; that attempt exits 75 when it
// continues, which the scheduler would never count as ok. The job moves every dependant still
// waiting to its next attempt with the family's own command before it exits, from the run
// directory's `dependants` (the job has no store).
TEST_F(JobSideContinuation, DependantsWaitForTheNextAttemptInsteadOfThisOne) {
    running_slurm("tokfirst01");
    write_checkpoint("iter_00000100.ckpt");
    ASSERT_TRUE(record_dependant(dir / "run", "5000", true));
    ASSERT_TRUE(record_dependant(dir / "run", "5001", false));
    runner_->reply("sbatch", 0, "4001\n");
    runner_->reply("scontrol", 0, "");
    runner_->reply("scontrol", 1, "", "scontrol: error: Job is no longer pending execution\n");
    std::string note;
    ASSERT_TRUE(continue_from_job(*context_, attempt("tokfirst01", 1), note)) << note;
    ASSERT_EQ(runner_->calls.size(), 3U);
    EXPECT_EQ(runner_->calls[0].front(), "sbatch"); // the next attempt's id first
    EXPECT_EQ(runner_->calls[1], (std::vector<std::string>{"scontrol", "update", "JobId=5000",
                                                           "Dependency=afterok:4001"}));
    EXPECT_EQ(runner_->calls[2], (std::vector<std::string>{"scontrol", "update", "JobId=5001",
                                                           "Dependency=afterany:4001"}));
    // One that has started already needs no moving: said, and the continuation stands.
    EXPECT_NE(note.find("job 5001 still waits on this attempt"), std::string::npos) << note;
    EXPECT_NE(note.find("no longer pending"), std::string::npos) << note;
}

TEST_F(JobSideContinuation, AFamilyWithoutTheCommandRunsNothing) {
    ASSERT_TRUE(record_dependant(dir / "run", "77", true));
    std::string note;
    retarget_dependants(*runner_, "sqsub", dir / "run", "78", note);
    retarget_dependants(*runner_, "slurm", dir / "elsewhere", "78", note); // no dependants
    EXPECT_TRUE(runner_->calls.empty());
    EXPECT_TRUE(note.empty()) << note;
}

TEST_F(JobSideContinuation, TheJobSubmitsItsNextAttemptWithItsOwnTokenAndStatusRecordsIt) {
    const Job first = running_slurm("tokfirst01");
    write_checkpoint("iter_00000100.ckpt");
    std::ofstream(dir / "run" / "job.log") << "attempt 1\n";
    std::ofstream(dir / "run" / "exit_code") << "75\n"; // left by whatever, read as attempt 2's
    runner_->reply("sbatch", 0, "4001\n");
    std::string note;
    ASSERT_TRUE(continue_from_job(*context_, attempt("tokfirst01", 1), note)) << note;
    EXPECT_FALSE(fs::exists(dir / "run" / "exit_code"));
    auto record = read_continuation_record(dir / "run", "tokfirst01");
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->by, "job");
    EXPECT_EQ(record->next_id, "4001");
    EXPECT_EQ(record->progress, progress_mark(dir / "run"));
    ASSERT_FALSE(record->next_token.empty());
    EXPECT_NE(record->next_token, "tokfirst01");
    // The next attempt carries its own token where find_by_token looks for it.
    ASSERT_EQ(sbatch_calls(), 1U);
    const auto& argv = runner_->calls.back();
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--comment=dljob:" + record->next_token),
              argv.end());
    EXPECT_EQ(argv.back(), first.script_path);
    EXPECT_TRUE(fs::exists(dir / "run" / "job.attempt1.log"));
    EXPECT_FALSE(fs::exists(dir / "run" / "job.log"));

    // A second call (the epilogue run twice) changes nothing.
    ASSERT_TRUE(continue_from_job(*context_, attempt("tokfirst01", 1), note)) << note;
    EXPECT_EQ(sbatch_calls(), 1U);

    runner_->reply("squeue", 0,
                   "4000|RUNNING|None|dljob:tokfirst01\n"
                   "4001|PENDING|Priority|dljob:" +
                       record->next_token + "\n");
    runner_->reply("squeue", 0, "4001|PENDING|Priority|dljob:" + record->next_token + "\n");
    status();
    const auto jobs = chain();
    ASSERT_EQ(jobs.size(), 2U);
    EXPECT_EQ(jobs[0].state, JobState::timeout);
    EXPECT_EQ(jobs[0].exit_code, 75);
    EXPECT_GT(record->started, 0);
    EXPECT_EQ(jobs[0].started_at, record->started); // job_identity is the next attempt's
    EXPECT_EQ(jobs[1].token, record->next_token);
    EXPECT_EQ(jobs[1].continues, first.id);
    EXPECT_EQ(jobs[1].attempt, 2);
    EXPECT_EQ(jobs[1].scheduler_id, "4001");
    EXPECT_EQ(jobs[1].state, JobState::pending);
    EXPECT_EQ(jobs[1].progress_mark, record->progress);
    EXPECT_EQ(sbatch_calls(), 1U) << "status submitted although the job had";
}

// A chain recorded after it ended: each attempt's row shows its own training progress, not the
// last attempt's (metrics.jsonl is shared; the record says where the attempt's lines end).
TEST_F(JobSideContinuation, EachAttemptOfAChainRecordedLateKeepsItsOwnMetrics) {
    const Job first = running_slurm("tokfirst01");
    write_checkpoint("iter_00000100.ckpt");
    const auto metrics = dir / "run" / "metrics.jsonl";
    std::ofstream(metrics)
        << R"({"type":"start","iter":0})"
        << "\n"
        << R"({"type":"train","iter":100,"max_iter":300,"loss":1.5})"
        << "\n"
        << R"({"type":"final","iter":100,"max_iter":300,"status":"checkpointed"})"
        << "\n";
    runner_->reply("sbatch", 0, "4001\n");
    std::string note;
    ASSERT_TRUE(continue_from_job(*context_, attempt("tokfirst01", 1), note)) << note;
    std::ofstream(metrics, std::ios::app)
        << R"({"type":"start","iter":100})"
        << "\n"
        << R"({"type":"train","iter":300,"max_iter":300,"loss":0.5})"
        << "\n"
        << R"({"type":"final","iter":300,"max_iter":300,"status":"completed"})"
        << "\n";
    std::ofstream(dir / "run" / "exit_code") << "0\n";
    const auto next = read_continuation_record(dir / "run", "tokfirst01")->next_token;
    runner_->reply("squeue", 0, "4000|COMPLETED|None|dljob:tokfirst01\n");
    runner_->reply("squeue", 0, "4001|COMPLETED|None|dljob:" + next + "\n");
    status();
    const auto all = context_->store().all_metrics();
    ASSERT_TRUE(all);
    const auto jobs = chain();
    ASSERT_EQ(jobs.size(), 2U);
    EXPECT_EQ(jobs[1].state, JobState::completed);
    ASSERT_EQ(all->count(first.id), 1U);
    EXPECT_EQ(all->at(first.id).iter, 100);
    EXPECT_EQ(all->at(first.id).final_status, "checkpointed");
    EXPECT_EQ(all->at(jobs[1].id).iter, 300);
    EXPECT_EQ(all->at(jobs[1].id).final_status, "completed");
}

TEST_F(JobSideContinuation, TheJobKeepsTheBoundsLimitAndNoProgress) {
    write_checkpoint("iter_00000100.ckpt");
    std::string note;
    EXPECT_FALSE(continue_from_job(*context_, attempt("toklimit04", 4, "tokthird03"), note));
    EXPECT_EQ(read_continuation_record(dir / "run", "toklimit04")->declined, "limit");
    // The mark its predecessor recorded is where it started: nothing newer, no progress.
    record("tokfirst01", "next_token=tokstall02\nprogress=" + progress_mark(dir / "run") + "\n");
    EXPECT_FALSE(continue_from_job(*context_, attempt("tokstall02", 2, "tokfirst01"), note));
    EXPECT_EQ(read_continuation_record(dir / "run", "tokstall02")->declined, "no progress");
    EXPECT_NE(note.find("no progress"), std::string::npos) << note;
    EXPECT_EQ(sbatch_calls(), 0U);
}

// Whichever claims continuation.<token> first decides; the other starts nothing, and the job
// then writes no exit_code (the record names a next attempt).
TEST_F(JobSideContinuation, StatusAndTheJobRacingGiveExactlyOneNextAttempt) {
    // Status first (it saw the end on the scheduler before the epilogue ran).
    const Job ended = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    ASSERT_TRUE(continue_if_checkpointed(*context_, ended, 75, note).has_value()) << note;
    EXPECT_TRUE(continue_from_job(*context_, attempt(ended.token, 1), note)) << note;
    EXPECT_EQ(sbatch_calls(), 1U);

    // The job first: status follows its decision.
    const Job other = ended_job(1, 3, "");
    write_checkpoint("iter_00000200.ckpt");
    runner_->reply("sbatch", 0, "4243\n");
    ASSERT_TRUE(continue_from_job(*context_, attempt(other.token, 1), note)) << note;
    auto next = continue_if_checkpointed(*context_, other, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    EXPECT_EQ(next->scheduler_id, "4243");
    EXPECT_EQ(sbatch_calls(), 2U);
}

TEST_F(JobSideContinuation, ACancelledAttemptDoesNotContinueItself) {
    const Job job = running_slurm("tokcancel1");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("scancel", 0, "");
    auto cancelled = cancel_job(*context_, std::to_string(job.id));
    ASSERT_TRUE(cancelled) << cancelled.error().message;
    // The training checkpoints on the cancel's TERM and exits 75; the job asks to continue.
    std::string note;
    EXPECT_FALSE(continue_from_job(*context_, attempt("tokcancel1", 1), note));
    EXPECT_EQ(sbatch_calls(), 0U);
    EXPECT_EQ(read_continuation_record(dir / "run", "tokcancel1")->declined, "cancelled");
    status();
    ASSERT_EQ(chain().size(), 1U);
    EXPECT_EQ(chain()[0].state, JobState::cancelled);
}

// The race a loaded machine showed: `dljob cancel` has claimed the attempt and signalled it,
// the job exits 0 on the signal (a trap, a shell), and a `dljob status` records the end before
// the cancel's own update. The state must be the one the user caused.
TEST_F(JobSideContinuation, AnEndAStatusSeesAfterTheCancelsClaimIsACancel) {
    const Job job = running_slurm("tokrace001");
    ASSERT_TRUE(claim_cancelled(job));
    std::ofstream(dir / "run" / "exit_code") << "0\n";
    runner_->reply("squeue", 0, "");
    runner_->reply("sacct", 0, "4000|COMPLETED|0:0|None\n");
    StatusOptions options;
    options.force = true;
    std::vector<std::string> warnings;
    ASSERT_TRUE(job_status(*context_, options, warnings));
    const auto ended = context_->store().find(job.id);
    ASSERT_TRUE(ended && ended->has_value());
    EXPECT_EQ((*ended)->state, JobState::cancelled);
    EXPECT_EQ((*ended)->reason, "cancelled with dljob cancel");
    EXPECT_TRUE(cancel_claimed(dir / "run", "tokrace001"));
    EXPECT_FALSE(cancel_claimed(dir / "run", "tokother01"));
}

TEST_F(JobSideContinuation, CancelFollowsTheAttemptTheJobSubmitted) {
    const Job first = running_slurm("tokfirst01");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4001\n");
    std::string note;
    ASSERT_TRUE(continue_from_job(*context_, attempt("tokfirst01", 1), note)) << note;
    // The user cancels the chain by the id submit printed; that attempt has ended (Slurm's
    // scancel would refuse it), the one its job submitted is the one to cancel.
    runner_->reply("scancel", 0, "");
    auto cancelled = cancel_job(*context_, std::to_string(first.id));
    ASSERT_TRUE(cancelled) << cancelled.error().message;
    const auto jobs = chain();
    ASSERT_EQ(jobs.size(), 2U);
    EXPECT_EQ(jobs[1].scheduler_id, "4001");
    EXPECT_EQ(jobs[1].state, JobState::cancelled);
    EXPECT_EQ(runner_->calls.back(), (std::vector<std::string>{"scancel", "4001"}));
    EXPECT_EQ(std::count(runner_->calls.begin(), runner_->calls.end(),
                         std::vector<std::string>{"scancel", "4000"}),
              0);
    // And the attempt it cancelled does not continue itself either.
    EXPECT_EQ(read_continuation_record(dir / "run", jobs[1].token)->declined, "cancelled");
}

// The user cancels the chain by the id submit printed, after a status has seen that attempt
// end and continued it: the chain's running attempt is cancelled.
TEST_F(Continuation, CancellingAnEndedAttemptCancelsTheChainsRunningOne) {
    const Job ended = ended_job(1, 3, "");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply("sbatch", 0, "4242\n");
    std::string note;
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    runner_->reply("scancel", 0, "");
    auto cancelled = cancel_job(*context_, std::to_string(ended.id));
    ASSERT_TRUE(cancelled) << cancelled.error().message;
    EXPECT_EQ(cancelled->state, JobState::timeout); // how it ended stays
    EXPECT_EQ(runner_->calls.back(), (std::vector<std::string>{"scancel", "4242"}));
    EXPECT_EQ(context_->store().find(next->id).value()->state, JobState::cancelled);
}

// sbatch gave no answer: the attempt may exist. The record keeps its token, and the next status
// records it and finds its id by that token, as for an interrupted `dljob submit`.
TEST_F(JobSideContinuation, ASubmitWithNoAnswerIsFoundByItsToken) {
    const Job first = running_slurm("tokfirst01");
    write_checkpoint("iter_00000100.ckpt");
    runner_->reply_timeout("sbatch");
    std::string note;
    EXPECT_TRUE(continue_from_job(*context_, attempt("tokfirst01", 1), note));
    EXPECT_NE(note.find("gave no answer"), std::string::npos) << note;
    const auto record = read_continuation_record(dir / "run", "tokfirst01");
    ASSERT_TRUE(record && !record->next_token.empty());
    EXPECT_TRUE(record->next_id.empty());
    const std::string listed =
        "4000|RUNNING|None|dljob:tokfirst01\n4001|RUNNING|None|dljob:" + record->next_token + "\n";
    runner_->reply("squeue", 0, listed); // the first attempt's poll
    runner_->reply("squeue", 0, listed); // the next attempt found by its token
    runner_->reply("squeue", 0, listed); // and polled
    status();
    const auto jobs = chain();
    ASSERT_EQ(jobs.size(), 2U);
    EXPECT_EQ(jobs[1].continues, first.id);
    EXPECT_EQ(jobs[1].scheduler_id, "4001");
    EXPECT_EQ(jobs[1].phase, SubmitPhase::submitted);
    EXPECT_EQ(jobs[1].state, JobState::running);
}

// A run directory without chain.json (submitted by an older dljob, or the file lost): the job
// decides nothing, so the status that has the job's row still can.
TEST_F(JobSideContinuation, WithoutChainJsonTheJobLeavesTheDecisionToStatus) {
    fs::remove(dir / "run" / "chain.json");
    write_checkpoint("iter_00000100.ckpt");
    std::string note;
    EXPECT_FALSE(continue_from_job(*context_, attempt("tokfirst01", 1), note));
    EXPECT_NE(note.find("chain.json"), std::string::npos) << note;
    EXPECT_FALSE(read_continuation_record(dir / "run", "tokfirst01").has_value());
    EXPECT_EQ(sbatch_calls(), 0U);
}

// Refused on the compute node (no job exists): the claim is given back, the job writes its
// exit_code 75, and the next status continues the attempt from the login node.
TEST_F(JobSideContinuation, ARefusedSubmitLeavesTheDecisionToStatus) {
    write_checkpoint("iter_00000100.ckpt");
    std::ofstream(dir / "run" / "job.log") << "attempt 1\n";
    runner_->reply("sbatch", 1, "", "sbatch: error: Batch job submission failed: Access denied\n");
    std::string note;
    const Job ended = ended_job(1, 3, "");
    EXPECT_FALSE(continue_from_job(*context_, attempt(ended.token, 1), note));
    EXPECT_NE(note.find("Access denied"), std::string::npos) << note;
    EXPECT_FALSE(read_continuation_record(dir / "run", ended.token).has_value());
    EXPECT_TRUE(fs::exists(dir / "run" / "job.log")); // still this attempt's
    runner_->reply("sbatch", 0, "4242\n");
    auto next = continue_if_checkpointed(*context_, ended, 75, note);
    ASSERT_TRUE(next.has_value()) << note;
    EXPECT_EQ(next->scheduler_id, "4242");
    EXPECT_EQ(sbatch_calls(), 2U);
}

} // namespace
} // namespace dljob::app
