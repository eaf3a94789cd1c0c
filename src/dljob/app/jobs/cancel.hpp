#pragma once
// `dljob cancel JOB...`: ask the job's scheduler to cancel it and record CANCELLED.

#include <dljob/app/jobs/job_context.hpp>

#include <set>
#include <string>
#include <vector>

namespace dljob::app {

/// Cancels one job; a job already finished is left as it is (not an error). A task of an array
/// in `arrays_cancelled` (cancel_arrays) is only recorded: its scheduler has been told.
Result<Job> cancel_job(JobContext& context, const std::string& id,
                       const std::set<std::string>& arrays_cancelled = {});

/// `dljob cancel SWEEP` where the points are tasks of one job array: the whole array is
/// cancelled with one scheduler command (scancel 123). Returns the arrays told, for cancel_job.
Result<std::set<std::string>> cancel_arrays(JobContext& context,
                                            const std::vector<std::string>& ids);

/// `dljob cancel SWEEP`: the ids to cancel for every point of sweep `sweep` (sw-...), each
/// point's latest attempt, the last point first (a point may wait on an earlier one, and must
/// not start between the two cancels). not_found when the store has no such sweep.
Result<std::vector<std::string>> sweep_cancel_ids(JobContext& context, const std::string& sweep);

} // namespace dljob::app
