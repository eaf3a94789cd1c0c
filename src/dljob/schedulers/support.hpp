#pragma once
// What every scheduler adapter shares: running one command with a deadline and turning its
// failure into a typed error, the job-side exit-code files (text helpers: util/text.hpp).

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/scheduler.hpp>
#include <dljob/util/text.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// Runs `argv`. A timeout becomes ErrorCode::timeout (the request may have reached the
/// scheduler); a missing program ErrorCode::scheduler_unreachable. A non-zero exit is returned
/// as a ProcessResult for the adapter to judge.
Result<ProcessResult> run_command(ProcessRunner& runner, std::vector<std::string> argv,
                                  const SchedulerOptions& options, const std::string& cwd = {});

/// Runs a submission command (sbatch, qsub, msub, sqsub) in `cwd` and returns the job id that
/// `find_id` reads from what it printed. A failed command is command_error(argv[0]); a command
/// that succeeded but printed no id is scheduler_unreachable, because the job may exist: the
/// next 'dljob status' finds it by its token.
Result<Submission>
submit_command(ProcessRunner& runner, std::vector<std::string> argv,
               const SchedulerOptions& options, const std::string& cwd,
               const std::function<std::optional<std::string>(const ProcessResult&)>& find_id);

/// Whether a scheduler's error text means "try again later" rather than "this request is
/// wrong".
bool is_transient_error(std::string_view text);

/// The error for a failed command: transient texts become scheduler_unreachable, others
/// scheduler_rejected, with the command's own message (first lines of stderr, else stdout).
Error command_error(std::string_view program, const ProcessResult& result);

// The scheduler parsers use util's text helpers unqualified.
using util::all_digits;
using util::parse_int;
using util::split;
using util::split_lines;
using util::split_whitespace;
using util::trim;

/// The integer in <run_dir>/exit_code written by the job's epilogue, if it is there.
std::optional<int> read_exit_code_file(const std::string& run_dir);

/// The job that left <job.run_dir>/job_identity with `job.token` (its prologue writes it when
/// it starts): its scheduler id. How a submit whose id was never recorded is recognised once
/// the scheduler has forgotten the job (squeue's MinJobAge, qstat's keep_completed).
std::optional<Submission> identity_submission(const JobRef& job);

/// The user whose jobs are listed: options.user, else $USER, else $LOGNAME.
std::string current_user(const SchedulerOptions& options);

/// The job name that carries the token where a scheduler has no comment field.
std::string token_job_name(const std::string& token);

/// A site's extra option as argv words: "-l gres=ccm" is two, "--qos=normal" one.
void append_split(std::vector<std::string>& argv, const std::string& option);

} // namespace dljob::schedulers
