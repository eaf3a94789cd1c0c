#pragma once
// How dljob runs external programs (sbatch, qstat, the local job wrapper). Schedulers talk to
// this interface only, so unit tests replay recorded output through a fake and the one adapter
// that knows Boost.Process (adapters/process_boost.cpp) stays the only place that forks.

#include <dljob/domain/result.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dljob {

/// One command to run: argv (never through a shell), extra environment, directory, stdin and a
/// deadline after which the whole process group is killed.
struct ProcessRequest {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env; // added to (or replacing in) the inherited environment
    std::string cwd;                        // empty: the caller's directory
    std::string stdin_data;
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

/// What a finished (or killed) command left behind.
struct ProcessResult {
    int exit_code = -1; // 128+N when killed by signal N
    std::string out;
    std::string err;
    bool timed_out = false;
};

/// A program started in its own session that outlives dljob (the local scheduler's jobs).
struct DetachedRequest {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::string cwd;
    std::string output_path; // stdout and stderr are appended here
};

/// A live process of this user, as the system lists it (Linux: /proc). A pid alone does not name
/// a process for long: once its group is gone the number is handed out again, so a job is
/// recognised by what it carries (its environment, its command line) and its start time.
struct ProcessInfo {
    int pid = 0;
    int pgid = 0;
    std::uint64_t start_ticks = 0; // since boot: with the pid, names one process until reboot
    std::vector<std::string> environment; // NAME=VALUE, as it was exec'd
    std::vector<std::string> command_line;
};

class ProcessRunner {
public:
    virtual ~ProcessRunner() = default;

    /// Runs a command to completion or its timeout. An executable that cannot be started is an
    /// error (scheduler_unreachable); a non-zero exit or a timeout is a ProcessResult.
    virtual Result<ProcessResult> run(const ProcessRequest& request) = 0;

    /// Starts a command in a new session (its pid is also its process group id) and returns
    /// the pid without waiting.
    virtual Result<int> spawn_detached(const DetachedRequest& request) = 0;

    /// Whether a process group still has a live (non-zombie) member.
    virtual bool group_alive(int pgid) = 0;

    /// Sends a signal to a whole process group; false when there is no such group.
    virtual bool signal_group(int pgid, int signal) = 0;

    /// This user's live processes (zombies left out). Runners that start nothing locally need
    /// not list anything: the default says so.
    virtual Result<std::vector<ProcessInfo>> list_processes() {
        return fail(ErrorCode::internal, "this process runner cannot list processes");
    }
};

} // namespace dljob
