#pragma once
// Continuations: a training that checkpointed before its walltime exits 75 ("resume me"), and
// dljob submits the same job script again, in the same run directory, from where dljob runs (the
// login node, where submitting always works), as a new row that continues the old one. The
// engine then resumes its own newest checkpoint (`--resume auto`). Bounded twice, so that no
// job resubmits forever: at most the recipe's checkpoint.max_continuations, and never after an
// attempt that left the newest entry of <run_dir>/checkpoints as it found it (no progress).
// The job itself continues where nobody runs dljob (issue 25): on `local` its wrapper, on the
// batch families the job script's epilogue through `dljob continue-job` (continue_from_job), each
// deciding and starting the next attempt itself (ContinuationRecord); status then only records
// what the job did.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/domain/job.hpp>
#include <dljob/domain/result.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace dljob::app {

/// The exit status that asks for a continuation (EX_TEMPFAIL; docs/run-directory.md).
inline constexpr int checkpointed_exit_code = 75;

/// Where an attempt's job.log is kept once its job is continued: "job.attempt<N>.log".
std::string attempt_log_name(int attempt);

/// The newest entry of `run_dir`/checkpoints as "name size mtime", "" when there is none.
std::string progress_mark(const std::filesystem::path& run_dir);

/// The decision on continuing one attempt, in <run_dir>/continuation.<token>: written once (the
/// file is created only if absent), by whichever comes first: the local wrapper when the job
/// exits 75, or the `dljob status` that continues it. dljob never writes the store from a
/// compute node; the next `dljob status` records what the job decided.
struct ContinuationRecord {
    int exit_code = checkpointed_exit_code;
    bool timeout = false;     // the walltime watchdog ended the attempt
    std::int64_t ended = 0;   // when the attempt ended (epoch seconds), 0 if not said
    std::string next_token;   // the next attempt's token; empty: not continued
    std::string declined;     // why not ("limit", "no progress")
    std::string next_id;      // the next attempt's scheduler id, once it was started
    std::int64_t started = 0; // when the ended attempt's script started, 0 if not said
    std::string progress;     // progress_mark() when decided: the next attempt's starting mark
    std::string by;           // who decided: "dljob" (status), "job" (the job script), "cancel"
    std::int64_t metrics_bytes = -1; // metrics.jsonl's size when decided: this attempt's lines
};

/// Why `dljob cancel` claimed an attempt's record: no continuation after a cancel.
inline constexpr std::string_view declined_cancelled = "cancelled";

/// <run_dir>/chain.json: what submitting the job again needs (family, script, name, submit
/// command, max_continuations), written by `dljob submit` so that the job can continue itself
/// without the job store.
Result<void> write_chain_file(const Job& job);

/// `dljob submit --after A`: the dependant's scheduler id (`afterok` or `afterany` by `ok`),
/// one line appended to A's run directory (its `dependants` file): when A continues, the job
/// that submits its next attempt moves them to it (retarget_dependants), which the job can do
/// without the store.
Result<void> record_dependant(const std::filesystem::path& after_run_dir,
                              const std::string& scheduler_id, bool ok);

/// Makes every dependant recorded in `run_dir` wait for `next_id` (the chain's next attempt)
/// instead, with `scheduler`'s own command (scontrol update, ...). Run before the attempt exits
/// 75: an afterok on an attempt that ended non-zero is never satisfied, and Slurm's
/// kill_invalid_depend cancels the dependant at once. A dependant that has started or ended
/// cannot and need not move; the others that fail are named in `note`.
void retarget_dependants(ProcessRunner& runner, const std::string& scheduler,
                         const std::filesystem::path& run_dir, const std::string& next_id,
                         std::string& note);

/// Whether `dljob cancel` claimed the attempt of `token` (it does so before it signals it).
bool cancel_claimed(const std::filesystem::path& run_dir, const std::string& token);

/// <run_dir>/continuation.<token>, when there is one.
std::optional<ContinuationRecord> read_continuation_record(const std::filesystem::path& run_dir,
                                                           const std::string& token);

/// The next attempt of `ended` the job started itself (its continuation record names it),
/// recorded in the store if it is not yet, or the one already recorded; nullopt when there is
/// none. `dljob cancel` follows it: a chain continued while nobody looked is cancelled whole.
std::optional<Job> started_continuation(JobContext& context, const Job& ended, std::string& note);

/// For a job that has just ended (status moved it to its final state, once) with its
/// exit-code file saying `exit_code`: submits its next attempt when it checkpointed and may be
/// continued, or records the one the job started itself (its continuation record). Returns
/// that attempt; nullopt when there is none, with the reason in `note` when the job asked for
/// one (exit 75) and did not get it. Never two next attempts: the record is claimed before
/// submitting, and the store takes one continuation per job.
std::optional<Job> continue_if_checkpointed(JobContext& context, const Job& ended, int exit_code,
                                            std::string& note);

/// What the job script tells `dljob continue-job` about the attempt that just ended.
struct JobSideAttempt {
    std::filesystem::path run_dir;
    std::string token;          // this attempt's own token
    int attempt = 1;            // this attempt's number in the chain
    std::string previous_token; // the attempt before, whose record holds this one's start mark
    std::int64_t started = 0;   // when this attempt's script started
    int exit_code = checkpointed_exit_code;
};

/// Job side (the batch families' epilogue, on the compute or MOM node): decides, within the
/// same bounds as status, whether the attempt that exited 75 goes on, claims its record (one
/// decision per attempt, whoever comes first: this job, a `dljob status`, a `dljob cancel`) and,
/// continuing, submits the next attempt with its own token and adds its scheduler id to the
/// record. Never opens the job store. True when the record names a next attempt (by this call
/// or by whoever decided first): the script then writes no exit_code, which would read as that
/// attempt's end. Why not, or what failed, goes to `note`.
bool continue_from_job(JobContext& context, const JobSideAttempt& attempt, std::string& note);

/// `dljob cancel`: claims the attempt's record as cancelled before it is cancelled, so that the
/// job, warned at the same moment, does not continue it. False when the record was there
/// already (the job or a status decided first; started_continuation then finds the attempt it
/// started).
bool claim_cancelled(const Job& job);

} // namespace dljob::app
