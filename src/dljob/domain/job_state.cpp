#include <dljob/domain/job_state.hpp>

#include <array>
#include <utility>

namespace dljob {
namespace {

constexpr std::array<std::pair<JobState, const char*>, 7> names{{
    {JobState::pending, "PENDING"},
    {JobState::running, "RUNNING"},
    {JobState::completed, "COMPLETED"},
    {JobState::failed, "FAILED"},
    {JobState::cancelled, "CANCELLED"},
    {JobState::timeout, "TIMEOUT"},
    {JobState::unknown, "UNKNOWN"},
}};

} // namespace

const char* to_string(JobState state) noexcept {
    for (const auto& [value, name] : names) {
        if (value == state) {
            return name;
        }
    }
    return "UNKNOWN";
}

std::optional<JobState> parse_job_state(std::string_view text) noexcept {
    for (const auto& [value, name] : names) {
        if (text == name) {
            return value;
        }
    }
    return std::nullopt;
}

bool is_terminal(JobState state) noexcept {
    return state == JobState::completed || state == JobState::failed ||
           state == JobState::cancelled || state == JobState::timeout;
}

SchedulerStatus reconcile(const std::optional<SchedulerStatus>& observed,
                          std::optional<int> exit_code_file) {
    // The job's own file may not be visible yet where the run directory is on NFS (attribute
    // caching) when the scheduler already reports the job ended. The exit
    // status it reports (Slurm's sacct, Torque's exit_status) is the script's, which is the
    // file's: a FAILED job that exited 75 checkpointed, and must read so to be continued.
    if (!exit_code_file && observed && observed->state == JobState::failed && observed->exit_code) {
        exit_code_file = observed->exit_code;
    }
    if (exit_code_file) {
        SchedulerStatus status = observed.value_or(SchedulerStatus{});
        status.exit_code = exit_code_file;
        const bool killed = observed && (observed->state == JobState::timeout ||
                                         observed->state == JobState::cancelled);
        // 75: the job checkpointed before its walltime and asks to be resumed; 128+USR1/USR2:
        // the program did not handle the walltime warning signal (rendered scripts forward it)
        // and died of it. Both are the walltime ending the job.
        const bool walltime =
            *exit_code_file == 75 || *exit_code_file == 128 + 10 || *exit_code_file == 128 + 12;
        if (*exit_code_file == 0) {
            status.state = JobState::completed;
        } else if (walltime && !killed) {
            status.state = JobState::timeout;
            status.reason = *exit_code_file == 75 ? "checkpointed before the walltime"
                                                  : "ended by the walltime warning signal";
        } else if (!killed) {
            status.state = JobState::failed;
        }
        if (!observed) {
            status.native_state = "exit_code file";
        }
        return status;
    }
    if (!observed) {
        SchedulerStatus missing;
        missing.reason = "not found by the scheduler";
        return missing;
    }
    return *observed;
}

} // namespace dljob
