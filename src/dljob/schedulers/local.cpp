// The `local` scheduler: no queue, the job starts at once on this machine.
//
// The job script runs under a small bash wrapper started with setsid, so it is a session and
// process-group leader (its pid is the scheduler id), outlives dljob and the terminal, and a
// cancel reaches everything it started with one kill(-pgid). The wrapper
//   - first writes <run_dir>/local_job (its pid and the job's token), so a `dljob submit` killed
//     after starting it but before recording the pid finds it again (find_by_token),
//   - with --after, first waits (like a queue, so the walltime watchdog is not yet started) for
//     the other job's wrapper to write its local_exit, marking <run_dir>/local_waiting
//     meanwhile. The wait is bounded by the other job: when no wrapper of it has been alive
//     for 5 looks 2 s apart and it wrote no end (killed, machine rebooted), it counts as
//     failed. An afterok dependant of a job that did not exit 0 writes local_never_ran (the
//     other's exit status) and ends with 125 without running the script,
//   - runs the script in the background and waits for it (so a TERM reaches the wrapper's trap
//     at once rather than after the script ends),
//   - enforces the walltime with a watchdog that marks <run_dir>/local_timeout and sends TERM
//     to the whole group (the wrapper survives it through its trap),
//   - when the script has ended, sends TERM to what is left of its group (the watchdog and its
//     sleep, anything the script left running), as a scheduler ends a job's processes,
//   - when the script exits 75 (checkpointed) and was not cancelled, continues the job itself
//     (issue 25: nobody need run dljob): it creates <run_dir>/continuation.<token> only if
//     absent (a `dljob status` may have decided first) with this attempt's end and either the
//     next attempt's token or why not ("limit": attempt > max_continuations; "no progress": no
//     newer entry in <run_dir>/checkpoints than at its start), then, if continuing, keeps this
//     attempt's log as job.attempt<N>.log, removes this attempt's end files and starts a new
//     wrapper (setsid) for the next attempt, and adds its pid to the record. The next
//     `dljob status` records those attempts (app/jobs/continuation.cpp); nothing here writes
//     SQLite,
//   - writes the script's exit status to <run_dir>/local_exit (temp file + rename), unless it
//     continued the job (the record holds this attempt's end; local_exit would read as the
//     next attempt's).
// All user values reach the wrapper as positional arguments, never inside its code.
//
// A pid outlives its process: once the job's group is gone the number is handed out again, and
// a group with that number may be an unrelated one. So a group is taken for the job's only when
// its leader has the start time recorded at submit (secondary_id), or, without one, when a
// member carries the job's token (DLJOB_JOB_TOKEN in its environment, or the token as an
// argument: the wrapper's command line). Neither status nor cancel acts on another group.
//
// State table:
//   the job's group alive, no local_exit       -> RUNNING ("running")
//   the job's group alive, local_waiting        -> PENDING ("waiting", reason "dependency")
//   local_never_ran present                     -> CANCELLED ("dependency never satisfied")
//   local_exit = 0                              -> COMPLETED
//   local_timeout present                       -> TIMEOUT (native "walltime")
//   local_exit != 0                             -> FAILED (exit code kept)
//   no group of the job's and no local_exit (killed, machine rebooted) -> absent: the job's own
//     exit_code file or UNKNOWN decides
// A cancel is recorded by the caller (CANCELLED); the wrapper's later exit is then ignored.
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/local.hpp>
#include <dljob/schedulers/support.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

