// `dljob status` on a scheduler that reports no walltime kill (sqsub: done is just "D"): a job
// that ended non-zero after running its walltime is TIMEOUT, a shorter one FAILED; the final
// metrics record gives the iteration the training ended at. Real SQLite, recorded sqjobs output.

#include "unit/schedulers/fake_process_runner.hpp"

#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dljob::app {
namespace {

class StatusWalltime : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-status-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir / "run");
        auto store = adapters::SqliteJobStore::open(dir / "jobs.db");
        ASSERT_TRUE(store) << store.error().message;
        auto runner = std::make_unique<dljob::testing::FakeProcessRunner>();
        fake = runner.get();
        context.emplace(std::move(store.value()), std::move(runner));
    }
    void TearDown() override { std::filesystem::remove_all(dir); }

    // A sqsub job with a 60 s walltime that started at `started`, died with `code` at `ended`.
    JobView run(int code, std::int64_t started, std::int64_t ended,
                std::int64_t created_before_start = 5) {
        Job job;
        job.token = "0123456789";
        job.name = "t";
        job.site = "sharcnet";
        job.scheduler = "sqsub";
        job.run_dir = (dir / "run").string();
        job.walltime_s = 60;
        job.created_at = started - created_before_start;
        auto created = context->store().create(job);
        EXPECT_TRUE(created);
        EXPECT_TRUE(context->store().mark_submitted(created->id, "77", "", started - 5));
        std::ofstream(dir / "run" / "job_identity")
            << "token=0123456789\nscheduler=sqsub\njob_id=77\nhost=n1\nstarted=" << started
            << "\npid=1\n";
        std::ofstream(dir / "run" / "exit_code") << code << "\n";
        std::filesystem::last_write_time(
            dir / "run" / "exit_code", std::chrono::file_clock::from_sys(
                                           std::chrono::sys_seconds(std::chrono::seconds(ended))));
        fake->reply("sqjobs", 0,
                    "  jobid  queue state ncpus   prio    nodes time command\n"
                    "------- ------ ----- ----- ------ -------- ---- -------\n"
                    "     77 threaded D     1  1.000    n1    61s /bin/bash\n");
        StatusOptions options;
        options.force = true;
        options.ids = {std::to_string(created->id)};
        std::vector<std::string> warnings;
        auto views = job_status(*context, options, warnings);
        EXPECT_TRUE(views) << views.error().message;
        return views->front();
    }

    std::filesystem::path dir;
    std::optional<JobContext> context;
    dljob::testing::FakeProcessRunner* fake = nullptr;
};

TEST_F(StatusWalltime, KilledBySigtermAfterItsWalltimeIsTimeout) {
    const auto view = run(143, 1'700'000'000, 1'700'000'061);
    EXPECT_EQ(view.job.state, JobState::timeout);
    EXPECT_EQ(view.job.reason, "killed at the walltime");
    EXPECT_EQ(view.job.exit_code, 143);
}

TEST_F(StatusWalltime, KilledBeforeItsWalltimeIsAFailure) {
    const auto view = run(143, 1'700'000'000, 1'700'000'020);
    EXPECT_EQ(view.job.state, JobState::failed);
}

TEST_F(StatusWalltime, WhateverCodeTheProgramEndedWithPastItsWalltime) {
    // Shells and programs turn the scheduler's SIGTERM into codes of their own (bash: 255).
    const auto view = run(255, 1'700'000'000, 1'700'000'090);
    EXPECT_EQ(view.job.state, JobState::timeout);
}

TEST_F(StatusWalltime, AFailureBeforeTheWalltimeStaysAFailure) {
    const auto view = run(3, 1'700'000'000, 1'700'000'030);
    EXPECT_EQ(view.job.state, JobState::failed);
    EXPECT_EQ(view.job.exit_code, 3);
}

