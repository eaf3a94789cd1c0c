#pragma once
// The built-in `local` site: runs the job script on this machine, detached in its own session.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/scheduler.hpp>

#include <optional>
#include <string>

namespace dljob::schedulers {

/// What the local wrapper left in the run directory: its exit status, and whether its
/// walltime watchdog fired.
SchedulerStatus map_local_exit(int wrapper_exit, bool watchdog_fired);

class LocalScheduler final : public Scheduler {
public:
    LocalScheduler(ProcessRunner& runner, SchedulerOptions options)
        : m_runner(runner), m_options(std::move(options)) {}
    [[nodiscard]] std::string_view family() const override { return "local"; }
    Result<Submission> submit(const SubmitRequest& request) override;
    Result<std::map<std::string, SchedulerStatus>> poll(const std::vector<JobRef>& jobs) override;
    Result<std::optional<Submission>> find_by_token(const JobRef& job) override;
    Result<void> cancel(const JobRef& job) override;

    /// Files the wrapper writes into the run directory.
    static constexpr const char* exit_file = "local_exit";
    static constexpr const char* timeout_file = "local_timeout";
    static constexpr const char* log_file = "local.log"; // the wrapper's own output
    static constexpr const char* job_file = "local_job"; // pid= and token=, written first
    /// --after: present while the wrapper waits for the other job (PENDING); never_ran_file
    /// holds the other job's end when an afterok dependant was not run (CANCELLED).
    static constexpr const char* waiting_file = "local_waiting";
    static constexpr const char* never_ran_file = "local_never_ran";

private:
    ProcessRunner& m_runner;
    SchedulerOptions m_options;
};

} // namespace dljob::schedulers
