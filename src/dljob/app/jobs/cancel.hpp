#pragma once
// `dljob cancel JOB...`: ask the job's scheduler to cancel it and record CANCELLED.

#include <dljob/app/jobs/job_context.hpp>

#include <string>
#include <vector>

namespace dljob::app {

/// Cancels one job; a job already finished is left as it is (not an error).
Result<Job> cancel_job(JobContext& context, const std::string& id);

/// `dljob cancel SWEEP`: the ids to cancel for every point of sweep `sweep` (sw-...), each
/// point's latest attempt, the last point first (a point may wait on an earlier one, and must
/// not start between the two cancels). not_found when the store has no such sweep.
Result<std::vector<std::string>> sweep_cancel_ids(JobContext& context, const std::string& sweep);

} // namespace dljob::app
