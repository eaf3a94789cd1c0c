#include "fake_process_runner.hpp"

#include <dljob/adapters/process_boost.hpp>
#include <dljob/schedulers/local.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

namespace dljob::schedulers {
namespace {

class LocalAdapter : public ::testing::Test {
protected:
    static std::string exit_file_name() { return LocalScheduler::exit_file; }
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-local-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        // Unique per test: find_by_token also looks through every live process for the token,
        // and ctest runs these tests side by side.
        tok = "tok-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
    }
    void TearDown() override { std::filesystem::remove_all(dir); }

    SubmitRequest script(const std::string& body, std::int64_t walltime_s = 0) {
        const auto path = dir / "job.sh";
        std::ofstream(path) << "#!/bin/bash\n" << body << "\n";
        SubmitRequest request;
        request.script_path = path.string();
        request.run_dir = dir.string();
        request.token = tok;
        request.walltime_s = walltime_s;
        return request;
    }

    // Polls until the job leaves RUNNING (a few seconds at most for these scripts).
    std::optional<SchedulerStatus> wait_for_end(Scheduler& local, const JobRef& ref) {
        for (int i = 0; i < 200; ++i) {
            auto polled = local.poll({ref});
            EXPECT_TRUE(polled);
            auto it = polled->find(ref.scheduler_id);
            if (it == polled->end()) {
                return std::nullopt;
            }
            if (it->second.state != JobState::running) {
                return it->second;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return std::nullopt;
    }

    std::filesystem::path dir;
    std::string tok;
    adapters::BoostProcessRunner runner;
};

TEST_F(LocalAdapter, RunsScriptDetachedAndReportsCompletion) {
    LocalScheduler local(runner, {});
    auto submitted = local.submit(script("echo hello from $DLJOB_JOB_TOKEN; sleep 0.3"));
    ASSERT_TRUE(submitted) << submitted.error().message;
    JobRef ref{submitted->scheduler_id, submitted->secondary_id, dir.string(), tok};
    auto polled = local.poll({ref});
    ASSERT_TRUE(polled);
    EXPECT_EQ(polled->at(ref.scheduler_id).state, JobState::running);
    auto end = wait_for_end(local, ref);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->state, JobState::completed);
    std::ifstream log(dir / LocalScheduler::log_file);
    std::string line;
    std::getline(log, line);
    EXPECT_EQ(line, "hello from " + tok);
}

// A continuation submits again in the same run directory: the previous attempt's exit (75,
// after a watchdog timeout here) must not end the new one at once, and the log goes on.
TEST_F(LocalAdapter, ASecondSubmitInTheSameRunDirectoryStartsAfresh) {
    LocalScheduler local(runner, {});
    auto first = local.submit(script("echo first; exit 75", 30));
    ASSERT_TRUE(first);
    auto end = wait_for_end(local, {first->scheduler_id, "", dir.string(), tok});
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->exit_code, 75);
    std::ofstream(dir / LocalScheduler::timeout_file) << "";

    auto second = local.submit(script("echo second; sleep 0.5"));
    ASSERT_TRUE(second);
    const JobRef ref{second->scheduler_id, second->secondary_id, dir.string(), tok};
    auto polled = local.poll({ref});
    ASSERT_TRUE(polled);
    EXPECT_EQ(polled->at(ref.scheduler_id).state, JobState::running);
    end = wait_for_end(local, ref);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->state, JobState::completed);
    std::ifstream log(dir / LocalScheduler::log_file);
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_EQ(text.str(), "first\nsecond\n");
}

TEST_F(LocalAdapter, FailingScriptIsFailedWithItsExitCode) {
    LocalScheduler local(runner, {});
    auto submitted = local.submit(script("exit 7"));
    ASSERT_TRUE(submitted);
    auto end = wait_for_end(local, {submitted->scheduler_id, "", dir.string(), tok});
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->state, JobState::failed);
    EXPECT_EQ(end->exit_code, 7);
}

TEST_F(LocalAdapter, WalltimeWatchdogMakesATimeout) {
    LocalScheduler local(runner, {});
    auto submitted = local.submit(script("sleep 60", 1));
    ASSERT_TRUE(submitted);
    auto end = wait_for_end(local, {submitted->scheduler_id, "", dir.string(), tok});
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->state, JobState::timeout);
}

