#pragma once
// Moab on Torque: msub, showq --xml, canceljob. See moab.cpp for the states and the two ids.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/scheduler.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// One `<job .../>` element of `showq --xml`, with the option of the queue it was listed in
/// (active, eligible, blocked, completed).
struct MoabJob {
    std::string queue;
    std::map<std::string, std::string> attributes;
};

/// The Moab id msub prints (after a blank line; "881196" or "Moab.123"), or from --xml output.
std::optional<std::string> parse_msub_id(std::string_view output);
/// The jobs of `showq --xml` / `showq -c --xml`.
std::vector<MoabJob> parse_showq_xml(std::string_view output);
/// Maps a listed job onto dljob's states; DRMJID (the Torque id) becomes secondary_id.
SchedulerStatus map_moab_state(const MoabJob& job);

class MoabScheduler final : public Scheduler {
public:
    MoabScheduler(ProcessRunner& runner, SchedulerOptions options)
        : m_runner(runner), m_options(std::move(options)) {}
    [[nodiscard]] std::string_view family() const override { return "moab"; }
    Result<Submission> submit(const SubmitRequest& request) override;
    [[nodiscard]] std::vector<std::string>
    submit_command_line(const SubmitRequest& request) const override;
    Result<std::map<std::string, SchedulerStatus>> poll(const std::vector<JobRef>& jobs) override;
    Result<std::optional<Submission>> find_by_token(const JobRef& job) override;
    Result<void> cancel(const JobRef& job) override;

private:
    Result<std::vector<MoabJob>> showq(bool completed);
    ProcessRunner& m_runner;
    SchedulerOptions m_options;
};

} // namespace dljob::schedulers
