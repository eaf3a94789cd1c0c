#pragma once
// The one state vocabulary every scheduler family is mapped onto (docs/schedulers.md), plus the
// rule that combines what a scheduler says with the job's own exit-code file.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dljob {

enum class JobState { pending, running, completed, failed, cancelled, timeout, unknown };

/// Upper-case name (PENDING, RUNNING, ...), as shown by `dljob status` and stored in the DB.
const char* to_string(JobState state) noexcept;

/// Parses an upper-case name; nullopt for anything else.
std::optional<JobState> parse_job_state(std::string_view text) noexcept;

/// COMPLETED, FAILED, CANCELLED and TIMEOUT never change again.
bool is_terminal(JobState state) noexcept;

/// What one scheduler query said about one job: the mapped state, and the native state and
/// reason kept verbatim so users see e.g. why a job is pending.
struct SchedulerStatus {
    JobState state = JobState::unknown;
    std::string native_state;
    std::string reason;
    std::optional<int> exit_code;
    std::string secondary_id; // learned while polling (Moab: the Torque id); empty: unchanged
    // When the job itself says it started and ended (its run directory; Unix seconds), for a
    // job that ran between two looks; 0: unknown, the store takes the time it first saw it so.
    std::int64_t started_at = 0;
    std::int64_t finished_at = 0;
};

/// Combines the scheduler's view (nullopt: the job was not found anywhere) with the exit code
/// the job's epilogue wrote to <run_dir>/exit_code (nullopt: not written yet). The file wins:
/// exit 0 is COMPLETED; 75 (checkpointed before the walltime) and 138/140 (died of the
/// USR1/USR2 walltime warning) are TIMEOUT; other non-zero codes are FAILED unless the scheduler
/// knows it was a TIMEOUT or a cancel. A job missing everywhere is UNKNOWN, never COMPLETED.
SchedulerStatus reconcile(const std::optional<SchedulerStatus>& observed,
                          std::optional<int> exit_code_file);

} // namespace dljob
