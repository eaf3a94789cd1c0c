#include <dljob/app/cancel.hpp>
#include <dljob/app/continuation.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

namespace dljob::app {

Result<Job> cancel_job(JobContext& context, const std::string& id) {
    auto job = context.find_job(id);
    if (!job) {
        return fail(job.error());
    }
    if (is_terminal(job->state) && job->phase == SubmitPhase::submitted) {
        return *job;
    }
    if (job->scheduler_id.empty()) {
        return fail(
            ErrorCode::not_found,
            fmt::format("job {} has no scheduler id yet (its submission is unconfirmed)", id),
            "run 'dljob status' to reconcile it, then cancel again");
    }
    auto scheduler = context.scheduler(job->scheduler);
    if (!scheduler) {
        return fail(scheduler.error());
    }
    // Decided before the scheduler hears of it: the job, checkpointing on the cancel's signal
    // (or warned by the walltime at the same moment), then finds its record taken and submits
    // no next attempt. Taken already: the job continued itself, followed below.
    (void)claim_cancelled(*job);
    auto cancelled = (*scheduler)->cancel(job_ref(*job));
    if (!cancelled && cancelled.error().code != ErrorCode::not_found) {
        return fail(cancelled.error());
    }
    SchedulerStatus status;
    status.state = JobState::cancelled;
    status.native_state = job->native_state;
    status.reason = "cancelled with dljob cancel";
    auto updated = context.store().update_state(job->id, status, util::unix_now());
    if (!updated) {
        return fail(updated.error());
    }
    // A local job may have continued itself (exit 75) before anyone looked: the attempt it
    // started is this chain's running one, and goes too.
    std::string note;
    if (auto next = started_continuation(context, *job, note); next && next->id != job->id) {
        auto next_cancelled = cancel_job(context, std::to_string(next->id));
        if (!next_cancelled) {
            return fail(next_cancelled.error().code,
                        fmt::format("job {} is cancelled, but its next attempt (job {}): {}", id,
                                    next->id, next_cancelled.error().message),
                        next_cancelled.error().hint);
        }
    }
    return context.find_job(id);
}

} // namespace dljob::app
