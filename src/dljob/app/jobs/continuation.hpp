#pragma once
// Continuations: a training that checkpointed before its walltime exits 75 ("resume me"), and
// dljob submits the same job script again, in the same run directory, from where dljob runs (the
// login node, where submitting always works), as a new row that continues the old one. The
// engine then resumes its own newest checkpoint (`--resume auto`). Bounded twice, so that no
// job resubmits forever: at most the recipe's checkpoint.max_continuations, and never after an
// attempt that left the newest entry of <run_dir>/checkpoints as it found it (no progress).
// On `local` the wrapper decides and starts the next attempt itself (ContinuationRecord);
// status then only records what the job did.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/domain/job.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

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
    bool timeout = false;   // the walltime watchdog ended the attempt
    std::int64_t ended = 0; // when the attempt ended (epoch seconds), 0 if not said
    std::string next_token; // the next attempt's token; empty: not continued
    std::string declined;   // why not ("limit", "no progress")
    std::string next_id;    // the next attempt's scheduler id, once it was started
};

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

} // namespace dljob::app
