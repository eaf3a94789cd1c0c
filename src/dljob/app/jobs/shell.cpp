#include <dljob/app/data/stage.hpp>
#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/job_setup.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/jobs/shell.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/render/job_script.hpp>
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/interactive.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/paths.hpp>

#include <fmt/format.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ostream>
#include <sstream>
#include <thread>

namespace dljob::app {
namespace {

constexpr std::chrono::milliseconds wait_slice{200};
constexpr std::chrono::seconds release_wait{15};

// ---------------------------------------------------------------- terminal --

std::atomic<int> g_hangup{0}; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void record_hangup(int signal) {
    g_hangup.store(signal);
}

// While the session runs, dljob must outlive a hangup or a TERM long enough to release the
// allocation. Handlers (not SIG_IGN) so the child, after exec, gets the default dispositions.
class PosixTerminal final : public SessionTerminal {
public:
    Result<int> start(const std::vector<std::string>& argv) override {
        struct sigaction action {};
        action.sa_handler = record_hangup; // NOLINT(cppcoreguidelines-pro-type-union-access)
        sigemptyset(&action.sa_mask);
        ::sigaction(SIGHUP, &action, nullptr);
        ::sigaction(SIGTERM, &action, nullptr);
        m_tty = ::isatty(STDIN_FILENO) != 0 ? STDIN_FILENO : -1;

        std::vector<char*> args;
        args.reserve(argv.size() + 1);
        for (const auto& arg : argv) {
            args.push_back(
                const_cast<char*>(arg.c_str())); // NOLINT(cppcoreguidelines-pro-type-const-cast)
        }
        args.push_back(nullptr);
        int error_pipe[2] = {-1, -1}; // NOLINT(modernize-avoid-c-arrays)
        if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
            return fail(ErrorCode::io, fmt::format("pipe: {}", std::strerror(errno)));
        }
        const pid_t pid = ::fork();
        if (pid < 0) {
            ::close(error_pipe[0]);
            ::close(error_pipe[1]);
            return fail(ErrorCode::io, fmt::format("fork: {}", std::strerror(errno)));
        }
        if (pid == 0) {
            // The child: its own process group, in the terminal's foreground (Ctrl-C and the
            // tty belong to the session, as for a job a shell starts).
            ::setpgid(0, 0);
            if (m_tty >= 0) {
                ::signal(SIGTTOU, SIG_IGN);
                ::tcsetpgrp(m_tty, ::getpgrp());
            }
            for (int sig : {SIGTTOU, SIGTTIN, SIGTSTP, SIGINT, SIGQUIT, SIGHUP, SIGTERM}) {
                ::signal(sig, SIG_DFL);
            }
            ::execvp(args[0], args.data());
            const int code = errno;
            (void)::write(error_pipe[1], &code, sizeof code);
            ::_exit(127);
        }
        ::close(error_pipe[1]);
        ::setpgid(pid, pid); // both sides, whichever runs first
        int code = 0;
        const auto got = ::read(error_pipe[0], &code, sizeof code);
        ::close(error_pipe[0]);
        if (got == static_cast<ssize_t>(sizeof code)) {
            ::waitpid(pid, nullptr, 0);
            take_terminal_back();
            return fail(ErrorCode::scheduler_unreachable,
                        fmt::format("cannot run {}: {}", argv.front(), std::strerror(code)),
                        "is the scheduler's client installed and on PATH?");
        }
        return static_cast<int>(pid);
    }

