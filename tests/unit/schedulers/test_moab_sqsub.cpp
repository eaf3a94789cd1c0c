#include "fake_process_runner.hpp"
#include "fixture.hpp"

#include <dljob/schedulers/moab.hpp>
#include <dljob/schedulers/scheduler_table.hpp>
#include <dljob/schedulers/sqsub.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dljob::schedulers {
namespace {

using dljob::testing::scheduler_output;

class MoabAdapter : public ::testing::Test {
protected:
    dljob::testing::FakeProcessRunner runner;
    MoabScheduler moab{runner, SchedulerOptions{std::chrono::seconds(5), "user"}};
};

TEST_F(MoabAdapter, ParsesMsubIdAfterBlankLine) {
    EXPECT_EQ(parse_msub_id(scheduler_output("moab-msub.txt")), "881196");
    EXPECT_EQ(parse_msub_id(scheduler_output("moab-msub-prefixed.txt")), "Moab.123");
    EXPECT_EQ(parse_msub_id("<Data><job JobID=\"881218\"/></Data>"), "881218");
    EXPECT_FALSE(parse_msub_id("ERROR:  cannot submit job\n").has_value());
}

TEST_F(MoabAdapter, ASweepIsSubmittedAsOneThrottledArray) {
    runner.reply("msub", 0, "\nMoab.45\n");
    SubmitRequest request;
    request.script_path = "/runs/1/array.sh";
    request.token = "0123456789";
    request.array = ArraySpec{3, 2};
    auto submitted = moab.submit(request);
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "Moab.45");
    const auto& argv = runner.calls.at(0);
    ASSERT_GE(argv.size(), 3U);
    EXPECT_EQ(argv.at(argv.size() - 3), "-t");
    EXPECT_EQ(argv.at(argv.size() - 2), "dljob[0-2]%2");
}

TEST_F(MoabAdapter, MapsQueuesAndKeepsTheTorqueId) {
    auto jobs = parse_showq_xml(scheduler_output("moab-showq-xml.txt"));
    ASSERT_EQ(jobs.size(), 3U);
    auto running = map_moab_state(jobs[0]);
    EXPECT_EQ(running.state, JobState::running);
    EXPECT_EQ(running.secondary_id, "881196.admin2");
    EXPECT_EQ(map_moab_state(jobs[1]).state, JobState::pending);
    auto held = map_moab_state(jobs[2]);
    EXPECT_EQ(held.state, JobState::pending);
    EXPECT_EQ(held.reason, "UserHold");
}

TEST_F(MoabAdapter, MapsCompletionCodes) {
    auto jobs = parse_showq_xml(scheduler_output("moab-showq-completed-xml.txt"));
    ASSERT_EQ(jobs.size(), 4U);
    EXPECT_EQ(map_moab_state(jobs[0]).state, JobState::completed);
    EXPECT_EQ(map_moab_state(jobs[1]).state, JobState::cancelled);
    EXPECT_EQ(map_moab_state(jobs[2]).state, JobState::timeout);
    EXPECT_EQ(map_moab_state(jobs[3]).exit_code, 3);
}

TEST_F(MoabAdapter, PollAsksForCompletedJobsOnlyWhenSomeAreMissing) {
    runner.reply("showq", 0, scheduler_output("moab-showq-xml.txt"));
    auto polled = moab.poll({{"881196", "", "", ""}});
    ASSERT_TRUE(polled);
    EXPECT_EQ(runner.calls.size(), 1U);
    runner.reply("showq", 0, scheduler_output("moab-showq-xml.txt"));
    runner.reply("showq", 0, scheduler_output("moab-showq-completed-xml.txt"));
    polled = moab.poll({{"881196", "", "", ""}, {"881193", "", "", ""}});
    ASSERT_TRUE(polled);
    EXPECT_EQ(runner.calls.size(), 3U);
    EXPECT_EQ(runner.calls.at(2).at(1), "-c");
    EXPECT_EQ(polled->at("881193").state, JobState::failed);
}

TEST_F(MoabAdapter, CancelFailsOnErrorText) {
    runner.reply("canceljob", 1, "ERROR:  invalid job specified (42)\n");
    auto cancelled = moab.cancel({"42", "", "", ""});
    ASSERT_FALSE(cancelled);
    EXPECT_NE(cancelled.error().message.find("invalid job specified"), std::string::npos);
}

class SqsubAdapter : public ::testing::Test {
protected:
    dljob::testing::FakeProcessRunner runner;
    SqsubScheduler sqsub{runner, SchedulerOptions{std::chrono::seconds(5), "user"}};
};

TEST_F(SqsubAdapter, ParsesSubmitOutput) {
    EXPECT_EQ(parse_sqsub_id(scheduler_output("sqsub-submit.txt")), "222166");
    EXPECT_EQ(parse_sqsub_id("Job <4242> is submitted to queue <gpu>.\n"), "4242");
    EXPECT_FALSE(parse_sqsub_id("sqsub: error: bad runtime\n").has_value());
}

TEST_F(SqsubAdapter, FindsStateTokenWhateverTheColumns) {
    auto jobs = parse_sqjobs(scheduler_output("sqjobs.txt"));
    ASSERT_EQ(jobs.size(), 4U);
    EXPECT_EQ(map_sqsub_state(jobs.at("169799")).state, JobState::running);
    EXPECT_EQ(map_sqsub_state(jobs.at("169800")).state, JobState::pending);
    EXPECT_EQ(map_sqsub_state(jobs.at("169801")).reason, "dependency");
    EXPECT_EQ(map_sqsub_state(jobs.at("169802")).state, JobState::unknown); // done: file decides
    EXPECT_EQ(map_sqsub_state("K").state, JobState::cancelled);
}

