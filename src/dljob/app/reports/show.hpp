#pragma once
// `dljob show JOB`: everything dljob knows about one job: the record, its state history, the
// resolved recipe and the job script.

#include <dljob/app/jobs/job_context.hpp>

#include <iosfwd>
#include <string>

namespace dljob::app {

Result<void> show_job(JobContext& context, const std::string& id, std::ostream& out);

} // namespace dljob::app
