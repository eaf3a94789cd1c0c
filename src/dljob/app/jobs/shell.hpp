#pragma once
// `dljob shell`: an interactive session on a compute node, the same command everywhere.
//
// The request is checked exactly as a submit checks a recipe (the job script is rendered for
// the same resources, so limits, accounts and module names fail the same way, before any
// scheduler is contacted). The session is a row in the job store (name "interactive") from
// before the scheduler is asked until the shell ends; its allocation is found by token and
// released whatever way the session ends (exit, a refused or interrupted allocation, SIGHUP or
// SIGTERM to dljob), and the row ends COMPLETED, FAILED or CANCELLED with the reason.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/sites/resolve_site.hpp>
#include <dljob/domain/job.hpp>
#include <dljob/domain/result.hpp>

#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace dljob::app {

struct ShellOptions : SiteChoice {
    std::optional<int> gpus; // in all; spread over nodes where one node has fewer
    std::optional<int> nodes;
    std::optional<int> cores;     // per node; with GPUs, split evenly over them
    std::string memory;           // "16G"; empty: the recipe's or the scheduler's default
    std::string time;             // walltime; empty: the recipe's or the partition's default
    std::filesystem::path recipe; // empty: a plain session
    bool dry_run = false;
};

/// Runs the session's command in the user's terminal. The POSIX implementation gives the child
/// the terminal's foreground (as a shell does for a job) and records SIGHUP/SIGTERM sent to
/// dljob instead of dying of them, so the allocation can still be released.
class SessionTerminal {
public:
    virtual ~SessionTerminal() = default;
    /// Starts argv (PATH searched) in the foreground; returns its pid.
    virtual Result<int> start(const std::vector<std::string>& argv) = 0;
    /// Waits up to `slice`; the exit status (128+N for signal N) once the child has ended.
    virtual std::optional<int> wait_for(int pid, std::chrono::milliseconds slice) = 0;
    /// SIGHUP or SIGTERM received by dljob since start (0: none).
    virtual int hangup_signal() = 0;
    /// Sends `signal` to the child's process group.
    virtual void signal_child(int pid, int signal) = 0;
};

/// The real terminal (fork/exec, process groups, signal handlers); one per process.
std::unique_ptr<SessionTerminal> make_posix_terminal();

struct ShellOutcome {
    std::vector<std::string> argv; // the command run (or, for --dry-run, that would be)
    std::string command_line;      // argv quoted for a shell, as printed
    std::string rc_text;           // the session's rc file
    std::string rc_path;
    std::vector<std::string> notes;
    std::string site;
    std::string partition;
    std::string scheduler;
    Job job;      // id 0 for a dry run
    int exit = 0; // the shell's exit status
};

/// Checks the request, plans the command and, unless dry_run, runs the session to its end.
/// `err` gets progress lines ("dljob: session N: ...").
Result<ShellOutcome> open_shell(JobContext& context, const ShellOptions& options,
                                SessionTerminal& terminal, std::ostream& err);

} // namespace dljob::app