TEST_F(LocalAdapter, CancelKillsTheWholeGroup) {
    LocalScheduler local(runner, {});
    auto submitted = local.submit(script("sleep 60 & sleep 60; wait"));
    ASSERT_TRUE(submitted);
    JobRef ref{submitted->scheduler_id, "", dir.string(), tok};
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(local.cancel(ref));
    const int pgid = std::stoi(ref.scheduler_id);
    for (int i = 0; i < 50 && runner.group_alive(pgid); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_FALSE(runner.group_alive(pgid));
}

// The watchdog's sleep (walltime + the grace minute) and anything else the script left in its
// group end with the job: no process of a finished job is left behind.
TEST_F(LocalAdapter, NothingOfAFinishedJobOutlivesIt) {
    LocalScheduler local(runner, {});
    auto submitted = local.submit(script("(sleep 120) & echo done", 100));
    ASSERT_TRUE(submitted);
    const JobRef ref{submitted->scheduler_id, submitted->secondary_id, dir.string(), tok};
    auto end = wait_for_end(local, ref);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->state, JobState::completed);
    const int pgid = std::stoi(ref.scheduler_id);
    for (int i = 0; i < 50 && runner.group_alive(pgid); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_FALSE(runner.group_alive(pgid)) << "a process of the finished job is still running";
    runner.signal_group(pgid, SIGKILL);
}

// `dljob submit` killed after it started the job but before it recorded the pid: the job is
// found by its token, while it runs and after it ended (the wrapper's local_job); another
// token (an earlier attempt in the same run directory) finds nothing.
TEST_F(LocalAdapter, FindsAJobWhoseIdWasNeverRecordedByItsToken) {
    LocalScheduler local(runner, {});
    auto submitted = local.submit(script("sleep 0.5"));
    ASSERT_TRUE(submitted);
    const JobRef lookup{"", "", dir.string(), tok};
    auto found = local.find_by_token(lookup);
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->scheduler_id, submitted->scheduler_id);
    auto end = wait_for_end(local, {submitted->scheduler_id, "", dir.string(), tok});
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->state, JobState::completed);
    found = local.find_by_token(lookup);
    ASSERT_TRUE(found);
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->scheduler_id, submitted->scheduler_id);
    found = local.find_by_token({"", "", dir.string(), "other"});
    ASSERT_TRUE(found);
    EXPECT_FALSE(found->has_value());
}

// Before the wrapper has written local_job, a live process with the token in its environment
// names the job's group.
TEST_F(LocalAdapter, FindsARunningJobByTheTokenInItsEnvironment) {
    DetachedRequest request;
    request.argv = {"sleep", "30"};
    request.env = {{"DLJOB_JOB_TOKEN", "envtok"}};
    request.output_path = (dir / "out.log").string();
    auto pid = runner.spawn_detached(request);
    ASSERT_TRUE(pid);
    LocalScheduler local(runner, {});
    // The pid comes back at fork; the environment is the new one once the child has exec'd.
    auto found = local.find_by_token({"", "", dir.string(), "envtok"});
    for (int i = 0; i < 50 && found && !found->has_value(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        found = local.find_by_token({"", "", dir.string(), "envtok"});
    }
    runner.signal_group(*pid, SIGKILL);
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->scheduler_id, std::to_string(*pid));
}

// The stored pid went to another process (the wrapper died, the number was reused): that one
// is neither reported as the job running nor signalled by a cancel.
TEST_F(LocalAdapter, AReusedPidIsNeitherRunningNorCancelled) {
    DetachedRequest request;
    request.argv = {"sleep", "30"};
    request.output_path = (dir / "out.log").string();
    auto stranger = runner.spawn_detached(request);
    ASSERT_TRUE(stranger);
    for (int i = 0; i < 50 && !runner.group_alive(*stranger); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // until its setsid
    }
    ASSERT_TRUE(runner.group_alive(*stranger));
    LocalScheduler local(runner, {});
    for (const std::string& started : {std::string(), std::string("1")}) {
        const JobRef ref{std::to_string(*stranger), started, dir.string(), tok};
        auto polled = local.poll({ref});
        ASSERT_TRUE(polled) << polled.error().message;
        EXPECT_TRUE(polled->empty()) << "an unrelated process read as the job";
        auto cancelled = local.cancel(ref);
        ASSERT_FALSE(cancelled);
        EXPECT_EQ(cancelled.error().code, ErrorCode::not_found);
        EXPECT_TRUE(runner.group_alive(*stranger)) << "an unrelated process was signalled";
    }
    runner.signal_group(*stranger, SIGKILL);
}