    std::optional<int> wait_for(int pid, std::chrono::milliseconds slice) override {
        const auto deadline = std::chrono::steady_clock::now() + slice;
        while (true) {
            int status = 0;
            const pid_t done = ::waitpid(pid, &status, WNOHANG);
            if (done == pid) {
                take_terminal_back();
                if (WIFEXITED(status)) {
                    return WEXITSTATUS(status);
                }
                return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
            }
            if (done < 0 && errno != EINTR) {
                take_terminal_back();
                return 1;
            }
            if (std::chrono::steady_clock::now() >= deadline || g_hangup.load() != 0) {
                return std::nullopt;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }

    int hangup_signal() override { return g_hangup.load(); }

    void signal_child(int pid, int signal) override { ::kill(-pid, signal); }

private:
    void take_terminal_back() const {
        if (m_tty >= 0) {
            // dljob is a background group now: without ignoring SIGTTOU, tcsetpgrp stops it.
            struct sigaction ignore {};
            struct sigaction old {};
            ignore.sa_handler = SIG_IGN; // NOLINT(cppcoreguidelines-pro-type-union-access)
            sigemptyset(&ignore.sa_mask);
            ::sigaction(SIGTTOU, &ignore, &old);
            ::tcsetpgrp(m_tty, ::getpgrp());
            ::sigaction(SIGTTOU, &old, nullptr);
        }
    }

    int m_tty = -1;
};

// ----------------------------------------------------------------- request --

Result<Recipe> session_recipe(const ShellOptions& options, const SiteProfile& site,
                              std::vector<std::string>& notes) {
    Recipe recipe;
    if (!options.recipe.empty()) {
        auto loaded = config::load_recipe(options.recipe);
        if (!loaded) {
            return fail(loaded.error());
        }
        recipe = std::move(*loaded);
    } else {
        recipe.name = "interactive";
        recipe.kind = RecipeKind::command;
        recipe.command.argv = {"/bin/bash"};
    }
    Resources& want = recipe.resources;
    if (options.gpus) {
        if (*options.gpus < 0) {
            return fail(ErrorCode::usage, fmt::format("--gpus {}: not a GPU count", *options.gpus));
        }
        want.gpus = *options.gpus;
    }
    if (options.nodes) {
        if (*options.nodes < 1) {
            return fail(ErrorCode::usage, fmt::format("--nodes {}: at least 1", *options.nodes));
        }
        want.nodes = options.nodes;
    }
    // --gpus counts GPUs, not GPUs per node: where a node has fewer (Big Red II's XK7 nodes
    // have one K20 each), the session gets as many nodes as it takes, as a user would ask
    // with -l nodes=4 (and as resolve_resources gives a recipe that leaves nodes: out; set here
    // so --cores counts per node). Uneven splits are left to resolve_resources to refuse with
    // its hint.
    const Partition* partition = site.find_partition(options.partition);
    if (options.gpus && !want.nodes && partition != nullptr && partition->node.gpus > 0 &&
        want.gpus > partition->node.gpus && want.gpus % partition->node.gpus == 0) {
        want.nodes = want.gpus / partition->node.gpus;
        notes.push_back(fmt::format("{} GPUs on nodes of {} GPU(s) each: {} nodes", want.gpus,
                                    partition->node.gpus, *want.nodes));
    }
    if (options.cores) {
        if (*options.cores < 1) {
            return fail(ErrorCode::usage, fmt::format("--cores {}: at least 1", *options.cores));
        }
        if (want.gpus > 0) {
            const int per_node_gpus = want.gpus / want.nodes.value_or(1);
            want.cores_per_gpu = std::max(1, *options.cores / std::max(1, per_node_gpus));
        } else {
            want.cores = options.cores;
        }
    }
    if (!options.memory.empty()) {
        auto memory = MemorySize::parse(options.memory);
        if (!memory) {
            return fail(ErrorCode::usage,
                        fmt::format("--mem {}: {}", options.memory, memory.error().message));
        }
        want.memory = *memory;
    }
    if (!options.time.empty()) {
        auto walltime = Walltime::parse(options.time);
        if (!walltime) {
            return fail(ErrorCode::usage,
                        fmt::format("--time {}: {}", options.time, walltime.error().message));
        }
        want.walltime = *walltime;
    }
    if (options.recipe.empty() && want.gpus > 0) {
        // A GPU session loads what a GPU recipe needs, where the site says how.
        for (const char* need : {"cuda", "cudnn"}) {
            if (site.modules.needs.count(need) > 0) {
                recipe.needs.emplace_back(need);
            }
        }
    }
    return recipe;
}

std::string identity_job_id(const std::filesystem::path& run_dir) {
    auto text = util::read_file(run_dir / "job_identity");
    if (!text) {
        return {};
    }
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("job_id=", 0) == 0) {
            return line.substr(7);
        }
    }
    return {};
}

bool active(JobState state) {
    return state == JobState::pending || state == JobState::running;
}

// Releases the allocation if the scheduler still has it: cancel, then wait (bounded) until it
// is no longer pending or running. Errors become warnings: the row still ends. Returns the
// state the scheduler showed before dljob did anything (CANCELLED: someone else, or salloc
// itself after a Ctrl-C, already cancelled it).
std::optional<JobState> release(Scheduler& scheduler, const JobRef& ref, std::ostream& err,
                                std::int64_t id) {
    auto polled = scheduler.poll({ref});
    std::optional<JobState> seen;
    if (polled) {
        auto it = polled->find(ref.scheduler_id);
        if (it != polled->end()) {
            seen = it->second.state;
        }
        if (!seen || !active(*seen)) {
            return seen;
        }
    }
    auto cancelled = scheduler.cancel(ref);
    if (!cancelled) {
        err << fmt::format("dljob: warning: session {}: cancelling allocation {}: {}\n", id,
                           ref.scheduler_id, cancelled.error().message);
        return seen;
    }
    const auto deadline = std::chrono::steady_clock::now() + release_wait;
    while (std::chrono::steady_clock::now() < deadline) {
        auto again = scheduler.poll({ref});
        if (!again) {
            return seen;
        }
        auto it = again->find(ref.scheduler_id);
        if (it == again->end() || !active(it->second.state)) {
            return seen;
        }
        std::this_thread::sleep_for(wait_slice);
    }
    err << fmt::format("dljob: warning: session {}: allocation {} still listed after the cancel\n",
                       id, ref.scheduler_id);
    return seen;
}

} // namespace

