#include "fake_process_runner.hpp"
#include "fixture.hpp"

#include <dljob/schedulers/slurm.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace dljob::schedulers {
namespace {

using dljob::testing::scheduler_output;

class SlurmAdapter : public ::testing::Test {
protected:
    dljob::testing::FakeProcessRunner runner;
    SlurmScheduler slurm{runner, SchedulerOptions{}};

    static SubmitRequest request() {
        SubmitRequest r;
        r.script_path = "/runs/1/job.sh";
        r.run_dir = "/runs/1";
        r.name = "lenet";
        r.token = "0123456789";
        r.walltime_s = 90;
        return r;
    }
};

TEST_F(SlurmAdapter, ParsesSbatchIdInEveryForm) {
    EXPECT_EQ(parse_sbatch_id(scheduler_output("slurm-sbatch-parsable.txt")), "2");
    EXPECT_EQ(parse_sbatch_id(scheduler_output("slurm-sbatch-plain.txt")), "4");
    EXPECT_EQ(parse_sbatch_id(scheduler_output("slurm-sbatch-parsable-cluster.txt")), "42");
    EXPECT_EQ(parse_sbatch_id("sbatch: warning: something\n17\n"), "17");
    EXPECT_FALSE(parse_sbatch_id("sbatch: error: nope\n").has_value());
}

TEST_F(SlurmAdapter, SubmitPutsTokenInCommentAndRoundsWalltimeUp) {
    runner.reply("sbatch", 0, "77\n");
    auto submitted = slurm.submit(request());
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "77");
    const auto& argv = runner.calls.at(0);
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--comment=dljob:0123456789"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--time=2"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--parsable"), argv.end());
    EXPECT_EQ(argv.back(), "/runs/1/job.sh");
}

TEST_F(SlurmAdapter, ASweepIsSubmittedAsOneThrottledArray) {
    runner.reply("sbatch", 0, "78\n");
    SubmitRequest r = request();
    r.array = ArraySpec{3, 2};
    auto submitted = slurm.submit(r);
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "78");
    const auto& argv = runner.calls.at(0);
    ASSERT_GE(argv.size(), 2U);
    EXPECT_EQ(argv.at(argv.size() - 2), "--array=0-2%2");
    EXPECT_EQ(argv.back(), "/runs/1/job.sh");
}

// squeue folds an array's pending tasks into one line ("78_[1-2%2]") unless asked -r: each
// point must find its own task, pending or running.
TEST_F(SlurmAdapter, PollSeesEveryTaskOfAnArray) {
    runner.reply("squeue", 0,
                 "78_0|RUNNING|None|dljob:a\n78_1|RUNNING|None|dljob:a\n"
                 "78_2|PENDING|JobArrayTaskLimit|dljob:a\n");
    auto polled = slurm.poll({{"78_0", "", "", ""}, {"78_1", "", "", ""}, {"78_2", "", "", ""}});
    ASSERT_TRUE(polled) << polled.error().message;
    const auto& squeue = runner.calls.at(0);
    EXPECT_NE(std::find(squeue.begin(), squeue.end(), "-r"), squeue.end());
    EXPECT_EQ(polled->at("78_0").state, JobState::running);
    EXPECT_EQ(polled->at("78_2").state, JobState::pending);
    EXPECT_EQ(polled->at("78_2").reason, "JobArrayTaskLimit");
}

// A task squeue forgot is found in sacct by its JobID (78_2); its JobIDRaw is its own number.
TEST_F(SlurmAdapter, SacctNamesAnArrayTaskByItsJobId) {
    runner.reply("squeue", 0, "");
    runner.reply("sacct", 0, "80|COMPLETED|0:0|None|78_2\n81|FAILED|3:0|None|81\n");
    auto polled = slurm.poll({{"78_2", "", "", ""}, {"81", "", "", ""}});
    ASSERT_TRUE(polled) << polled.error().message;
    EXPECT_EQ(polled->at("78_2").state, JobState::completed);
    EXPECT_EQ(polled->at("81").state, JobState::failed);
    EXPECT_EQ(runner.calls.at(1).back(), "78_2,81");
}

TEST_F(SlurmAdapter, RejectedSubmitCarriesSbatchMessage) {
    runner.reply("sbatch", 1, "",
                 "sbatch: error: invalid partition specified: nosuch\n"
                 "sbatch: error: Batch job submission failed: Invalid partition name specified\n");
    auto submitted = slurm.submit(request());
    ASSERT_FALSE(submitted);
    EXPECT_EQ(submitted.error().code, ErrorCode::scheduler_rejected);
    EXPECT_NE(submitted.error().message.find("invalid partition"), std::string::npos);
}

TEST_F(SlurmAdapter, TransientSubmitErrorIsUnreachableNotRejected) {
    runner.reply("sbatch", 1, "",
                 "sbatch: error: Batch job submission failed: Socket timed out on send/recv "
                 "operation\n");
    auto submitted = slurm.submit(request());
    ASSERT_FALSE(submitted);
    EXPECT_EQ(submitted.error().code, ErrorCode::scheduler_unreachable);
}

TEST_F(SlurmAdapter, ASbatchThatPrintsNoIdIsUnreachableAndSaysWhatItPrinted) {
    // Exit 0 without an id: the job may exist, so it is not "rejected"; status finds it later.
    runner.reply("sbatch", 0, "Submitted to the void\n");
    auto submitted = slurm.submit(request());
    ASSERT_FALSE(submitted);
    EXPECT_EQ(submitted.error().code, ErrorCode::scheduler_unreachable);
    EXPECT_NE(submitted.error().message.find("sbatch printed no job id: 'Submitted to the void'"),
              std::string::npos)
        << submitted.error().message;
    EXPECT_NE(submitted.error().hint.find("token"), std::string::npos);
}

