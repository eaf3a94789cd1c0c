#include <dljob/app/jobs/cancel.hpp>
#include <dljob/app/jobs/continuation.hpp>
#include <dljob/schedulers/family.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

namespace dljob::app {
namespace {

// "family:array id" of a job that is a task of a job array (a sweep's point), else "".
std::string array_key(const Job& job) {
    const auto* family = schedulers::find_family(job.scheduler);
    if (family == nullptr || job.scheduler_id.empty()) {
        return {};
    }
    const std::string array = family->array_of(job.scheduler_id);
    return array == job.scheduler_id ? std::string() : job.scheduler + ":" + array;
}

} // namespace

Result<Job> cancel_job(JobContext& context, const std::string& id,
                       const std::set<std::string>& arrays_cancelled) {
    auto job = context.find_job(id);
    if (!job) {
        return fail(job.error());
    }
    if (is_terminal(job->state) && job->phase == SubmitPhase::submitted) {
        // An ended attempt that was continued (by status or by the job itself): cancelling it
        // by the id submit printed cancels the chain, i.e. its running attempt.
        std::string note;
        if (auto next = started_continuation(context, *job, note); next && next->id != job->id) {
            auto next_cancelled = cancel_job(context, std::to_string(next->id), arrays_cancelled);
            if (!next_cancelled) {
                return fail(next_cancelled.error());
            }
        }
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
    // no next attempt. Taken already with a next attempt: this one has ended (Slurm would
    // refuse to cancel it) and the chain goes on in the attempt followed below.
    bool continued_itself = false;
    if (!claim_cancelled(*job)) {
        const auto record = read_continuation_record(job->run_dir, job->token);
        continued_itself = record && !record->next_token.empty();
    }
    if (!continued_itself && arrays_cancelled.count(array_key(*job)) == 0) {
        auto cancelled = (*scheduler)->cancel(job_ref(*job));
        if (!cancelled && cancelled.error().code != ErrorCode::not_found) {
            return fail(cancelled.error());
        }
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
        auto next_cancelled = cancel_job(context, std::to_string(next->id), arrays_cancelled);
        if (!next_cancelled) {
            return fail(next_cancelled.error().code,
                        fmt::format("job {} is cancelled, but its next attempt (job {}): {}", id,
                                    next->id, next_cancelled.error().message),
                        next_cancelled.error().hint);
        }
    }
    return context.find_job(id);
}

Result<std::set<std::string>> cancel_arrays(JobContext& context,
                                            const std::vector<std::string>& ids) {
    std::map<std::string, Job> arrays; // by array_key: one of its tasks
    for (const auto& id : ids) {
        auto job = context.find_job(id);
        if (!job || is_terminal(job->state)) {
            continue; // cancel_job says what it is
        }
        if (auto key = array_key(*job); !key.empty()) {
            arrays.emplace(key, *job);
        }
    }
    std::set<std::string> cancelled;
    for (const auto& [key, job] : arrays) {
        auto scheduler = context.scheduler(job.scheduler);
        if (!scheduler) {
            return fail(scheduler.error());
        }
        // As cancel_job does for one point: each task's job, on the cancel's signal, finds
        // its continuation record taken and submits no next attempt.
        for (const auto& id : ids) {
            if (auto point = context.find_job(id); point && array_key(*point) == key) {
                (void)claim_cancelled(*point);
            }
        }
        JobRef whole = job_ref(job);
        whole.scheduler_id = key.substr(key.find(':') + 1);
        auto done = (*scheduler)->cancel(whole);
        if (!done && done.error().code != ErrorCode::not_found) {
            return fail(done.error());
        }
        cancelled.insert(key);
    }
    return cancelled;
}

Result<std::vector<std::string>> sweep_cancel_ids(JobContext& context, const std::string& sweep) {
    auto listed = context.store().list(JobQuery{});
    if (!listed) {
        return fail(listed.error());
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> points; // first attempt, latest
    for (const auto& job : *listed) {
        if (job.sweep != sweep || job.continues != 0) {
            continue;
        }
        // The point's latest attempt: cancelling it is the point's record of the cancel (an
        // ended first attempt would be left as it is and print how it ended).
        auto last = context.latest_attempt(job);
        const Job& latest = last ? *last : job;
        points.emplace_back(job.id, latest.id);
    }
    if (points.empty()) {
        return fail(ErrorCode::not_found, fmt::format("no sweep {} in the job store", sweep),
                    "dljob submit ... --sweep KEY=V1,V2 prints the sweep id");
    }
    // The last point first: with --sweep-limit a point waits (afterany) for an earlier one,
    // which, cancelled first, would let it start before its own cancel.
    std::sort(points.begin(), points.end(), std::greater<>());
    std::vector<std::string> ids;
    ids.reserve(points.size());
    for (const auto& point : points) {
        ids.push_back(std::to_string(point.second));
    }
    return ids;
}

} // namespace dljob::app
