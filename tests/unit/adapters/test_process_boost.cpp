#include <dljob/adapters/process_boost.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

namespace dljob::adapters {
namespace {

ProcessRequest command(std::vector<std::string> argv) {
    ProcessRequest request;
    request.argv = std::move(argv);
    return request;
}

class BoostProcess : public ::testing::Test {
protected:
    BoostProcessRunner runner;
};

TEST_F(BoostProcess, CapturesStdoutStderrAndExitCode) {
    auto result = runner.run(command({"sh", "-c", "echo out; echo err >&2; exit 3"}));
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(result->exit_code, 3);
    EXPECT_EQ(result->out, "out\n");
    EXPECT_EQ(result->err, "err\n");
    EXPECT_FALSE(result->timed_out);
}

TEST_F(BoostProcess, PassesArgumentsWithoutAShell) {
    auto result = runner.run(command({"printf", "%s|", "a b", "$HOME", ";rm"}));
    ASSERT_TRUE(result);
    EXPECT_EQ(result->out, "a b|$HOME|;rm|");
}

TEST_F(BoostProcess, FeedsStdinAndSetsEnvironmentAndDirectory) {
    ProcessRequest request{{"sh", "-c", "cat; echo \" $DLJOB_TEST_VAR $(pwd)\""},
                           {{"DLJOB_TEST_VAR", "value"}},
                           "/tmp",
                           "input",
                           std::chrono::seconds(10)};
    auto result = runner.run(request);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->out, "input value /tmp\n");
}

TEST_F(BoostProcess, KillsTheWholeGroupOnTimeout) {
    const auto marker =
        std::filesystem::temp_directory_path() / ("dljob-proc-" + std::to_string(::getpid()));
    std::filesystem::remove(marker);
    ProcessRequest request;
    // The grandchild would create the marker after 2 s if it survived the group kill.
    request.argv = {"sh", "-c", "(sleep 2; touch " + marker.string() + ") & sleep 30"};
    request.timeout = std::chrono::milliseconds(300);
    auto result = runner.run(request);
    ASSERT_TRUE(result);
    EXPECT_TRUE(result->timed_out);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(BoostProcess, MissingProgramIsSchedulerUnreachable) {
    auto result = runner.run(command({"dljob-no-such-program"}));
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::scheduler_unreachable);
    EXPECT_NE(result.error().message.find("dljob-no-such-program"), std::string::npos);
}

TEST_F(BoostProcess, AnEmptyCommandLineIsAnErrorForBothWaysOfRunning) {
    auto ran = runner.run(command({}));
    ASSERT_FALSE(ran);
    EXPECT_EQ(ran.error().code, ErrorCode::internal);
    auto spawned = runner.spawn_detached(DetachedRequest{});
    ASSERT_FALSE(spawned);
    EXPECT_EQ(spawned.error().code, ErrorCode::internal);
    EXPECT_EQ(spawned.error().message, "empty command line");
}

TEST_F(BoostProcess, DetachedProcessRunsInItsOwnSessionAndCanBeKilled) {
    const auto log = std::filesystem::temp_directory_path() /
                     ("dljob-detached-" + std::to_string(::getpid()) + ".log");
    DetachedRequest request{
        {"sh", "-c", "echo started; ps -o sid= -p $$; sleep 30"}, {}, "/tmp", log.string()};
    auto pid = runner.spawn_detached(request);
    ASSERT_TRUE(pid) << pid.error().message;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_TRUE(runner.group_alive(*pid));
    std::ifstream in(log);
    std::string first;
    std::string sid;
    in >> first >> sid;
    EXPECT_EQ(first, "started");
    EXPECT_EQ(sid, std::to_string(*pid)); // session leader: its pid is the session id
    EXPECT_TRUE(runner.signal_group(*pid, SIGKILL));
    for (int i = 0; i < 50 && runner.group_alive(*pid); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_FALSE(runner.group_alive(*pid));
    std::filesystem::remove(log);
}

} // namespace
} // namespace dljob::adapters
