#pragma once
// `dljob cancel JOB...`: ask the job's scheduler to cancel it and record CANCELLED.

#include <dljob/app/jobs/job_context.hpp>

#include <string>

namespace dljob::app {

/// Cancels one job; a job already finished is left as it is (not an error).
Result<Job> cancel_job(JobContext& context, const std::string& id);

} // namespace dljob::app