TEST_F(SlurmAdapter, HungSbatchIsATimeout) {
    runner.reply_timeout("sbatch");
    auto submitted = slurm.submit(request());
    ASSERT_FALSE(submitted);
    EXPECT_EQ(submitted.error().code, ErrorCode::timeout);
}

TEST_F(SlurmAdapter, PollMapsRecordedSqueueWithOneQuery) {
    runner.reply("squeue", 0, scheduler_output("slurm-squeue-all.txt"));
    auto polled =
        slurm.poll({{"1", "", "", ""}, {"2", "", "", ""}, {"4", "", "", ""}, {"3", "", "", ""}});
    ASSERT_TRUE(polled) << polled.error().message;
    EXPECT_EQ(runner.calls.size(), 1U); // all found: no sacct
    EXPECT_EQ(polled->at("1").state, JobState::completed);
    EXPECT_EQ(polled->at("2").state, JobState::failed);
    EXPECT_EQ(polled->at("2").reason, "NonZeroExitCode");
    EXPECT_EQ(polled->at("4").state, JobState::cancelled);
    EXPECT_EQ(polled->at("3").state, JobState::running);
    EXPECT_EQ(polled->at("3").native_state, "RUNNING");
}

TEST_F(SlurmAdapter, MissingJobsAskSacctAndSurviveItsAbsence) {
    runner.reply("squeue", 0, "");
    runner.reply("sacct", 1, "", scheduler_output("slurm-sacct-disabled.txt"));
    auto polled = slurm.poll({{"99", "", "", ""}});
    ASSERT_TRUE(polled);
    EXPECT_TRUE(polled->empty()); // missing, not COMPLETED
    ASSERT_EQ(runner.calls.size(), 2U);
    const auto& sacct = runner.calls.at(1);
    EXPECT_EQ(sacct.back(), "99");
    EXPECT_NE(std::find_if(sacct.begin(), sacct.end(),
                           [](const std::string& a) { return a.rfind("--starttime", 0) == 0; }),
              sacct.end());
}

TEST_F(SlurmAdapter, ParsesSacctStatesAndExitCodes) {
    auto rows = parse_sacct(scheduler_output("slurm-sacct.txt"));
    ASSERT_EQ(rows.size(), 5U); // the 7.batch step is skipped
    EXPECT_EQ(map_slurm_state(rows[0]).state, JobState::completed);
    EXPECT_EQ(map_slurm_state(rows[1]).state, JobState::cancelled); // "CANCELLED by 0"
    EXPECT_EQ(map_slurm_state(rows[2]).state, JobState::timeout);
    auto failed = map_slurm_state(rows[3]);
    EXPECT_EQ(failed.state, JobState::failed);
    EXPECT_EQ(failed.exit_code, 3);
    EXPECT_EQ(map_slurm_state(rows[4]).state, JobState::failed); // OUT_OF_MEMORY
}

TEST_F(SlurmAdapter, UnknownNativeStateIsUnknown) {
    SlurmRow row;
    row.id = "1";
    row.state = "SOMETHING_NEW";
    EXPECT_EQ(map_slurm_state(row).state, JobState::unknown);
    EXPECT_EQ(map_slurm_state(row).native_state, "SOMETHING_NEW");
}

TEST_F(SlurmAdapter, FindsATimedOutSubmitByItsToken) {
    runner.reply("squeue", 0, scheduler_output("slurm-squeue-all.txt"));
    auto found = slurm.find_by_token({"", "", "", "abc"});
    ASSERT_TRUE(found);
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->scheduler_id, "1");
    runner.reply("squeue", 0, scheduler_output("slurm-squeue-all.txt"));
    EXPECT_FALSE(slurm.find_by_token({"", "", "", "zzz"})->has_value());
}

// A submit killed after sbatch but before its id was recorded, looked for once squeue has
// forgotten the ended job (MinJobAge): the run directory's job_identity, written by the job
// with its token, names it. An earlier attempt's identity there (another token) does not.
TEST_F(SlurmAdapter, FindsAnInterruptedSubmitSqueueForgotByItsIdentity) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("dljob-slurm-identity-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "job_identity")
        << "token=0123456789\nscheduler=slurm\njob_id=4711\nhost=n1\nstarted=1\npid=9\n";
    runner.reply("squeue", 0, scheduler_output("slurm-squeue-all.txt"));
    auto found = slurm.find_by_token({"", "", dir.string(), "0123456789"});
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(found->has_value());
    EXPECT_EQ((*found)->scheduler_id, "4711");
    runner.reply("squeue", 0, scheduler_output("slurm-squeue-all.txt"));
    found = slurm.find_by_token({"", "", dir.string(), "9876543210"});
    ASSERT_TRUE(found);
    EXPECT_FALSE(found->has_value());
    std::filesystem::remove_all(dir);
}

TEST_F(SlurmAdapter, CancelRunsScancel) {
    runner.reply("scancel", 0, "");
    ASSERT_TRUE(slurm.cancel({"12", "", "", ""}));
    EXPECT_EQ(runner.calls.at(0), (std::vector<std::string>{"scancel", "12"}));
}

} // namespace
} // namespace dljob::schedulers