// Issue 25: the wrapper continues a job that exits 75 after a new checkpoint by itself. The
// script here checkpoints and exits 75 on its first run, finishes on its second.
TEST_F(LocalAdapter, TheWrapperContinuesACheckpointedJobItself) {
    LocalScheduler local(runner, {});
    SubmitRequest request = script(R"(mkdir -p checkpoints
if [ -e checkpoints/one ]; then echo second; exit 0; fi
echo first; : >checkpoints/one; exit 75)");
    request.log_path = (dir / "job.log").string();
    request.max_continuations = 3;
    auto submitted = local.submit(request);
    ASSERT_TRUE(submitted);
    for (int i = 0; i < 100 && !std::filesystem::exists(dir / exit_file_name()); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::ifstream exit_file(dir / exit_file_name());
    std::string code;
    std::getline(exit_file, code);
    EXPECT_EQ(code, "0") << "the second attempt's end";
    std::ifstream record_file(dir / ("continuation." + tok));
    std::stringstream record;
    record << record_file.rdbuf();
    EXPECT_NE(record.str().find("exit_code=75\n"), std::string::npos) << record.str();
    EXPECT_NE(record.str().find("next_token="), std::string::npos) << record.str();
    EXPECT_NE(record.str().find("pid="), std::string::npos) << record.str();
    std::ifstream first_log(dir / "job.attempt1.log");
    std::string line;
    std::getline(first_log, line);
    EXPECT_EQ(line, "first");
}

// A `dljob status` that decided first (the record exists): the wrapper starts nothing, and
// writes no local_exit, which would read as the end of the attempt status started.
TEST_F(LocalAdapter, TheWrapperFollowsADecisionMadeBeforeIt) {
    std::ofstream(dir / ("continuation." + tok))
        << "exit_code=75\nnext_token=fromstatus\nby=dljob\n";
    LocalScheduler local(runner, {});
    SubmitRequest request = script("mkdir -p checkpoints; : >checkpoints/one; echo once; exit 75");
    request.max_continuations = 3;
    auto submitted = local.submit(request);
    ASSERT_TRUE(submitted);
    const int pgid = std::stoi(submitted->scheduler_id);
    for (int i = 0; i < 100 && runner.group_alive(pgid); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_FALSE(std::filesystem::exists(dir / exit_file_name()));
    EXPECT_FALSE(std::filesystem::exists(dir / "job.attempt1.log"));
    std::ifstream log(dir / LocalScheduler::log_file);
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_EQ(text.str(), "once\n") << "a second attempt ran";
}

TEST_F(LocalAdapter, VanishedJobIsAbsentNotCompleted) {
    dljob::testing::FakeProcessRunner fake;
    LocalScheduler local(fake, {});
    auto polled = local.poll({{"999999", "", dir.string(), tok}});
    ASSERT_TRUE(polled);
    EXPECT_TRUE(polled->empty());
}

// --after on local: the dependant waits (PENDING, "dependency") while the other job runs, then
// runs if it may; an afterok dependant of a failed job never runs its script.
TEST_F(LocalAdapter, AfterWaitsForTheOtherJobAndAnOkDependantOfAFailureNeverRuns) {
    LocalScheduler local(runner, {});
    for (const auto& [first_exit, ok, runs] : std::vector<std::tuple<int, bool, bool>>{
             {0, true, true}, {1, true, false}, {1, false, true}}) {
        const auto first_dir = dir / fmt::format("first-{}-{}", first_exit, ok);
        const auto second_dir = dir / fmt::format("second-{}-{}", first_exit, ok);
        std::filesystem::create_directories(first_dir);
        std::filesystem::create_directories(second_dir);
        SubmitRequest first = script(fmt::format(
            "while [ ! -e {}/go ]; do sleep 0.1; done; exit {}", first_dir.string(), first_exit));
        first.run_dir = first_dir.string();
        first.token = tok + "-a";
        auto a = local.submit(first);
        ASSERT_TRUE(a) << a.error().message;
        const auto second_script = second_dir / "job.sh";
        std::ofstream(second_script) << "#!/bin/bash\ntouch " << second_dir.string() << "/ran\n";
        SubmitRequest second;
        second.script_path = second_script.string();
        second.run_dir = second_dir.string();
        second.token = tok + "-b";
        second.after = JobDependency{1, a->scheduler_id, first_dir.string(), ok};
        auto b = local.submit(second);
        ASSERT_TRUE(b) << b.error().message;
        JobRef ref{b->scheduler_id, b->secondary_id, second_dir.string(), second.token};
        std::optional<SchedulerStatus> waiting;
        for (int i = 0; i < 100 && (!waiting || waiting->state != JobState::pending); ++i) {
            auto polled = local.poll({ref});
            ASSERT_TRUE(polled);
            if (polled->count(ref.scheduler_id) != 0) {
                waiting = polled->at(ref.scheduler_id);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ASSERT_TRUE(waiting);
        EXPECT_EQ(waiting->state, JobState::pending);
        EXPECT_EQ(waiting->reason, "dependency");
        EXPECT_FALSE(std::filesystem::exists(second_dir / "ran"));
        std::ofstream(first_dir / "go") << "";
        auto end = wait_for_end(local, ref);
        for (int i = 0; i < 100 && end && end->state == JobState::pending; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            end = wait_for_end(local, ref);
        }
        ASSERT_TRUE(end.has_value());
        EXPECT_EQ(std::filesystem::exists(second_dir / "ran"), runs) << first_exit << ok;
        EXPECT_EQ(end->state, runs ? JobState::completed : JobState::cancelled)
            << first_exit << ok << " " << end->reason;
        if (!runs) {
            EXPECT_NE(end->reason.find("dependency never satisfied"), std::string::npos)
                << end->reason;
        }
    }
}

TEST_F(LocalAdapter, MissingScriptIsRejected) {
    LocalScheduler local(runner, {});
    SubmitRequest request;
    request.script_path = (dir / "nope.sh").string();
    request.run_dir = dir.string();
    auto submitted = local.submit(request);
    ASSERT_FALSE(submitted);
    EXPECT_EQ(submitted.error().code, ErrorCode::scheduler_rejected);
}

} // namespace
} // namespace dljob::schedulers
