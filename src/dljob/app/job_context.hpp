#pragma once
// What the job verbs share: the job store, the process runner and a scheduler per family. The
// one place that wires the concrete adapters for submit/status/logs/cancel/show.

#include <dljob/domain/job.hpp>
#include <dljob/domain/job_store.hpp>
#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/scheduler.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dljob::app {

class JobContext {
public:
    /// Opens the store at util::job_store_path() with the real process runner.
    static Result<JobContext> open();
    /// For tests: any store and runner.
    JobContext(std::unique_ptr<JobStore> store, std::unique_ptr<ProcessRunner> runner,
               SchedulerOptions options = {});

    JobStore& store() { return *m_store; }
    ProcessRunner& runner() { return *m_runner; }
    /// The adapter for a scheduler family (cached).
    Result<Scheduler*> scheduler(const std::string& family);

    /// Finds a job by its dljob id (the number `dljob status` shows); not_found otherwise.
    Result<Job> find_job(const std::string& id);

private:
    std::unique_ptr<JobStore> m_store;
    std::unique_ptr<ProcessRunner> m_runner;
    SchedulerOptions m_options;
    std::map<std::string, std::unique_ptr<Scheduler>> m_schedulers;
};

/// The reference a scheduler needs to find a stored job again.
JobRef job_ref(const Job& job);

} // namespace dljob::app
