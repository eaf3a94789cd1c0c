#pragma once
// `dljob logs JOB [-f] [--rank R]`: the job's output (<run_dir>/job.log), optionally followed
// until the job ends, optionally only the lines of one data-parallel rank.

#include <dljob/app/jobs/job_context.hpp>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace dljob::app {

/// The file holding the job's output: job.log, else the newest *.out / *.o<id> in the run dir.
std::filesystem::path job_log_path(const Job& job);

/// The text of `line` if one of the launchers' rank tags says rank `rank` wrote it: srun --label
/// ("1: text", padded), Open MPI's --tag-output ("[1,1]<stdout>:text") or Hydra's -prepend-rank
/// ("[1] text"); nullopt for another rank's line or an untagged one.
std::optional<std::string_view> rank_line(std::string_view line, int rank);

struct LogOptions {
    bool follow = false;
    std::optional<int> rank; // only this rank's lines, without their tag
};

Result<void> print_logs(JobContext& context, const std::string& id, const LogOptions& options,
                        std::ostream& out);

} // namespace dljob::app