TEST_F(StatusWalltime, StartAndEndAreTheJobsOwnNotWhenStatusLooked) {
    // It ran an hour in 2023 and is looked at now: elapsed is its hour.
    const auto view = run(0, 1'700'000'000, 1'700'003'600);
    EXPECT_EQ(view.job.state, JobState::completed);
    EXPECT_EQ(view.job.started_at, 1'700'000'000);
    EXPECT_EQ(view.job.finished_at, 1'700'003'600);
}

TEST_F(StatusWalltime, AnIdentityOlderThanTheJobIsAnEarlierJobs) {
    // The identity says 1,700,000,000 but the row was made an hour later: not this job's start
    // (and no walltime verdict is drawn from it). Its end is known; its start is not, and is not
    // put after its end.
    const auto view = run(143, 1'700'000'000, 1'700'007'300, -3600);
    EXPECT_EQ(view.job.state, JobState::failed);
    EXPECT_EQ(view.job.started_at, 1'700'007'300);
    EXPECT_EQ(view.job.finished_at, 1'700'007'300);
}

// `dljob submit` on local killed after it started the job, before it recorded the pid: the
// job ran to completion. Status finds it by its token (the wrapper's local_job) and records
// what really happened; the table and --json say the same.
class InterruptedSubmit : public StatusWalltime {
protected:
    Job recorded(std::int64_t age_s) {
        Job job;
        job.token = "0123456789";
        job.name = "t";
        job.site = "local";
        job.scheduler = "local";
        job.run_dir = (dir / "run").string();
        job.walltime_s = 600;
        job.created_at = util::unix_now() - age_s;
        auto created = context->store().create(job);
        EXPECT_TRUE(created) << created.error().message;
        return *created;
    }
    JobView status_of(const Job& job) {
        StatusOptions options;
        options.ids = {std::to_string(job.id)};
        std::vector<std::string> warnings;
        auto views = job_status(*context, options, warnings);
        EXPECT_TRUE(views) << views.error().message;
        EXPECT_TRUE(warnings.empty()) << warnings.front();
        return views->front();
    }
    static std::string table_row(const JobView& view) {
        std::ostringstream out;
        print_status_table(out, {view}, util::unix_now());
        return out.str().substr(out.str().find('\n') + 1);
    }
    static nlohmann::json json_row(const JobView& view) {
        std::ostringstream out;
        print_status_json(out, {view});
        return nlohmann::json::parse(out.str());
    }
};

TEST_F(InterruptedSubmit, AJobThatRanIsFoundByItsTokenAndRecordedAsItEnded) {
    const Job job = recorded(5);
    std::ofstream(dir / "run" / "local_job") << "pid=4242\ntoken=0123456789\n";
    std::ofstream(dir / "run" / "local_exit") << "0\n";
    std::ofstream(dir / "run" / "exit_code") << "0\n";
    const auto view = status_of(job);
    EXPECT_EQ(view.job.phase, SubmitPhase::submitted);
    EXPECT_EQ(view.job.scheduler_id, "4242");
    EXPECT_EQ(view.job.state, JobState::completed);
    EXPECT_EQ(view.job.exit_code, 0);
    const std::string row = table_row(view);
    EXPECT_NE(row.find(" COMPLETED "), std::string::npos) << row;
    EXPECT_EQ(json_row(view).at("state"), "COMPLETED");
}

TEST_F(InterruptedSubmit, ARunningJobIsFoundByTheTokenInItsEnvironment) {
    const Job job = recorded(120);
    ProcessInfo wrapper;
    wrapper.pid = 5151;
    wrapper.pgid = 5151;
    wrapper.start_ticks = 77;
    wrapper.environment = {"HOME=/home/u", "DLJOB_JOB_TOKEN=0123456789"};
    fake->processes.push_back(wrapper);
    const auto view = status_of(job);
    EXPECT_EQ(view.job.scheduler_id, "5151");
    EXPECT_EQ(view.job.state, JobState::running);
    EXPECT_NE(table_row(view).find(" RUNNING "), std::string::npos) << table_row(view);
    EXPECT_EQ(json_row(view).at("state"), "RUNNING");
}

// Killed before it started anything (here: while writing the script). Within the grace period
// the row stays SUBMITTING; after it, FAILED in both views, and the directory that holds only
// submit's unfinished temporary file is gone.
TEST_F(InterruptedSubmit, ASubmitThatStartedNothingEndsFailedAndLeavesNoDirectory) {
    std::ofstream(dir / "run" / ".job.sh.tmp1a2b3c") << "#!/bin/bash\n";
    std::ofstream(dir / "run" / "chain.json") << "{}\n"; // written by submit too
    std::ofstream(dir / "run" / "job.log"); // opened for the job's output, never written
    const Job fresh = recorded(5);
    auto view = status_of(fresh);
    EXPECT_EQ(view.job.phase, SubmitPhase::submitting);
    EXPECT_NE(table_row(view).find(" SUBMITTING "), std::string::npos) << table_row(view);
    EXPECT_TRUE(std::filesystem::exists(dir / "run"));
    ASSERT_TRUE(context->store().remove(fresh.id));

    const Job old = recorded(120);
    view = status_of(old);
    EXPECT_EQ(view.job.state, JobState::failed);
    EXPECT_EQ(view.job.native_state, "not submitted");
    const std::string row = table_row(view);
    EXPECT_NE(row.find(" FAILED "), std::string::npos) << row;
    EXPECT_EQ(row.find("SUBMITTING"), std::string::npos) << row;
    EXPECT_EQ(json_row(view).at("state"), "FAILED");
    EXPECT_FALSE(std::filesystem::exists(dir / "run")) << "the interrupted render's directory";
}

// A directory the job may have run in is never removed.
TEST_F(InterruptedSubmit, ADirectoryWithTheJobsOwnFilesIsKept) {
    std::ofstream(dir / "run" / "job.sh") << "#!/bin/bash\n";
    std::ofstream(dir / "run" / "job.log") << "output\n";
    const auto view = status_of(recorded(120));
    EXPECT_EQ(view.job.state, JobState::failed);
    EXPECT_TRUE(std::filesystem::exists(dir / "run" / "job.log"));
}

TEST(StatusJson, OneObjectPerLine) {
    JobView first;
    first.job.id = 1;
    first.job.name = "a";
    JobView second = first;
    second.job.id = 2;
    std::ostringstream out;
    print_status_json(out, {first, second});
    std::istringstream lines(out.str());
    std::vector<std::int64_t> ids;
    for (std::string line; std::getline(lines, line);) {
        const auto row = nlohmann::json::parse(line);
        ASSERT_TRUE(row.is_object()) << line;
        ids.push_back(row.at("id").get<std::int64_t>());
    }
    EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 2})) << out.str();
    std::ostringstream none;
    print_status_json(none, {});
    EXPECT_EQ(none.str(), "");
}

TEST(StatusTable, AnEndedJobShowsNoEtaAndALongReasonKeepsTheColumnsInLine) {
    JobMetrics metrics;
    metrics.iter = 200;
    metrics.max_iter = 300;
    metrics.elapsed_s = 5.0;
    JobView running;
    running.job.id = 1;
    running.job.name = "lenet";
    running.job.state = JobState::running;
    running.job.phase = SubmitPhase::submitted;
    running.metrics = metrics;
    JobView cancelled = running;
    cancelled.job.id = 2;
    cancelled.job.state = JobState::cancelled;
    cancelled.job.reason = "cancelled with dljob cancel by a very long explanation";
    std::ostringstream out;
    print_status_table(out, {running, cancelled}, 1000);
    std::istringstream lines(out.str());
    std::string header;
    std::string first;
    std::string second;
    std::getline(lines, header);
    std::getline(lines, first);
    std::getline(lines, second);
    EXPECT_NE(first.find("ETA 2s"), std::string::npos) << first;
    EXPECT_EQ(second.find("ETA"), std::string::npos) << second;
    EXPECT_NE(second.find("CANCELLED (cancelled with..."), std::string::npos) << second;
    EXPECT_EQ(first.find("iter 200/300"), header.find("PROGRESS")) << out.str();
    EXPECT_EQ(second.find("iter 200/300"), header.find("PROGRESS")) << out.str();
}

// A run directory of the test's own, removed with it, whose metrics.jsonl holds `lines`.
class MetricsDir {
public:
    MetricsDir(const std::string& name, const std::vector<std::string>& lines)
        : m_dir(std::filesystem::temp_directory_path() /
                ("dljob-" + name + "-" + std::to_string(::getpid()))) {
        std::filesystem::create_directories(m_dir);
        append(lines);
    }
    ~MetricsDir() { std::filesystem::remove_all(m_dir); }
    MetricsDir(const MetricsDir&) = delete;
    MetricsDir& operator=(const MetricsDir&) = delete;
    MetricsDir(MetricsDir&&) = delete;
    MetricsDir& operator=(MetricsDir&&) = delete;

    void append(const std::vector<std::string>& lines) const {
        std::ofstream out(m_dir / "metrics.jsonl", std::ios::app);
        for (const auto& line : lines) {
            out << line << '\n';
        }
    }
    [[nodiscard]] std::string path() const { return m_dir.string(); }

private:
    std::filesystem::path m_dir;
};

// A continued job appends to the same metrics.jsonl: the last process's start line resets what
// the previous attempt ended with, and the ETA counts from where this process began.
TEST(StatusMetrics, AResumedProcessCountsFromItsOwnStart) {
    const MetricsDir dir(
        "resumed", {R"({"type":"start","iter":0,"max_iter":1000})",
                    R"({"type":"train","iter":400,"max_iter":1000,"loss":0.5,"elapsed_s":400})",
                    R"({"type":"final","iter":400,"max_iter":1000,"status":"checkpointed"})",
                    R"({"type":"start","iter":400,"max_iter":1000})",
                    R"({"type":"train","iter":600,"max_iter":1000,"loss":0.4,"elapsed_s":100})"});
    auto metrics = read_metrics(dir.path());
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->start_iter, 400);
    EXPECT_EQ(metrics->final_status, "");
    // 200 iterations in 100 s: 400 left take 200 s (not 400 / (600 / 100) = 66 s).
    EXPECT_EQ(progress_text(*metrics, JobState::running), "iter 600/1000 loss 0.400 ETA 3m20s");
    JobMetrics before_its_start = *metrics;
    before_its_start.final_status = "checkpointed";
    EXPECT_EQ(progress_text(before_its_start, JobState::running).find("checkpointed"),
              std::string::npos);
    EXPECT_NE(progress_text(before_its_start, JobState::timeout).find("checkpointed"),
              std::string::npos);
}

