#pragma once
// SHARCNET's sqsub / sqjobs / sqkill. See sqsub.cpp for the states.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/scheduler.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace dljob::schedulers {

/// The id from "submitted as jobid 222166" (or LSF-style "Job <222166>"), ignoring other lines.
std::optional<std::string> parse_sqsub_id(std::string_view output);
/// jobid -> state letter from default `sqjobs` output: the state is the first field that is a
/// known state token (column positions differ between versions).
std::map<std::string, std::string> parse_sqjobs(std::string_view output);
SchedulerStatus map_sqsub_state(std::string_view letter);

class SqsubScheduler final : public Scheduler {
public:
    SqsubScheduler(ProcessRunner& runner, SchedulerOptions options)
        : m_runner(runner), m_options(std::move(options)) {}
    [[nodiscard]] std::string_view family() const override { return "sqsub"; }
    Result<Submission> submit(const SubmitRequest& request) override;
    Result<std::map<std::string, SchedulerStatus>> poll(const std::vector<JobRef>& jobs) override;
    Result<std::optional<Submission>> find_by_token(const JobRef& job) override;
    Result<void> cancel(const JobRef& job) override;

private:
    ProcessRunner& m_runner;
    SchedulerOptions m_options;
};

} // namespace dljob::schedulers