std::unique_ptr<SessionTerminal> make_posix_terminal() {
    return std::make_unique<PosixTerminal>();
}

namespace {

// A session decided before anything is allocated or written: what --dry-run shows, and the
// files and command that running it takes.
struct SessionPlan {
    ShellOutcome outcome; // argv, notes, rc text, the row to be (id 0)
    PreparedJob prepared;
    std::vector<RunFile> run_files;
};

// The family's interactive command for a prepared session, after the family's probe where it
// has one (Torque: whether qsub is Slurm's wrapper, which only running it tells).
Result<schedulers::InteractivePlan> interactive_plan(JobContext& context,
                                                     const PreparedJob& prepared,
                                                     const Partition* partition,
                                                     schedulers::InteractiveRequest& request) {
    const std::filesystem::path& run_dir = prepared.request.run_dir;
    request.site = &prepared.request.site;
    request.partition = partition;
    request.rendered = prepared.rendered;
    request.token = prepared.request.job_token;
    request.rc_path = (run_dir / "session.rc").string();
    request.session_path = (run_dir / "session.sh").string();
    ProcessRequest probe;
    probe.argv = schedulers::family_of(prepared.rendered.scheduler).interactive_probe();
    if (!probe.argv.empty()) {
        probe.timeout = std::chrono::seconds(10);
        if (auto probed = context.runner().run(probe); probed && probed->exit_code == 0) {
            request.probe_output = probed->out;
        }
    }
    auto plan = schedulers::plan_interactive(request);
    if (!plan) {
        return fail(plan.error());
    }
    if (plan->argv.empty()) {
        return fail(ErrorCode::scheduler_rejected, plan->refusal, plan->alternative);
    }
    return plan;
}

Result<SessionPlan> plan_session(JobContext& context, const ShellOptions& options) {
    auto site = resolve_site(options);
    if (!site) {
        return fail(site.error());
    }
    std::vector<std::string> recipe_notes;
    auto recipe = session_recipe(options, *site, recipe_notes);
    if (!recipe) {
        return fail(recipe.error());
    }
    JobInputs inputs;
    inputs.run_stem = options.recipe.empty() ? "interactive" : recipe->name;
    inputs.recipe = *recipe;
    inputs.site = *site;
    inputs.partition = options.partition;
    inputs.account = options.account;
    inputs.job_name = "interactive";
    inputs.recipe_path = options.recipe;
    // The same checks and the same options as a submit of these resources.
    auto prepared = prepare_job(std::move(inputs));
    if (!prepared) {
        return fail(prepared.error());
    }
    const RenderedJob& rendered = prepared->rendered;
    const Partition* partition = site->find_partition(options.partition); // render checked it
    schedulers::InteractiveRequest request;
    auto plan = interactive_plan(context, *prepared, partition, request);
    if (!plan) {
        return fail(plan.error());
    }

    schedulers::SessionFiles files;
    files.site = site->name;
    files.scheduler = rendered.scheduler;
    files.token = prepared->request.job_token;
    files.rc_path = request.rc_path;
    files.launch = plan->launch;
    files.dljob_binary = default_dljob_binary().string();
    files.stage = !options.recipe.empty() && recipe->data.stage_to != "none" &&
                  site->find_storage(recipe->data.stage_to) != nullptr;
    files.keep_staged = files.stage && recipe->data.keep_staged;
    files.notes = plan->notes;
    auto rc = schedulers::session_rc(files, rendered.script);
    if (!rc) {
        return fail(rc.error());
    }

    SessionPlan session;
    ShellOutcome& outcome = session.outcome;
    outcome.site = site->name;
    outcome.partition = partition->name;
    outcome.scheduler = rendered.scheduler;
    outcome.argv = plan->argv;
    outcome.command_line = render::command_line(plan->argv);
    outcome.notes = recipe_notes;
    outcome.notes.insert(outcome.notes.end(), rendered.notes.begin(), rendered.notes.end());
    outcome.notes.insert(outcome.notes.end(), plan->notes.begin(), plan->notes.end());
    outcome.rc_path = request.rc_path;
    outcome.rc_text = *rc;
    outcome.job = prepared->job;
    outcome.job.name = "interactive";
    outcome.job.script_path = request.session_path;
    outcome.job.submit_argv.clear();
    // The run directory as a batch job's (the job script too: $DLJOB_SCRIPT).
    session.run_files = {{rendered.script_name, rendered.script, true},
                         {std::filesystem::path(request.rc_path).filename(), *rc, true},
                         {std::filesystem::path(request.session_path).filename(),
                          schedulers::session_script(request.rc_path), true}};
    if (!options.recipe.empty()) {
        session.run_files.push_back({"recipe.yaml", util::read_file(options.recipe).value_or("")});
    }
    session.prepared = std::move(*prepared);
    return session;
}

// What the session's wait saw.
struct SessionRun {
    int exit_status = 0;
    int hangup = 0;       // the signal that ended dljob's terminal or told it to stop; 0: none
    bool started = false; // the session's shell ran (its rc wrote job_identity)
    JobRef ref;
    bool id_recorded = false; // phase `submitted` (a refused session gets it too, id empty)
};

// The local session's id is its pid, and its start time tells status and cancel that the pid
// is still this session's (the local scheduler acts on no group whose number went to another
// process).
void record_local_session(JobContext& context, std::int64_t id, int pid, SessionRun& run) {
    run.ref.scheduler_id = std::to_string(pid);
    if (auto processes = context.runner().list_processes()) {
        for (const auto& process : *processes) {
            if (process.pid == pid) {
                run.ref.secondary_id = std::to_string(process.start_ticks);
            }
        }
    }
    run.id_recorded =
        context.store()
            .mark_submitted(id, run.ref.scheduler_id, run.ref.secondary_id, util::unix_now())
            .has_value();
}

// Once the shell has started: its allocation's id (by token, else from job_identity) and the
// row RUNNING.
void record_started(JobContext& context, Scheduler& scheduler, std::int64_t id, bool local,
                    const std::filesystem::path& run_dir, SessionRun& run) {
    run.started = true;
    JobStore& store = context.store();
    if (!local) {
        auto found = scheduler.find_by_token(run.ref);
        if (found && found->has_value()) {
            run.ref.scheduler_id = (*found)->scheduler_id;
            run.ref.secondary_id = (*found)->secondary_id;
        } else {
            run.ref.scheduler_id = identity_job_id(run_dir);
        }
        run.id_recorded =
            store.mark_submitted(id, run.ref.scheduler_id, run.ref.secondary_id, util::unix_now())
                .has_value();
    }
    SchedulerStatus running;
    running.state = JobState::running;
    running.native_state = "interactive";
    (void)store.update_state(id, running, util::unix_now());
}

// Waits for the session's command to end; a hangup or stop signal to dljob ends it (SIGHUP,
// then SIGKILL after 10 s).
void wait_for_session(JobContext& context, Scheduler& scheduler, SessionTerminal& terminal,
                      std::int64_t id, int pid, bool local, const std::filesystem::path& run_dir,
                      SessionRun& run) {
    std::error_code ec;
    std::optional<int> status;
    while (!status) {
        status = terminal.wait_for(pid, wait_slice);
        if (!run.started && std::filesystem::exists(run_dir / "job_identity", ec)) {
            record_started(context, scheduler, id, local, run_dir, run);
        }
        run.hangup = terminal.hangup_signal();
        if (run.hangup != 0 && !status) {
            terminal.signal_child(pid, SIGHUP);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!status && std::chrono::steady_clock::now() < deadline) {
                status = terminal.wait_for(pid, wait_slice);
            }
            if (!status) {
                terminal.signal_child(pid, SIGKILL);
                status = terminal.wait_for(pid, std::chrono::seconds(5));
            }
            break;
        }
    }
    run.exit_status = status.value_or(128 + SIGKILL);
}