// A damaged metrics file (found by tests/fuzz's metrics target): values of the wrong type or
// out of an iteration's range are skipped key by key; status neither throws nor casts them.
TEST(StatusMetrics, ValuesOfTheWrongTypeOrRangeAreSkipped) {
    const MetricsDir dir(
        "damaged", {R"({"type":"train","iter":100,"max_iter":1000,"loss":0.5,"elapsed_s":10})",
                    R"({"type":5,"iter":900})",
                    R"({"type":"train","iter":1e300,"max_iter":"lots","loss":0.25})",
                    R"({"type":"final","iter":-1e30,"status":7})"});
    std::optional<JobMetrics> metrics;
    EXPECT_NO_THROW(metrics = read_metrics(dir.path()));
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->iter, 0);     // the second train line's iteration is no count
    EXPECT_EQ(metrics->max_iter, 0); // nor its max_iter
    EXPECT_EQ(metrics->loss, 0.25);
    EXPECT_EQ(metrics->final_status, "");
    // An elapsed_s no job has (found by the same target: a cast past int64) gives no ETA.
    JobMetrics endless = *metrics;
    endless.iter = 10;
    endless.max_iter = 1000;
    endless.elapsed_s = 1e300;
    EXPECT_EQ(progress_text(endless, JobState::running), "iter 10/1000 loss 0.250");
    endless.elapsed_s = -5.0;
    EXPECT_EQ(progress_text(endless, JobState::running), "iter 10/1000 loss 0.250");
    endless.elapsed_s = 10.0;
    EXPECT_EQ(progress_text(endless, JobState::running), "iter 10/1000 loss 0.250 ETA 16m30s");
}

