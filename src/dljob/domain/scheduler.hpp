#pragma once
// One small interface per scheduler family (schedulers/*.cpp): submit a rendered script, poll
// many jobs with one query, cancel. Commands run through ProcessRunner, never a shell.

#include <dljob/domain/job_state.hpp>
#include <dljob/domain/result.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob {

/// `dljob submit --after ID[:ok|any]`: start only once another job has ended (`ok`: and only
/// if it completed). Each family renders its own form (render::dependency_options).
struct JobDependency {
    std::int64_t job_id = 0;  // dljob's id of the job waited on
    std::string scheduler_id; // the scheduler's id of that job (its latest attempt)
    std::string run_dir;      // its run directory (local: where its end is written)
    bool ok = true;           // afterok; false: afterany
};

/// A sweep submitted as one job array: tasks 0 .. size-1, at most `limit` of them running at
/// once (0: no limit). Each family renders its own form (SchedulerFamily::array_options).
struct ArraySpec {
    int size = 0;
    int limit = 0;
};

struct SubmitRequest {
    std::string script_path;
    std::string run_dir;
    std::string name;
    std::string token;           // unique; put into the job's name or comment for reconciliation
    std::int64_t walltime_s = 0; // 0: the script's own directives decide
    std::string log_path;        // where stdout+stderr go; empty: the scheduler's default
    /// The rendered submit command (RenderedJob::submit_argv). sqsub takes no directives, so its
    /// adapter submits with these queue options; the others read the script's directives.
    std::vector<std::string> submit_argv;
    /// The chain this job belongs to (docs/schedulers.md, Continuations): which attempt it is and
    /// how many times the chain may be submitted again. The local wrapper continues a job that
    /// exits 75 itself, within these bounds; the other families ignore them.
    int attempt = 1;
    int max_continuations = 0;
    /// Wait for this job first; only ever set on a chain's first attempt.
    std::optional<JobDependency> after;
    /// Submit the script as a job array (a sweep's array script); the answer is the array's id.
    std::optional<ArraySpec> array;
};

struct Submission {
    std::string scheduler_id;
    std::string secondary_id; // Moab: the Torque id
};

/// What a scheduler needs to find a job again.
struct JobRef {
    std::string scheduler_id;
    std::string secondary_id;
    std::string run_dir;
    std::string token;
};

class Scheduler {
public:
    virtual ~Scheduler() = default;

    [[nodiscard]] virtual std::string_view family() const = 0;

    /// Submits; a rejection is ErrorCode::scheduler_rejected, a hung command ErrorCode::timeout
    /// (ambiguous: the job may exist; reconcile with find_by_token).
    virtual Result<Submission> submit(const SubmitRequest& request) = 0;

    /// The one command submit(request) runs, for `submit --dry-run` to show; empty where a
    /// submission is more than one command or none (local starts its wrapper itself).
    [[nodiscard]] virtual std::vector<std::string>
    submit_command_line(const SubmitRequest& request) const {
        (void)request;
        return {};
    }

    /// One query for all the given jobs. Jobs the scheduler no longer knows are absent from the
    /// map (keyed by scheduler_id); the caller decides what that means.
    virtual Result<std::map<std::string, SchedulerStatus>>
    poll(const std::vector<JobRef>& jobs) = 0;

    /// Looks for the job submitted with `job.token` (reconciling a submit that timed out or was
    /// interrupted before it recorded the id): in the scheduler's own lists, else in the run
    /// directory `job.run_dir`, where the started job left its identity. `job.scheduler_id` is
    /// not used. Nothing found is an answer; an error means "cannot tell now".
    virtual Result<std::optional<Submission>> find_by_token(const JobRef& job) = 0;

    virtual Result<void> cancel(const JobRef& job) = 0;
};

/// Options every adapter shares.
struct SchedulerOptions {
    std::chrono::milliseconds command_timeout{std::chrono::seconds(30)};
    std::string user; // whose jobs to list; empty: $USER
};

} // namespace dljob