namespace dljob::schedulers {

// Defined at the end of this file; listed in scheduler_table.cpp.
const SchedulerFamily& local_family();
namespace {

constexpr std::string_view wrapper = R"sh(
script=$1 run_dir=$2 walltime=$3 token=$4 attempt=$5 max_continuations=$6 log=$7
after_dir=${8:-} after_ok=${9:-}
printf 'pid=%s\ntoken=%s\n' "$$" "$token" >"$run_dir/.local_job.$$" &&
  mv -f "$run_dir/.local_job.$$" "$run_dir/local_job"
if [ -n "$after_dir" ]; then
  : >"$run_dir/local_waiting"
  gone=0
  while [ ! -e "$after_dir/local_exit" ] && [ "$gone" -lt 5 ]; do
    other=$(sed -n 's/^pid=//p' "$after_dir/local_job" 2>/dev/null)
    if [ -n "$other" ] && kill -0 "$other" 2>/dev/null; then gone=0; else gone=$((gone + 1)); fi
    sleep 2
  done
  after_rc=$(cat "$after_dir/local_exit" 2>/dev/null)
  rm -f "$run_dir/local_waiting"
  if [ "$after_ok" = 1 ] && [ "$after_rc" != 0 ]; then
    printf '%s\n' "${after_rc:-none}" >"$run_dir/local_never_ran"
    printf '125\n' >"$run_dir/.local_exit.tmp" && mv -f "$run_dir/.local_exit.tmp" "$run_dir/local_exit"
    exit 125
  fi
fi
# The newest checkpoint (time, size, name): a continuation needs a newer one than at the start.
newest_checkpoint() {
  find "$run_dir/checkpoints" -mindepth 1 -maxdepth 1 -printf '%T@ %s %f\n' 2>/dev/null |
    sort -n | tail -n 1
}
start_mark=$(newest_checkpoint)
bash "$script" &
child=$!
terminated=
trap 'terminated=1; kill -TERM "$child" 2>/dev/null' TERM
if [ "$walltime" -gt 0 ]; then
  (
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    sleep "$walltime" &
    nap=$!
    wait "$nap" || exit 0
    # Only while this attempt's wrapper still runs: a watchdog left behind must not mark a
    # chain that has moved on (or ended) as timed out.
    kill -0 $$ 2>/dev/null || exit 0
    : >"$run_dir/local_timeout"
    kill -TERM 0
  ) </dev/null &
fi
while :; do
  wait "$child"; rc=$?
  kill -0 "$child" 2>/dev/null || break
done
trap '' TERM
kill -TERM 0 2>/dev/null
# Exit 75: checkpointed, to be resumed. Unless cancelled (a TERM that was not the watchdog's),
# the decision goes into continuation.<token>, created only if absent (one decision per attempt,
# whether this wrapper or a `dljob status` makes it): the next attempt's token, or why not.
continued= decided_elsewhere=
if [ "$rc" -eq 75 ] && { [ -z "$terminated" ] || [ -e "$run_dir/local_timeout" ]; }; then
  record="exit_code=$rc
timeout=$([ -e "$run_dir/local_timeout" ] && echo 1 || echo 0)
ended=$(date +%s)
attempt=$attempt
metrics_bytes=$(stat -c %s "$run_dir/metrics.jsonl" 2>/dev/null || echo -1)"
  next=
  if [ "$attempt" -gt "$max_continuations" ]; then
    record="$record
declined=limit"
  elif [ "$(newest_checkpoint)" = "$start_mark" ]; then
    record="$record
declined=no progress"
  else
    next=$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n')
    record="$record
next_token=$next"
  fi
  if ! (set -C && printf '%s\n' "$record" >"$run_dir/continuation.$token") 2>/dev/null; then
    decided_elsewhere=1
  elif [ -n "$next" ]; then
    # As dljob does for a continuation: this attempt's log under its own name, and nothing of
    # this attempt's end left where the next one's will be read.
    mv -f "$log" "$run_dir/job.attempt$attempt.log" 2>/dev/null
    rm -f "$run_dir/exit_code" "$run_dir/job_identity" "$run_dir/local_exit" "$run_dir/local_timeout"
    # TERM back to its default first: this wrapper ignores it from here on, and a signal
    # ignored when bash starts can never be trapped again, so the next attempt's wrapper, its
    # watchdog and the training would all be deaf to a cancel.
    (
      trap - TERM
      DLJOB_JOB_TOKEN=$next exec setsid bash -c "$BASH_EXECUTION_STRING" dljob-local "$script" \
        "$run_dir" "$walltime" "$next" "$((attempt + 1))" "$max_continuations" "$log"
    ) </dev/null >>"$log" 2>&1 &
    printf '%s\npid=%s\n' "$record" "$!" >"$run_dir/.continuation.$token.tmp" &&
      mv -f "$run_dir/.continuation.$token.tmp" "$run_dir/continuation.$token"
    continued=1
  fi
fi
# A continued attempt's end is in its continuation record, and a `dljob status` that decided
# first (it saw the script's exit_code) may have started the next attempt already: local_exit
# would read as the next attempt's end.
if [ -z "$continued" ] && [ -z "$decided_elsewhere" ]; then
  printf '%s\n' "$rc" >"$run_dir/.local_exit.tmp" && mv -f "$run_dir/.local_exit.tmp" "$run_dir/local_exit"
fi
exit "$rc"
)sh";

// Whether a process carries the job's token: in its environment (the wrapper's and everything
// it starts), or as an argument (the wrapper's command line).
bool carries_token(const ProcessInfo& process, const std::string& token) {
    if (token.empty()) {
        return false;
    }
    const std::string entry = "DLJOB_JOB_TOKEN=" + token;
    return std::find(process.environment.begin(), process.environment.end(), entry) !=
               process.environment.end() ||
           std::find(process.command_line.begin(), process.command_line.end(), token) !=
               process.command_line.end();
}

// Whether process group `pgid` is the job's (see the top of this file), not a later group that
// got the same number.
bool is_job_group(const JobRef& job, int pgid, const std::vector<ProcessInfo>& processes) {
    // The wrapper itself, found by its pid even in the instant before its setsid.
    const auto leader = std::find_if(processes.begin(), processes.end(),
                                     [&](const auto& p) { return p.pid == pgid; });
    if (leader != processes.end() && !job.secondary_id.empty()) {
        return std::to_string(leader->start_ticks) == job.secondary_id;
    }
    return std::any_of(processes.begin(), processes.end(), [&](const auto& p) {
        return p.pgid == pgid && carries_token(p, job.token);
    });
}

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
    for (const auto& stale : {exit_file, timeout_file, job_file, waiting_file, never_ran_file}) {
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
                     std::to_string(request.walltime_s),
                     request.token,
                     std::to_string(request.attempt),
                     std::to_string(request.max_continuations)};
    detached.cwd = request.run_dir;
    detached.output_path = request.log_path.empty()
                               ? (std::filesystem::path(request.run_dir) / log_file).string()
                               : request.log_path;
    detached.argv.push_back(detached.output_path);
    if (request.after) {
        detached.argv.insert(detached.argv.end(),
                             {request.after->run_dir, request.after->ok ? "1" : "0"});
    }
    detached.env = {{"DLJOB_JOB_TOKEN", request.token}, {"DLJOB_RUN_DIR", request.run_dir}};
    auto pid = m_runner.spawn_detached(detached);
    if (!pid) {
        return fail(pid.error());
    }
    // The wrapper's start time makes its pid a name that cannot be reused. A wrapper that has
    // already ended has none to record; its group is then recognised by the token.
    std::string started;
    if (auto processes = m_runner.list_processes()) {
        for (const auto& process : *processes) {
            if (process.pid == *pid) {
                started = std::to_string(process.start_ticks);
            }
        }
    }
    return Submission{std::to_string(*pid), started};
}

