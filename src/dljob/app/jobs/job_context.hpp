#pragma once
// What the job verbs share: the job store, the process runner and a scheduler per family. The
// one place that wires the concrete adapters for submit/status/logs/cancel/show.

#include <dljob/domain/job.hpp>
#include <dljob/domain/job_store.hpp>
#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/scheduler.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dljob::app {

class JobContext {
public:
    /// The store at util::job_store_path() with the real process runner. The store is opened
    /// (and created) on first use, so a command refused before it records anything leaves no
    /// store file behind.
    static JobContext open();
    /// For tests: any store and runner.
    JobContext(std::unique_ptr<JobStore> store, std::unique_ptr<ProcessRunner> runner,
               SchedulerOptions options = {});

    /// Throws Failure when the store cannot be opened (its typed error, caught by the CLI).
    JobStore& store();
    ProcessRunner& runner() { return *m_runner; }
    /// The adapter for a scheduler family (cached).
    Result<Scheduler*> scheduler(const std::string& family);

    /// Finds a job by its dljob id (the number `dljob status` shows); not_found otherwise.
    Result<Job> find_job(const std::string& id);

    /// The latest attempt of `job`'s chain of continuations (`job` itself when it was never
    /// continued), followed through at most 10,000 attempts.
    Result<Job> latest_attempt(Job job);

private:
    using StoreOpener = std::function<Result<std::unique_ptr<JobStore>>()>;
    JobContext(StoreOpener open_store, std::unique_ptr<ProcessRunner> runner,
               SchedulerOptions options);

    StoreOpener m_open_store;
    std::unique_ptr<JobStore> m_store;
    std::unique_ptr<ProcessRunner> m_runner;
    SchedulerOptions m_options;
    std::map<std::string, std::unique_ptr<Scheduler>> m_schedulers;
};

/// The reference a scheduler needs to find a stored job again.
JobRef job_ref(const Job& job);

} // namespace dljob::app
