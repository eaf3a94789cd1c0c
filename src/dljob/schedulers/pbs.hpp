#pragma once
// PBS/Torque: qsub, qstat -f, qdel (also Slurm's Torque wrappers). See pbs.cpp for the states.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/scheduler.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// One `qstat -f` record: its id and `key = value` attributes (continuations joined).
struct PbsRecord {
    std::string id; // as printed, e.g. "179.server" or "5"
    std::map<std::string, std::string> attributes;
};

/// The id from qsub's output ("9086117.bw", or a bare "5" from the wrappers), skipping any
/// other lines such as site banners.
std::optional<std::string> parse_qsub_id(std::string_view output);
/// Records of `qstat -f` (Torque's "Job Id: 5.server" and the wrappers' "Job Id:\t5").
std::vector<PbsRecord> parse_qstat_f(std::string_view output);
/// The numeric part of a Torque id ("179.server" -> "179"): qstat's columns truncate ids.
std::string pbs_numeric_id(std::string_view id);
/// Task `index` of the array qsub answered `array_id` for ("123[].server" -> "123[4].server",
/// the wrappers' "123" -> "123[4]").
std::string pbs_array_task_id(const std::string& array_id, int index);
/// The whole array of a task ("123[4].server" -> "123[].server"); `task_id` if it is none.
std::string pbs_array_of(const std::string& task_id);
/// Maps job_state (and exit_status, when Torque gives it) onto dljob's states.
SchedulerStatus map_pbs_state(const PbsRecord& record);

class PbsScheduler final : public Scheduler {
public:
    PbsScheduler(ProcessRunner& runner, SchedulerOptions options)
        : m_runner(runner), m_options(std::move(options)) {}
    [[nodiscard]] std::string_view family() const override { return "pbs"; }
    Result<Submission> submit(const SubmitRequest& request) override;
    [[nodiscard]] std::vector<std::string>
    submit_command_line(const SubmitRequest& request) const override;
    Result<std::map<std::string, SchedulerStatus>> poll(const std::vector<JobRef>& jobs) override;
    Result<std::optional<Submission>> find_by_token(const JobRef& job) override;
    Result<void> cancel(const JobRef& job) override;

private:
    Result<std::vector<PbsRecord>> qstat(const std::vector<std::string>& ids);
    ProcessRunner& m_runner;
    SchedulerOptions m_options;
};

} // namespace dljob::schedulers