Result<std::map<std::string, SchedulerStatus>>
LocalScheduler::poll(const std::vector<JobRef>& jobs) {
    std::map<std::string, SchedulerStatus> found;
    std::optional<std::vector<ProcessInfo>> processes; // listed once, when a job needs it
    auto ended = [&](const JobRef& job) {
        const std::filesystem::path dir(job.run_dir);
        if (auto other = util::read_file(dir / never_ran_file)) {
            SchedulerStatus never;
            never.state = JobState::cancelled;
            never.native_state = "dependency";
            never.reason = fmt::format("dependency never satisfied (the job it waited for ended "
                                       "with exit {})",
                                       trim(*other));
            found[job.scheduler_id] = never;
            return true;
        }
        if (auto text = util::read_file(dir / exit_file)) {
            if (auto code = parse_int(*text)) {
                found[job.scheduler_id] =
                    map_local_exit(*code, std::filesystem::exists(dir / timeout_file));
                return true;
            }
        }
        return false;
    };
    for (const auto& job : jobs) {
        if (ended(job)) {
            continue;
        }
        auto pid = parse_int(job.scheduler_id);
        if (!pid) {
            continue;
        }
        if (!processes) {
            auto listed = m_runner.list_processes();
            if (!listed) {
                return fail(listed.error());
            }
            processes = std::move(*listed);
        }
        if (is_job_group(job, *pid, *processes)) {
            SchedulerStatus running;
            running.state = JobState::running;
            running.native_state = "running";
            if (std::filesystem::exists(std::filesystem::path(job.run_dir) / waiting_file)) {
                running.state = JobState::pending;
                running.native_state = "waiting";
                running.reason = "dependency";
            }
            found[job.scheduler_id] = running;
        } else {
            // Gone from the listing: it may have written local_exit and exited since the first
            // look, which must not read as a job that vanished without one.
            (void)ended(job);
        }
    }
    return found;
}

