#include <dljob/domain/job_state.hpp>

#include <gtest/gtest.h>

namespace dljob {
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

TEST(JobStateReconcile, MissingEverywhereIsUnknownNeverCompleted) {
    auto status = reconcile(std::nullopt, std::nullopt);
    EXPECT_EQ(status.state, JobState::unknown);
}

TEST(JobStateReconcile, ExitCodeFileWinsOverScheduler) {
    SchedulerStatus running = make_status(JobState::running, "RUNNING", "None", std::nullopt);
    EXPECT_EQ(reconcile(running, 0).state, JobState::completed);
    auto failed = reconcile(running, 7);
    EXPECT_EQ(failed.state, JobState::failed);
    EXPECT_EQ(failed.exit_code, 7);
    EXPECT_EQ(failed.native_state, "RUNNING");
    // Found only through the file: still a definite outcome.
    EXPECT_EQ(reconcile(std::nullopt, 0).state, JobState::completed);
    EXPECT_EQ(reconcile(std::nullopt, 2).state, JobState::failed);
}

TEST(JobStateReconcile, TimeoutAndCancelSurviveANonZeroExitFile) {
    SchedulerStatus timeout = make_status(JobState::timeout, "TIMEOUT", "TimeLimit", std::nullopt);
    auto status = reconcile(timeout, 143);
    EXPECT_EQ(status.state, JobState::timeout);
    EXPECT_EQ(status.exit_code, 143);
    EXPECT_EQ(reconcile(make_status(JobState::cancelled, "CANCELLED", "", {}), 143).state,
              JobState::cancelled);
}

TEST(JobStateReconcile, WalltimeExitCodesAreTimeout) {
    auto failed_by_scheduler = make_status(JobState::failed, "FAILED", "NonZeroExitCode", 140);
    EXPECT_EQ(reconcile(failed_by_scheduler, 140).state, JobState::timeout);
    auto resumed = reconcile(std::nullopt, 75);
    EXPECT_EQ(resumed.state, JobState::timeout);
    EXPECT_EQ(resumed.reason, "checkpointed before the walltime");
    EXPECT_EQ(reconcile(std::nullopt, 139).state, JobState::failed); // SIGSEGV is a failure
}

// On NFS the exit-code file can show up late; the scheduler's exit status of a FAILED job is
// the script's, so 75 from sacct alone already means "checkpointed, continue me".
TEST(JobStateReconcile, TheSchedulersExitStatusStandsInForAFileNotYetVisible) {
    auto exited_75 =
        reconcile(make_status(JobState::failed, "FAILED", "NonZeroExitCode", 75), std::nullopt);
    EXPECT_EQ(exited_75.state, JobState::timeout);
    EXPECT_EQ(exited_75.reason, "checkpointed before the walltime");
    EXPECT_EQ(exited_75.exit_code, 75);
    EXPECT_EQ(exited_75.native_state, "FAILED");
    auto exited_3 =
        reconcile(make_status(JobState::failed, "FAILED", "NonZeroExitCode", 3), std::nullopt);
    EXPECT_EQ(exited_3.state, JobState::failed);
    EXPECT_EQ(exited_3.exit_code, 3);
    // A cancelled job keeps its state whatever it exited with.
    EXPECT_EQ(reconcile(make_status(JobState::cancelled, "CANCELLED", "", 75), std::nullopt).state,
              JobState::cancelled);
}

TEST(JobStateReconcile, WithoutFileTheSchedulerDecides) {
    SchedulerStatus pending = make_status(JobState::pending, "PENDING", "Priority", std::nullopt);
    EXPECT_EQ(reconcile(pending, std::nullopt).reason, "Priority");
}

TEST(JobStateNames, RoundTrip) {
    for (auto state : {JobState::pending, JobState::running, JobState::completed, JobState::failed,
                       JobState::cancelled, JobState::timeout, JobState::unknown}) {
        EXPECT_EQ(parse_job_state(to_string(state)), state);
    }
    EXPECT_FALSE(parse_job_state("running").has_value());
    EXPECT_TRUE(is_terminal(JobState::timeout));
    EXPECT_FALSE(is_terminal(JobState::unknown));
}

} // namespace
} // namespace dljob