TEST_F(SqsubAdapter, SubmitPassesMandatoryRuntimeInMinutes) {
    runner.reply("sqsub", 0, scheduler_output("sqsub-submit.txt"));
    SubmitRequest request;
    request.script_path = "/nonexistent/job.sh";
    request.run_dir = "/nonexistent";
    request.token = "0123456789";
    request.walltime_s = 61;
    auto submitted = sqsub.submit(request);
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "222166");
    EXPECT_EQ(runner.calls.at(0).at(2), "2m");
}

TEST_F(SqsubAdapter, SubmitsWithTheRenderedQueueOptionsAndTheTokenAsJobName) {
    runner.reply("sqsub", 0, "submitted as jobid 77\n");
    SubmitRequest request;
    request.script_path = "/runs/r/job.sh";
    request.run_dir = "/nonexistent-run-dir";
    request.token = "0123456789";
    request.submit_argv = {"sqsub",
                           "-q",
                           "gpu",
                           "-f",
                           "threaded",
                           "-n",
                           "4",
                           "--gpp=2",
                           "--mpp=8G",
                           "-r",
                           "60m",
                           "-j",
                           "lenet",
                           "-o",
                           "/runs/r/job.log",
                           "--idfile=/nonexistent-run-dir/jobid",
                           "--nompirun",
                           "/bin/bash",
                           "/runs/r/job.sh"};
    auto submitted = sqsub.submit(request);
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "77");
    const std::vector<std::string> expected{"sqsub",
                                            "-q",
                                            "gpu",
                                            "-f",
                                            "threaded",
                                            "-n",
                                            "4",
                                            "--gpp=2",
                                            "--mpp=8G",
                                            "-r",
                                            "60m",
                                            "-j",
                                            "dlj-0123456789",
                                            "-o",
                                            "/runs/r/job.log",
                                            "--idfile=/nonexistent-run-dir/jobid",
                                            "--nompirun",
                                            "/bin/bash",
                                            "/runs/r/job.sh"};
    EXPECT_EQ(runner.calls.at(0), expected);
}

TEST_F(SqsubAdapter, AddsTokenNameAndIdFileWhenTheRenderedCommandHasNone) {
    runner.reply("sqsub", 1, "", "sqsub: error: unrecognized option '--bogus'\n");
    SubmitRequest request;
    request.run_dir = "/nonexistent-run-dir";
    request.token = "0123456789";
    request.submit_argv = {"sqsub", "-r", "5m", "--bogus", "/bin/bash", "/x/job.sh"};
    auto submitted = sqsub.submit(request);
    ASSERT_FALSE(submitted);
    EXPECT_EQ(submitted.error().code, ErrorCode::scheduler_rejected);
    EXPECT_NE(submitted.error().message.find("--bogus"), std::string::npos);
    const std::vector<std::string> expected{"sqsub",
                                            "-r",
                                            "5m",
                                            "--bogus",
                                            "-j",
                                            "dlj-0123456789",
                                            "--idfile=/nonexistent-run-dir/sqsub.id",
                                            "/bin/bash",
                                            "/x/job.sh"};
    EXPECT_EQ(runner.calls.at(0), expected);
}

TEST_F(SqsubAdapter, TakesTheIdFromTheIdFileBeforeWhatSqsubPrinted) {
    const std::filesystem::path run_dir =
        std::filesystem::temp_directory_path() / ("dljob-sqsub-" + std::to_string(getpid()));
    std::filesystem::create_directories(run_dir);
    // sqsub writes the id file while it runs, and prints an unrelated number here.
    runner.on_run = [&](const ProcessRequest&) {
        std::ofstream(run_dir / "sqsub.id") << "31337\n";
    };
    runner.reply("sqsub", 0, "THIS IS NOT job 4242\n");
    SubmitRequest request;
    request.run_dir = run_dir.string();
    request.token = "0123456789";
    request.script_path = (run_dir / "job.sh").string();
    auto submitted = sqsub.submit(request);
    std::filesystem::remove_all(run_dir);
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "31337");
}

TEST_F(SqsubAdapter, AStaleIdFileIsNotTakenForThisSubmission) {
    const std::filesystem::path run_dir =
        std::filesystem::temp_directory_path() / ("dljob-sqsub-stale-" + std::to_string(getpid()));
    std::filesystem::create_directories(run_dir);
    std::ofstream(run_dir / "sqsub.id") << "1111\n"; // left by an earlier submission
    runner.reply("sqsub", 0, "", "warning: something odd\n");
    SubmitRequest request;
    request.run_dir = run_dir.string();
    request.token = "0123456789";
    auto submitted = sqsub.submit(request);
    std::filesystem::remove_all(run_dir);
    ASSERT_FALSE(submitted) << "took the id " << submitted->scheduler_id;
    EXPECT_EQ(submitted.error().code, ErrorCode::scheduler_unreachable);
    EXPECT_NE(submitted.error().message.find("sqsub printed no job id"), std::string::npos)
        << submitted.error().message;
}

TEST(SchedulerTable, NamesValidChoicesForUnknownFamily) {
    dljob::testing::FakeProcessRunner runner;
    for (const auto& family : scheduler_families()) {
        auto scheduler = make_scheduler(family, runner);
        ASSERT_TRUE(scheduler) << family;
        EXPECT_EQ((*scheduler)->family(), family);
    }
    auto unknown = make_scheduler("lsf", runner);
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::config_invalid);
    EXPECT_NE(unknown.error().hint.find("slurm"), std::string::npos);
}

} // namespace
} // namespace dljob::schedulers