// A data-parallel training (issue 21): its start line names its ranks, and status shows them
// with the throughput of each beside the whole's. A resumed process on fewer ranks says so.
TEST(StatusMetrics, ADataParallelTrainingShowsItsRanksAndTheirShareOfTheThroughput) {
    const MetricsDir dir(
        "ranks", {R"({"type":"start","iter":0,"max_iter":1000,"ranks":4,"global_batch_size":256})",
                  R"({"type":"train","iter":100,"max_iter":1000,"loss":0.5,"images_per_s":8000,)"
                  R"("elapsed_s":10})"});
    auto metrics = read_metrics(dir.path());
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->ranks, 4);
    EXPECT_EQ(progress_text(*metrics, JobState::running),
              "iter 100/1000 loss 0.500 8000 img/s (4 ranks, 2000 each) ETA 1m30s");
    // Continued on one rank: the new start line's count, not the first one's.
    dir.append({R"({"type":"start","iter":100,"max_iter":1000})",
                R"({"type":"train","iter":200,"max_iter":1000,"loss":0.4,"images_per_s":3000,)"
                R"("elapsed_s":10})"});
    auto resumed = read_metrics(dir.path());
    ASSERT_TRUE(resumed);
    EXPECT_EQ(resumed->ranks, 1);
    EXPECT_EQ(progress_text(*resumed, JobState::running).find("ranks"), std::string::npos);
}

