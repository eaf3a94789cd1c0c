#pragma once
// A job as dljob records it: who submitted what where, and what the scheduler last said.

#include <dljob/domain/job_state.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dljob {

/// Where a submission stands. `submitting` rows are committed before the scheduler is called,
/// so a crash or a timed-out sbatch leaves a row to reconcile by its token (never a blind retry).
enum class SubmitPhase { submitting, submitted, submit_unknown };

const char* to_string(SubmitPhase phase) noexcept;
std::optional<SubmitPhase> parse_submit_phase(std::string_view text) noexcept;

struct Job {
    std::int64_t id = 0;
    std::string token; // unique; goes into the scheduler's job name or comment
    std::string name;
    std::string site;
    std::string scheduler; // family: local, slurm, pbs, moab, sqsub
    std::string scheduler_id;
    std::string secondary_id; // Moab: the Torque id next to the Moab id; local: unused
    std::string run_dir;
    std::string script_path;
    std::string recipe_path;
    SubmitPhase phase = SubmitPhase::submitting;
    JobState state = JobState::pending;
    std::string native_state;
    std::string reason;
    std::optional<int> exit_code;
    std::int64_t walltime_s = 0;
    std::int64_t created_at = 0;
    std::int64_t started_at = 0; // 0: not seen running yet
    std::int64_t finished_at = 0;
    std::int64_t updated_at = 0;
    // Continuations (docs/schedulers.md): a job that checkpointed before its walltime (exit 75)
    // is submitted again by dljob, in the same run directory, as a new row continuing this one.
    int attempt = 1;                      // 1: the first submission of its run directory
    std::int64_t continues = 0;           // the job this attempt continues; 0: none
    int max_continuations = 0;            // how many times the chain may be submitted again
    std::vector<std::string> submit_argv; // the rendered submit command, to submit it again
    /// The newest entry of <run_dir>/checkpoints when this attempt was submitted ("" if none):
    /// an attempt that ends with the same one made no progress and is not continued.
    std::string progress_mark;
    /// `--after`: the job this one waits for (0: none), and whether it must have completed
    /// (afterok) or only ended (afterany).
    std::int64_t after = 0;
    bool after_ok = true;
    /// `submit --sweep`: the sweep this job is a point of ("" if none) and the point's values,
    /// as the `--set KEY=VALUE` assignments that made it.
    std::string sweep;
    std::vector<std::string> sweep_point;
};

/// A state change, kept so `dljob show` can tell a job's history.
struct JobEvent {
    std::int64_t job_id = 0;
    std::int64_t at = 0;
    JobState state = JobState::unknown;
    std::string native_state;
    std::string reason;
};

/// The training's own progress, read from <run_dir>/metrics.jsonl.
struct JobMetrics {
    std::int64_t iter = 0;
    std::int64_t max_iter = 0;
    std::optional<double> loss;
    std::optional<double> accuracy;
    std::optional<double> images_per_s;
    std::optional<double> elapsed_s; // since the training process started
    std::string final_status;
    std::int64_t start_iter = 0; // where that process started (a resumed one: not 0)
    /// The training's data-parallel ranks (its start line); images_per_s counts them all.
    int ranks = 1;
};

} // namespace dljob
