// The `local` scheduler: no queue, the job starts at once on this machine.
//
// The job script runs under a small bash wrapper started with setsid, so it is a session and
// process-group leader (its pid is the scheduler id), outlives dljob and the terminal, and a
// cancel reaches everything it started with one kill(-pgid). The wrapper
//   - runs the script in the background and waits for it (so a TERM reaches the wrapper's trap
//     at once rather than after the script ends),
//   - enforces the walltime with a watchdog that marks <run_dir>/local_timeout and sends TERM
//     to the whole group (the wrapper survives it through its trap),
//   - writes the script's exit status to <run_dir>/local_exit (temp file + rename).
// All user values reach the wrapper as positional arguments, never inside its code.
//
// State table:
//   wrapper alive, no local_exit                -> RUNNING ("running")
//   local_exit = 0                              -> COMPLETED
//   local_timeout present                       -> TIMEOUT (native "walltime")
//   local_exit != 0                             -> FAILED (exit code kept)
//   wrapper gone without local_exit (killed, machine rebooted) -> absent: the job's own
//     exit_code file or UNKNOWN decides
// A cancel is recorded by the caller (CANCELLED); the wrapper's later exit is then ignored.
#include <dljob/schedulers/local.hpp>
#include <dljob/schedulers/support.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <csignal>
#include <filesystem>

namespace dljob::schedulers {
namespace {

constexpr std::string_view wrapper = R"sh(
script=$1 run_dir=$2 walltime=$3
bash "$script" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM
watchdog=
if [ "$walltime" -gt 0 ]; then
  ( trap - TERM; sleep "$walltime"; : >"$run_dir/local_timeout"; kill -TERM 0 ) </dev/null &
  watchdog=$!
fi
while :; do
  wait "$child"; rc=$?
  kill -0 "$child" 2>/dev/null || break
done
[ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
printf '%s\n' "$rc" >"$run_dir/.local_exit.tmp" && mv -f "$run_dir/.local_exit.tmp" "$run_dir/local_exit"
exit "$rc"
)sh";

} // namespace

SchedulerStatus map_local_exit(int wrapper_exit, bool watchdog_fired) {
    SchedulerStatus status;
    status.exit_code = wrapper_exit;
    if (watchdog_fired) {
        status.state = JobState::timeout;
        status.native_state = "walltime";
        status.reason = "walltime exceeded";
    } else if (wrapper_exit == 0) {
        status.state = JobState::completed;
        status.native_state = "exited";
    } else {
        status.state = JobState::failed;
        status.native_state = "exited";
        status.reason = fmt::format("exit status {}", wrapper_exit);
    }
    return status;
}

Result<Submission> LocalScheduler::submit(const SubmitRequest& request) {
    std::error_code ec;
    std::filesystem::create_directories(request.run_dir, ec);
    if (ec) {
        return fail(ErrorCode::io, fmt::format("cannot create run directory {}: {}",
                                               request.run_dir, ec.message()));
    }
    if (!std::filesystem::exists(request.script_path)) {
        return fail(ErrorCode::scheduler_rejected,
                    fmt::format("job script {} does not exist", request.script_path));
    }
    // A job submitted again in its run directory (a continuation) must not be read as ended by
    // the previous wrapper's files.
    for (const auto& stale : {exit_file, timeout_file}) {
        std::filesystem::remove(std::filesystem::path(request.run_dir) / stale, ec);
        if (ec) {
            return fail(ErrorCode::io, fmt::format("cannot remove {} in {}: {}", stale,
                                                   request.run_dir, ec.message()));
        }
    }
    DetachedRequest detached;
    detached.argv = {"bash",
                     "-c",
                     std::string(wrapper),
                     "dljob-local",
                     request.script_path,
                     request.run_dir,
                     std::to_string(request.walltime_s)};
    detached.cwd = request.run_dir;
    detached.output_path = request.log_path.empty()
                               ? (std::filesystem::path(request.run_dir) / log_file).string()
                               : request.log_path;
    detached.env = {{"DLJOB_JOB_TOKEN", request.token}, {"DLJOB_RUN_DIR", request.run_dir}};
    auto pid = m_runner.spawn_detached(detached);
    if (!pid) {
        return fail(pid.error());
    }
    return Submission{std::to_string(*pid), ""};
}

Result<std::map<std::string, SchedulerStatus>>
LocalScheduler::poll(const std::vector<JobRef>& jobs) {
    std::map<std::string, SchedulerStatus> found;
    for (const auto& job : jobs) {
        const std::filesystem::path dir(job.run_dir);
        if (auto text = util::read_file(dir / exit_file)) {
            if (auto code = parse_int(*text)) {
                found[job.scheduler_id] =
                    map_local_exit(*code, std::filesystem::exists(dir / timeout_file));
                continue;
            }
        }
        auto pid = parse_int(job.scheduler_id);
        if (pid && m_runner.group_alive(*pid)) {
            SchedulerStatus running;
            running.state = JobState::running;
            running.native_state = "running";
            found[job.scheduler_id] = running;
        }
    }
    return found;
}

Result<std::optional<Submission>> LocalScheduler::find_by_token(const std::string& /*token*/) {
    // Starting a local job cannot time out halfway: there is never anything to find.
    return std::optional<Submission>{};
}

Result<void> LocalScheduler::cancel(const JobRef& job) {
    auto pid = parse_int(job.scheduler_id);
    if (!pid || *pid <= 1) {
        return fail(ErrorCode::internal, fmt::format("bad local job id '{}'", job.scheduler_id));
    }
    if (!m_runner.signal_group(*pid, SIGTERM)) {
        return fail(ErrorCode::not_found,
                    fmt::format("local job {} is no longer running", job.scheduler_id));
    }
    return {};
}

} // namespace dljob::schedulers
