#pragma once
// Slurm: sbatch, squeue/sacct, scancel. See slurm.cpp for the state table and quirks.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/scheduler.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// One job as `squeue -o '%i|%T|%r|%k'` or `sacct -P -o JobIDRaw,State,ExitCode,Reason` shows it.
struct SlurmRow {
    std::string id;
    std::string state;
    std::string reason;
    std::string comment;
    std::optional<int> exit_code;
};

/// The job id from `sbatch --parsable` ("42" or "42;cluster") or plain sbatch
/// ("Submitted batch job 42"), ignoring any other lines.
std::optional<std::string> parse_sbatch_id(std::string_view output);
/// Rows of `squeue -h -o '%i|%T|%r|%k'`; malformed lines are skipped.
std::vector<SlurmRow> parse_squeue(std::string_view output);
/// Rows of `sacct -X -P -n -o JobIDRaw,State,ExitCode,Reason`; "CANCELLED by 0" keeps CANCELLED.
std::vector<SlurmRow> parse_sacct(std::string_view output);
/// Maps a native Slurm state (long name) onto dljob's states.
SchedulerStatus map_slurm_state(const SlurmRow& row);

class SlurmScheduler final : public Scheduler {
public:
    SlurmScheduler(ProcessRunner& runner, SchedulerOptions options)
        : m_runner(runner), m_options(std::move(options)) {}
    [[nodiscard]] std::string_view family() const override { return "slurm"; }
    Result<Submission> submit(const SubmitRequest& request) override;
    [[nodiscard]] std::vector<std::string>
    submit_command_line(const SubmitRequest& request) const override;
    Result<std::map<std::string, SchedulerStatus>> poll(const std::vector<JobRef>& jobs) override;
    Result<std::optional<Submission>> find_by_token(const JobRef& job) override;
    Result<void> cancel(const JobRef& job) override;

private:
    ProcessRunner& m_runner;
    SchedulerOptions m_options;
};

} // namespace dljob::schedulers
