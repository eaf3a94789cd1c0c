#pragma once
// Spark on YARN (spark-submit, yarn application -list / -kill) or on a standalone master (the
// driver in client mode, run by the local runner). See spark.cpp for the states, the settings a
// site profile gives (`scheduler_options:`) and how the ranks start.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/scheduler.hpp>
#include <dljob/schedulers/local.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// One application as `yarn application -list` or `-status` reports it.
struct YarnApplication {
    std::string id; // application_<cluster start ms>_<sequence>
    std::string name;
    std::string state;       // NEW ... RUNNING, FINISHED, FAILED, KILLED
    std::string final_state; // UNDEFINED, SUCCEEDED, FAILED, KILLED, ENDED
    std::string diagnostics; // -status only
};

/// The application id spark-submit logged ("Submitted application application_..._0007");
/// nullopt when it logged none (refused before YARN gave one).
std::optional<std::string> parse_spark_submit_id(std::string_view output);
/// The rows of `yarn application -list -appStates ALL`: tab-separated, padded, never cut, so
/// split on tabs and trimmed, not read by column position.
std::vector<YarnApplication> parse_yarn_list(std::string_view output);
/// `yarn application -status ID`, read by key ("State : RUNNING"); nullopt without a State.
std::optional<YarnApplication> parse_yarn_status(std::string_view output);
/// YARN's state and final status onto dljob's (the table in spark.cpp).
SchedulerStatus map_yarn_state(const YarnApplication& application);

class SparkScheduler final : public Scheduler {
public:
    SparkScheduler(ProcessRunner& runner, SchedulerOptions options)
        : m_runner(runner), m_options(options), m_client_mode(runner, std::move(options)) {}
    [[nodiscard]] std::string_view family() const override { return "spark"; }
    Result<Submission> submit(const SubmitRequest& request) override;
    [[nodiscard]] std::vector<std::string>
    submit_command_line(const SubmitRequest& request) const override;
    Result<std::map<std::string, SchedulerStatus>> poll(const std::vector<JobRef>& jobs) override;
    Result<std::optional<Submission>> find_by_token(const JobRef& job) override;
    Result<void> cancel(const JobRef& job) override;

private:
    Result<std::vector<YarnApplication>> list_applications();
    ProcessRunner& m_runner;
    SchedulerOptions m_options;
    // A standalone master's jobs: the script (and the client-mode driver it becomes) runs here.
    LocalScheduler m_client_mode;
};

} // namespace dljob::schedulers