// How the row ends, from what the wait saw and what the scheduler showed before the release.
SchedulerStatus session_end(const SessionRun& run, const std::filesystem::path& run_dir,
                            std::optional<JobState> seen, const std::string& command) {
    std::error_code ec;
    SchedulerStatus end;
    end.exit_code = run.exit_status;
    if (run.hangup != 0) {
        end.state = JobState::cancelled;
        end.native_state = "hangup";
        end.reason = fmt::format("dljob got signal {}; the allocation was released", run.hangup);
    } else if (run.started && (std::filesystem::exists(run_dir / "cancelled", ec) ||
                               cancel_claimed(run_dir, run.ref.token))) {
        // The session's rc traps SIGTERM and leaves this mark (dljob cancel, scancel, qdel);
        // `dljob cancel` also claims the record before it signals, so a shell that exits
        // before its trap writes the mark still ends as the cancel the user caused.
        end.state = JobState::cancelled;
        end.native_state = "cancelled";
        end.reason = "the session's shell got SIGTERM (dljob cancel, or the scheduler)";
    } else if (run.started) {
        end.state = JobState::completed;
        end.native_state = "exited";
        end.reason = fmt::format("the shell exited with status {}", run.exit_status);
    } else if (seen == JobState::cancelled) {
        end.state = JobState::cancelled;
        end.native_state = "no session";
        end.reason = "the allocation was cancelled before the shell started (Ctrl-C, or by the "
                     "scheduler or its admins)";
    } else {
        end.state = JobState::failed;
        end.native_state = "no session";
        end.reason = fmt::format("{} exited with status {} before the shell started", command,
                                 run.exit_status);
    }
    return end;
}