// `status --watch` (issue 22): under each job's row, a sparkline of the loss in its run
// directory, the same one `plot --format text` draws (plot.hpp's sparkline).
TEST(StatusWatch, AFrameShowsASparklineOfEachJobsTrainingLossUnderItsRow) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("dljob-watch-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "falling");
    std::filesystem::create_directories(dir / "tested");
    std::filesystem::create_directories(dir / "empty");
    {
        std::ofstream falling(dir / "falling" / "metrics.jsonl");
        falling << R"({"type":"start","iter":0,"max_iter":40})"
                << "\n";
        for (int iter = 0; iter <= 40; iter += 10) {
            falling << fmt::format(R"({{"type":"train","iter":{},"max_iter":40,"loss":{}}})", iter,
                                   2.0 - iter / 20.0)
                    << "\n";
        }
        falling << "not json\n"; // skipped, and no warning in every frame
        std::ofstream(dir / "tested" / "metrics.jsonl")
            << R"({"type":"test","iter":0,"loss":1.0,"accuracy":0.1})"
            << "\n"
            << R"({"type":"test","iter":100,"loss":3.0,"accuracy":0.2})"
            << "\n";
    }
    const auto view = [&](std::int64_t id, const std::string& run) {
        JobView v;
        v.job.id = id;
        v.job.name = run;
        v.job.state = JobState::running;
        v.job.phase = SubmitPhase::submitted;
        v.job.run_dir = (dir / run).string();
        return v;
    };
    std::ostringstream out;
    print_watch_frame(out, {view(1, "falling"), view(2, "tested"), view(3, "empty")}, 1000, false,
                      5);
    std::filesystem::remove_all(dir);
    std::vector<std::string> lines;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    ASSERT_EQ(lines.size(), 6U) << out.str(); // header, 1 and its line, 2 and its line, 3
    EXPECT_EQ(lines[1].rfind("1 ", 0), 0U) << out.str();
    EXPECT_EQ(lines[2], "       █▆▅▃▁ training loss, iter 0..40, last 0") << out.str();
    EXPECT_EQ(lines[3].rfind("2 ", 0), 0U) << out.str();
    // No training loss yet: the test loss, said so.
    EXPECT_EQ(lines[4], "       ▁▁▁▁█ test loss, iter 0..100, last 3") << out.str();
    EXPECT_EQ(lines[5].rfind("3 ", 0), 0U) << out.str();
    // The plain table has no such lines.
    std::ostringstream table;
    print_status_table(table, {view(1, "falling")}, 1000);
    EXPECT_EQ(table.str().find("loss,"), std::string::npos) << table.str();
}

// dltrain's records are a few hundred bytes: a line over 16 KiB (plot's limit) is someone
// else's, skipped whole (not held: one endless line would take the login node's memory), and the
// lines after it count.
TEST(StatusMetrics, ALineTooLongForARecordIsSkippedAndTheNextOnesAreRead) {
    const MetricsDir dir("longline",
                         {R"({"type":"train","iter":20,"max_iter":100,"loss":1.5})",
                          R"({"type":"train","iter":99,"max_iter":100,"loss":9.9,"pad":")" +
                              std::string(std::size_t{1} << 20U, 'x') + "\"}",
                          R"({"type":"test","iter":20,"accuracy":0.5})"});
    auto metrics = read_metrics(dir.path());
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->iter, 20) << "the long line was read as a record";
    ASSERT_TRUE(metrics->loss);
    EXPECT_DOUBLE_EQ(*metrics->loss, 1.5);
    ASSERT_TRUE(metrics->accuracy) << "the line after the long one was not read";
    EXPECT_DOUBLE_EQ(*metrics->accuracy, 0.5);
}

TEST(StatusMetrics, TheFinalRecordSaysWhereTrainingEnded) {
    const MetricsDir dir(
        "metrics",
        {R"({"type":"train","iter":0,"max_iter":100,"loss":2.3,"images_per_s":500})",
         R"({"type":"test","iter":100,"accuracy":0.75,"loss":0.7})",
         R"({"type":"final","iter":100,"max_iter":100,"status":"completed","test_accuracy":0.751})"});
    auto metrics = read_metrics(dir.path());
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->iter, 100);
    EXPECT_EQ(metrics->max_iter, 100);
    EXPECT_EQ(metrics->final_status, "completed");
    ASSERT_TRUE(metrics->accuracy);
    EXPECT_DOUBLE_EQ(*metrics->accuracy, 0.751);
}

} // namespace
} // namespace dljob::app