Result<std::optional<Submission>> LocalScheduler::find_by_token(const JobRef& job) {
    // The wrapper's own record, written before it starts the script: found even after the job
    // ended. An earlier attempt's in the same run directory has another token.
    if (auto text = util::read_file(std::filesystem::path(job.run_dir) / job_file)) {
        std::optional<int> pid;
        std::string token;
        for (auto line : split_lines(*text)) {
            line = trim(line);
            if (line.rfind("pid=", 0) == 0) {
                pid = parse_int(line.substr(4));
            } else if (line.rfind("token=", 0) == 0) {
                token = std::string(line.substr(6));
            }
        }
        if (pid && *pid > 1 && !job.token.empty() && token == job.token) {
            return std::optional<Submission>{Submission{std::to_string(*pid), ""}};
        }
    }
    // Started but not yet written it: a live process with the token in its environment. The
    // wrapper leads the group; any other member names the same group.
    auto processes = m_runner.list_processes();
    if (!processes) {
        return fail(processes.error());
    }
    std::optional<Submission> found;
    for (const auto& process : *processes) {
        if (!carries_token(process, job.token)) {
            continue;
        }
        if (process.pid == process.pgid) {
            return std::optional<Submission>{
                Submission{std::to_string(process.pid), std::to_string(process.start_ticks)}};
        }
        found = Submission{std::to_string(process.pgid), ""};
    }
    return found;
}

Result<void> LocalScheduler::cancel(const JobRef& job) {
    auto pid = parse_int(job.scheduler_id);
    if (!pid || *pid <= 1) {
        return fail(ErrorCode::internal, fmt::format("bad local job id '{}'", job.scheduler_id));
    }
    // Never signal a group that is not the job's: its number may have gone to another.
    auto processes = m_runner.list_processes();
    if (!processes) {
        return fail(processes.error());
    }
    if (!is_job_group(job, *pid, *processes) || !m_runner.signal_group(*pid, SIGTERM)) {
        return fail(ErrorCode::not_found,
                    fmt::format("local job {} is no longer running", job.scheduler_id));
    }
    return {};
}

namespace {

// Rendering: no directives; the wrapper above runs `/bin/bash SCRIPT` and continues the job.
class LocalFamily final : public SchedulerFamily {
public:
    [[nodiscard]] std::string_view name() const override { return "local"; }
    [[nodiscard]] bool runs_on_this_machine() const override { return true; }
    [[nodiscard]] std::optional<PartitionProblem>
    check_partition(const Partition& partition) const override {
        if (partition.max_nodes != 1) {
            return PartitionProblem{
                "max_nodes", "the local scheduler runs on this one machine; expected max_nodes: 1",
                ""};
        }
        return std::nullopt;
    }
    [[nodiscard]] std::string_view template_name() const override { return "local.sh"; }
    [[nodiscard]] std::string_view job_id_expression() const override { return R"("local-$$")"; }
    [[nodiscard]] bool log_in_directives() const override { return false; }
    [[nodiscard]] bool job_continues_itself() const override { return false; }
    [[nodiscard]] SubmitPlan plan(const JobFacts& facts) const override {
        SubmitPlan plan;
        plan.submit_argv = {"/bin/bash", facts.script};
        return plan;
    }
    [[nodiscard]] std::vector<std::string>
    dependency_options(const JobDependency& /*after*/) const override {
        return {}; // the wrapper waits
    }
    [[nodiscard]] Result<InteractivePlan>
    interactive(const InteractiveRequest& request) const override {
        InteractivePlan plan;
        plan.argv = {"/bin/bash", "--rcfile", request.rc_path, "-i"};
        return plan;
    }
    [[nodiscard]] DoctorCommands doctor_commands(const Partition& /*partition*/,
                                                 const std::string& /*user*/) const override {
        return {{"bash", "setsid"}, {"bash", "--version"}, {}, {}, {}};
    }
    [[nodiscard]] std::unique_ptr<Scheduler>
    make_adapter(ProcessRunner& runner, const SchedulerOptions& options) const override {
        return std::make_unique<LocalScheduler>(runner, options);
    }
};

} // namespace

const SchedulerFamily& local_family() {
    static const LocalFamily family;
    return family;
}

} // namespace dljob::schedulers