// Whatever happened, nothing stays allocated: the allocation is found by token when its id
// was never learnt (refused, interrupted while pending, shell failed to start). Then the row
// ends.
SchedulerStatus end_session(JobContext& context, Scheduler& scheduler, std::int64_t id, bool local,
                            const std::filesystem::path& run_dir, const std::string& command,
                            SessionRun& run, std::ostream& err) {
    std::optional<JobState> seen;
    if (!local) {
        if (run.ref.scheduler_id.empty()) {
            auto found = scheduler.find_by_token(run.ref);
            if (found && found->has_value()) {
                run.ref.scheduler_id = (*found)->scheduler_id;
                run.ref.secondary_id = (*found)->secondary_id;
            }
        }
        if (!run.ref.scheduler_id.empty()) {
            seen = release(scheduler, run.ref, err, id);
        }
    }
    JobStore& store = context.store();
    const std::int64_t now = util::unix_now();
    if (!run.id_recorded) {
        // The id found at the end (an allocation never used), or none: the row leaves the
        // `submitting` phase either way, so no later `dljob status` reconciles it again.
        (void)store.mark_submitted(id, run.ref.scheduler_id, run.ref.secondary_id, now);
    }
    SchedulerStatus end = session_end(run, run_dir, seen, command);
    (void)store.update_state(id, end, now);
    return end;
}

