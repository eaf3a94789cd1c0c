#pragma once
// Where jobs live between dljob invocations. The SQLite adapter implements it; tests may too.
// Every write is one short transaction; none is held open while a scheduler command runs.

#include <dljob/domain/job.hpp>
#include <dljob/domain/result.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dljob {

/// Which jobs to list.
struct JobQuery {
    bool active_only = false; // not terminal, or still being submitted
    std::string scheduler;    // empty: any
    std::size_t limit = 0;    // 0: no limit; newest first
};

/// The shared polling bookkeeping for one scheduler (site): concurrent dljob processes consult
/// it so that only one of them queries the scheduler per interval.
struct PollSlot {
    bool granted = false; // this caller should poll now
    std::int64_t next_poll_at = 0;
    std::int64_t interval_s = 0;
};

class JobStore {
public:
    virtual ~JobStore() = default;

    /// Inserts a job in phase `submitting` and commits it; fails on a duplicate token, and on a
    /// second continuation of the same job (so two dljob processes never continue it twice).
    virtual Result<Job> create(const Job& job) = 0;
    /// Records the scheduler's id after a successful submit.
    virtual Result<void> mark_submitted(std::int64_t id, const std::string& scheduler_id,
                                        const std::string& secondary_id, std::int64_t now) = 0;
    /// The submit's outcome is not known (timeout); reconciliation resolves it by token.
    virtual Result<void> mark_submit_unknown(std::int64_t id, std::int64_t now) = 0;
    /// Removes a job the scheduler rejected, so no orphan row remains.
    virtual Result<void> remove(std::int64_t id) = 0;
    /// Stores a new observed state; records an event only when state, native state or reason
    /// changed. Terminal states are never overwritten.
    virtual Result<bool> update_state(std::int64_t id, const SchedulerStatus& status,
                                      std::int64_t now) = 0;
    virtual Result<void> update_metrics(std::int64_t id, const JobMetrics& metrics) = 0;

    virtual Result<std::optional<Job>> find(std::int64_t id) = 0;
    virtual Result<std::optional<Job>> find_by_token(const std::string& token) = 0;
    /// The job that continues job `id` (its next attempt), if one was submitted.
    virtual Result<std::optional<Job>> continuation_of(std::int64_t id) = 0;
    virtual Result<std::vector<Job>> list(const JobQuery& query) = 0;
    virtual Result<std::vector<JobEvent>> events(std::int64_t id) = 0;
    virtual Result<std::optional<JobMetrics>> metrics(std::int64_t id) = 0;
    /// Metrics of every job that has some, in one query (status of thousands of jobs).
    virtual Result<std::map<std::int64_t, JobMetrics>> all_metrics() = 0;

    /// Grants a poll of `key` when its interval has passed (recording `now` atomically), and
    /// otherwise says when the next one is due.
    virtual Result<PollSlot> claim_poll(const std::string& key, std::int64_t now,
                                        std::int64_t min_interval_s) = 0;
    /// After a poll: a change or an error resets/grows the interval (backoff up to max).
    virtual Result<void> record_poll(const std::string& key, bool changed, bool failed,
                                     std::int64_t min_interval_s, std::int64_t max_interval_s) = 0;
};

} // namespace dljob
