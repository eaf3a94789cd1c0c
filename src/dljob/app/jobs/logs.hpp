#pragma once
// `dljob logs JOB [-f]`: the job's output (<run_dir>/job.log), optionally followed until the
// job ends.

#include <dljob/app/jobs/job_context.hpp>

#include <filesystem>
#include <iosfwd>
#include <string>

namespace dljob::app {

/// The file holding the job's output: job.log, else the newest *.out / *.o<id> in the run dir.
std::filesystem::path job_log_path(const Job& job);

Result<void> print_logs(JobContext& context, const std::string& id, bool follow, std::ostream& out);

} // namespace dljob::app