// The verb's answer: the outcome, or the error that says why there was no session.
Result<ShellOutcome> session_result(ShellOutcome outcome, const SessionRun& run, JobState ended,
                                    const std::string& command, std::ostream& err) {
    const std::int64_t id = outcome.job.id;
    if (run.hangup != 0) {
        return fail(ErrorCode::interrupted,
                    fmt::format("session {} ended by signal {}; its allocation was released", id,
                                run.hangup));
    }
    if (!run.started && ended == JobState::cancelled) {
        return fail(ErrorCode::interrupted,
                    fmt::format("no interactive session: the allocation was cancelled before the "
                                "shell started (session {}); nothing is left allocated",
                                id));
    }
    if (!run.started) {
        return fail(ErrorCode::scheduler_rejected,
                    fmt::format("no interactive session: {} exited with status {} before the "
                                "shell started (the scheduler's own message is above); nothing "
                                "is left allocated",
                                command, run.exit_status),
                    fmt::format("session {} is recorded as {}; check the request with 'dljob "
                                "shell --dry-run' and the queue with the site's tools",
                                id, to_string(ended)));
    }
    err << fmt::format("dljob: session {} ended (shell exit {}); allocation released\n", id,
                       run.exit_status);
    return outcome;
}

} // namespace

Result<ShellOutcome> open_shell(JobContext& context, const ShellOptions& options,
                                SessionTerminal& terminal, std::ostream& err) {
    auto session = plan_session(context, options);
    if (!session) {
        return fail(session.error());
    }
    ShellOutcome& outcome = session->outcome;
    if (options.dry_run) {
        return outcome;
    }
    // The store (opened on first use, so a refused shell creates none), the run directory,
    // then the row.
    JobStore& store = context.store();
    const std::filesystem::path& run_dir = session->prepared.request.run_dir;
    auto pending = write_run_dir(run_dir, session->run_files);
    if (!pending) {
        return fail(pending.error());
    }
    outcome.job.created_at = util::unix_now();
    auto created = store.create(outcome.job);
    if (!created) {
        return fail(created.error());
    }
    outcome.job = *created;
    const std::int64_t id = outcome.job.id;
    auto scheduler = context.scheduler(outcome.scheduler);
    if (!scheduler) {
        (void)store.remove(id);
        return fail(scheduler.error());
    }
    pending->keep(); // from here on the row stays, a session that fails to start included

    for (const auto& note : outcome.notes) {
        err << "dljob: note: " << note << '\n';
    }
    err << fmt::format("dljob: session {}: {}\n", id, outcome.command_line) << std::flush;
    auto started = terminal.start(outcome.argv);
    if (!started) {
        SchedulerStatus failed;
        failed.state = JobState::failed;
        failed.native_state = "not started";
        failed.reason = started.error().message;
        (void)store.mark_submitted(id, "", "", util::unix_now());
        (void)store.update_state(id, failed, util::unix_now());
        return fail(started.error());
    }
    const bool local =
        schedulers::family_of(session->prepared.rendered.scheduler).runs_on_this_machine();
    SessionRun run;
    run.ref = JobRef{"", "", run_dir.string(), session->prepared.request.job_token};
    if (local) {
        record_local_session(context, id, *started, run);
    }
    wait_for_session(context, **scheduler, terminal, id, *started, local, run_dir, run);
    const std::string& command = outcome.argv.front();
    const SchedulerStatus end =
        end_session(context, **scheduler, id, local, run_dir, command, run, err);
    if (auto final_job = store.find(id); final_job && final_job->has_value()) {
        outcome.job = **final_job;
    }
    outcome.exit = run.exit_status;
    return session_result(std::move(outcome), run, end.state, command, err);
}

} // namespace dljob::app
