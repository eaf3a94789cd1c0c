#pragma once
// `dljob status`: refresh what the schedulers say (politely: one query per site per interval,
// shared through the store), reconcile with each job's exit_code file, read the training's
// progress from metrics.jsonl, and print a table or JSON.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/domain/job.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace dljob::app {

struct StatusOptions {
    /// Empty: active jobs (all with --all). A sweep id (sw-...) names every point of it.
    std::vector<std::string> ids;
    bool all = false;
    bool json = false;
    /// Minimum seconds between two queries of one site's scheduler (local jobs are always
    /// checked: that costs no scheduler). $DLJOB_POLL_INTERVAL overrides the default.
    std::int64_t min_interval_s = 30;
    std::int64_t max_interval_s = 300;
    bool force = false; // poll now whatever the interval (explicit per-job requests)
};

struct JobView {
    Job job;
    std::optional<JobMetrics> metrics;
};

/// The default minimum interval: $DLJOB_POLL_INTERVAL, else 30 s.
std::int64_t default_poll_interval();

/// Polls the schedulers of the given jobs (those not finished) and stores what changed.
/// Scheduler failures are reported in `warnings` rather than failing the whole refresh.
Result<void> refresh_jobs(JobContext& context, const std::vector<Job>& jobs,
                          const StatusOptions& options, std::vector<std::string>& warnings);

/// Reads <run_dir>/metrics.jsonl: the last train and test lines and the final line; only its
/// first `limit` bytes when given (an attempt that was continued: the lines after are the next
/// attempt's, which share the file).
std::optional<JobMetrics> read_metrics(const std::string& run_dir,
                                       std::optional<std::int64_t> limit = std::nullopt);

/// Selects, refreshes and returns the jobs to show.
Result<std::vector<JobView>> job_status(JobContext& context, const StatusOptions& options,
                                        std::vector<std::string>& warnings);

/// "RUNNING", "PENDING (Resources)", "FAILED (exit 3)" ...
std::string state_text(const Job& job);
/// "iter 400/1000 loss 0.41 acc 0.88 512 img/s ETA 1m10s", empty without metrics. No ETA once
/// the job has ended: a cancelled or killed training writes no final line of its own.
std::string progress_text(const JobMetrics& metrics, JobState state);

/// With `fold_sweeps`, the points of each sweep (submit --sweep) are one line where the first
/// of them would be: the sweep id and how many points are in each state.
void print_status_table(std::ostream& out, const std::vector<JobView>& jobs, std::int64_t now,
                        bool fold_sweeps = false);
void print_status_json(std::ostream& out, const std::vector<JobView>& jobs);

/// The line `status --watch` shows under a job: a sparkline (`width` columns, plot.hpp's) of
/// the training loss in its run directory's metrics.jsonl (a continued chain's whole curve;
/// the test loss when there is no training loss yet), its iteration range and last value.
/// Empty when there is no file or no loss yet; malformed lines are skipped silently.
std::string loss_sparkline(const Job& job, std::size_t width = 30);

/// One frame of `status --watch`: print_status_table with loss_sparkline's line under each
/// job's row (a folded sweep's line has none).
void print_watch_frame(std::ostream& out, const std::vector<JobView>& jobs, std::int64_t now,
                       bool fold_sweeps = false, std::size_t width = 30);

} // namespace dljob::app
