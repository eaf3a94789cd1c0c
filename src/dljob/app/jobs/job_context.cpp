#include <dljob/adapters/process_boost.hpp>
#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/app/jobs/job_context.hpp>
#include <dljob/domain/error.hpp>
#include <dljob/schedulers/scheduler_table.hpp>
#include <dljob/util/paths.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

namespace dljob::app {
namespace {

SchedulerOptions options_from_environment() {
    SchedulerOptions options;
    // DLJOB_COMMAND_TIMEOUT (seconds): how long one scheduler command may take.
    if (const char* text = std::getenv("DLJOB_COMMAND_TIMEOUT")) { // NOLINT(concurrency-mt-unsafe)
        int seconds = 0;
        const std::string_view view(text);
        auto [ptr, ec] = std::from_chars(view.data(), view.data() + view.size(), seconds);
        if (ec == std::errc() && seconds > 0) {
            options.command_timeout = std::chrono::seconds(seconds);
        }
    }
    return options;
}

} // namespace

JobContext JobContext::open() {
    return JobContext(
        []() -> Result<std::unique_ptr<JobStore>> {
            auto store = adapters::SqliteJobStore::open(util::job_store_path());
            if (!store) {
                return fail(store.error());
            }
            return std::unique_ptr<JobStore>(std::move(store.value()));
        },
        std::make_unique<adapters::BoostProcessRunner>(), options_from_environment());
}

JobContext::JobContext(std::unique_ptr<JobStore> store, std::unique_ptr<ProcessRunner> runner,
                       SchedulerOptions options)
    : m_store(std::move(store)), m_runner(std::move(runner)), m_options(std::move(options)) {}

JobContext::JobContext(StoreOpener open_store, std::unique_ptr<ProcessRunner> runner,
                       SchedulerOptions options)
    : m_open_store(std::move(open_store)), m_runner(std::move(runner)),
      m_options(std::move(options)) {}

JobStore& JobContext::store() {
    if (!m_store) {
        auto opened = m_open_store();
        if (!opened) {
            throw Failure(opened.error());
        }
        m_store = std::move(opened.value());
    }
    return *m_store;
}

Result<Scheduler*> JobContext::scheduler(const std::string& family) {
    auto it = m_schedulers.find(family);
    if (it != m_schedulers.end()) {
        return it->second.get();
    }
    auto made = schedulers::make_scheduler(family, *m_runner, m_options);
    if (!made) {
        return fail(made.error());
    }
    Scheduler* raw = made->get();
    m_schedulers.emplace(family, std::move(made.value()));
    return raw;
}

Result<Job> JobContext::find_job(const std::string& id) {
    std::int64_t number = 0;
    auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), number);
    if (ec != std::errc() || ptr != id.data() + id.size()) {
        return fail(ErrorCode::usage, fmt::format("'{}' is not a job id", id),
                    "use the number in the first column of 'dljob status --all'");
    }
    auto job = store().find(number);
    if (!job) {
        return fail(job.error());
    }
    if (!job->has_value()) {
        return fail(ErrorCode::not_found, fmt::format("no job {} in the job store", id),
                    "'dljob status --all' lists every job");
    }
    return **job;
}

JobRef job_ref(const Job& job) {
    return JobRef{job.scheduler_id, job.secondary_id, job.run_dir, job.token};
}

Result<Job> JobContext::latest_attempt(Job job) {
    for (int hops = 0; hops < 10000; ++hops) {
        auto next = store().continuation_of(job.id);
        if (!next) {
            return fail(next.error());
        }
        if (!next->has_value()) {
            break;
        }
        job = **next;
    }
    return job;
}

} // namespace dljob::app
