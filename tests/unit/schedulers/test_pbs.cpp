#include "fake_process_runner.hpp"
#include "fixture.hpp"

#include <dljob/schedulers/pbs.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dljob::schedulers {
namespace {

using dljob::testing::scheduler_output;

class PbsAdapter : public ::testing::Test {
protected:
    dljob::testing::FakeProcessRunner runner;
    PbsScheduler pbs{runner, SchedulerOptions{}};
};

TEST_F(PbsAdapter, ParsesQsubIdsSkippingBanners) {
    EXPECT_EQ(parse_qsub_id(scheduler_output("pbs-qsub-wrapper.txt")), "5");
    EXPECT_EQ(parse_qsub_id(scheduler_output("pbs-qsub-torque.txt")), "9086117.bw");
    EXPECT_FALSE(parse_qsub_id(scheduler_output("pbs-qsub-rejected.txt")).has_value());
    EXPECT_EQ(pbs_numeric_id("179.server.example.edu"), "179");
    EXPECT_EQ(parse_qsub_id("9086117[].bw\n"), "9086117[].bw"); // qsub -t: an array
}

TEST_F(PbsAdapter, SubmitNamesJobAfterTokenWithinTorqueLimit) {
    runner.reply("qsub", 0, "5\n");
    SubmitRequest request;
    request.script_path = "/runs/1/job.pbs";
    request.run_dir = "/runs/1";
    request.token = "0123456789";
    request.walltime_s = 3725;
    auto submitted = pbs.submit(request);
    ASSERT_TRUE(submitted);
    EXPECT_EQ(submitted->scheduler_id, "5");
    const auto& argv = runner.calls.at(0);
    EXPECT_EQ(argv.at(1), "-N");
    EXPECT_EQ(argv.at(2), "dlj-0123456789");
    EXPECT_LE(argv.at(2).size(), 15U);
    EXPECT_EQ(argv.at(4), "walltime=01:02:05");
    EXPECT_EQ(runner.requests.at(0).cwd, "/runs/1");
}

TEST_F(PbsAdapter, ASweepIsSubmittedAsOneThrottledArray) {
    runner.reply("qsub", 0, "9086117[].bw\n");
    SubmitRequest request;
    request.script_path = "/runs/1/array.sh";
    request.token = "0123456789";
    request.array = ArraySpec{3, 2};
    auto submitted = pbs.submit(request);
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "9086117[].bw");
    const auto& argv = runner.calls.at(0);
    ASSERT_GE(argv.size(), 3U);
    EXPECT_EQ(argv.at(argv.size() - 3), "-t");
    EXPECT_EQ(argv.at(argv.size() - 2), "0-2%2");
}

TEST_F(PbsAdapter, PollFindsAnArrayTaskByItsTorqueId) {
    runner.reply("qstat", 0, "Job Id: 9086117[1].bw\n    job_state = R\n");
    auto polled = pbs.poll({{"9086117[1].bw", "", "", ""}});
    ASSERT_TRUE(polled) << polled.error().message;
    EXPECT_EQ(polled->at("9086117[1].bw").state, JobState::running);
}

TEST_F(PbsAdapter, RejectedQsubShowsSbatchReasonFromWrapperBanner) {
    runner.reply("qsub", 1, scheduler_output("pbs-qsub-rejected.txt"));
    auto submitted = pbs.submit(SubmitRequest{});
    ASSERT_FALSE(submitted);
    EXPECT_EQ(submitted.error().code, ErrorCode::scheduler_rejected);
    EXPECT_NE(submitted.error().message.find("Invalid partition name"), std::string::npos);
}

TEST_F(PbsAdapter, MapsTorqueExitStatuses) {
    auto records = parse_qstat_f(scheduler_output("pbs-qstat-f-torque.txt"));
    ASSERT_EQ(records.size(), 6U);
    EXPECT_EQ(records[0].id, "179.server.example.edu");
    EXPECT_EQ(map_pbs_state(records[0]).state, JobState::completed);
    EXPECT_EQ(map_pbs_state(records[1]).state, JobState::timeout);   // -11
    EXPECT_EQ(map_pbs_state(records[2]).state, JobState::cancelled); // 271
    auto failed = map_pbs_state(records[3]);
    EXPECT_EQ(failed.state, JobState::failed);
    EXPECT_EQ(failed.exit_code, 2);
    EXPECT_EQ(map_pbs_state(records[4]).state, JobState::pending);
    EXPECT_EQ(records[4].attributes.at("Output_Path"),
              "login1:/N/u/user/runs/183/a-very-long-path-that-torque-wraps-onto-a-continuation-"
              "line/job.log");
    EXPECT_EQ(map_pbs_state(records[5]).reason, "held");
}

TEST_F(PbsAdapter, WrapperCompletedJobWithoutExitStatusIsLeftToTheExitCodeFile) {
    auto records = parse_qstat_f(scheduler_output("pbs-qstat-f-wrapper-completed.txt"));
    ASSERT_EQ(records.size(), 1U);
    auto status = map_pbs_state(records[0]);
    EXPECT_EQ(status.state, JobState::unknown); // never assumed COMPLETED
    EXPECT_EQ(status.native_state, "C");
    EXPECT_EQ(reconcile(status, 3).state, JobState::failed);
}

TEST_F(PbsAdapter, PollMatchesByNumericIdAndToleratesUnknownIds) {
    runner.reply("qstat", 153, scheduler_output("pbs-qstat-f-torque.txt"));
    auto polled = pbs.poll({{"179.server", "", "", ""}, {"999.server", "", "", ""}});
    ASSERT_TRUE(polled) << polled.error().message;
    EXPECT_EQ(polled->size(), 1U);
    EXPECT_EQ(polled->at("179.server").state, JobState::completed);
    EXPECT_EQ(runner.calls.size(), 1U);
}

TEST_F(PbsAdapter, FindsJobByTokenName) {
    runner.reply("qstat", 0, scheduler_output("pbs-qstat-f-wrapper-running.txt"));
    auto found = pbs.find_by_token({"", "", "", "0123456789"});
    ASSERT_TRUE(found && found->has_value());
    EXPECT_EQ((*found)->scheduler_id, "5");
}

// qstat no longer lists the ended job (keep_completed): the run directory's job_identity, with
// this job's token, names it; another token's identity (an earlier attempt) does not.
TEST_F(PbsAdapter, FindsAJobQstatForgotByItsIdentity) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("dljob-pbs-identity-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "job_identity") << "token=0123456789\nscheduler=pbs\njob_id=77.server\n";
    runner.reply("qstat", 0, "");
    auto found = pbs.find_by_token({"", "", dir.string(), "0123456789"});
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->scheduler_id, "77.server");
    runner.reply("qstat", 0, "");
    found = pbs.find_by_token({"", "", dir.string(), "9999999999"});
    ASSERT_TRUE(found);
    EXPECT_FALSE(found->has_value());
    std::filesystem::remove_all(dir);
}

} // namespace
} // namespace dljob::schedulers
