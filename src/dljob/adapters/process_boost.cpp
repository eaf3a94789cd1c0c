#include <dljob/adapters/process_boost.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fmt/format.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>

namespace bp = boost::process;

namespace dljob::adapters {
namespace {

bp::environment make_env(const std::map<std::string, std::string>& extra) {
    bp::environment env = boost::this_process::environment();
    for (const auto& [key, value] : extra) {
        env[key] = value;
    }
    return env;
}

/// argv[0] as a path: taken as given when it has a slash, else looked up on PATH.
Result<boost::filesystem::path> find_executable(const std::vector<std::string>& argv) {
    if (argv.empty()) {
        return fail(ErrorCode::internal, "empty command line");
    }
    const std::string& name = argv.front();
    if (name.find('/') != std::string::npos) {
        return boost::filesystem::path(name);
    }
    auto found = bp::search_path(name);
    if (found.empty()) {
        return fail(ErrorCode::scheduler_unreachable,
                    fmt::format("command '{}' not found on PATH", name),
                    "load the scheduler's module or check the site profile's scheduler");
    }
    return found;
}

// Runs in the child between fork and exec: a new process group, so a timeout kills the
// command together with everything it started (srun, perl wrappers, sleeps).
struct NewProcessGroup : bp::extend::handler {
    template <class Executor> void on_exec_setup(Executor& /*exec*/) const { ::setpgid(0, 0); }
};

// The local scheduler's jobs: their own session, so they outlive dljob and a terminal hangup.
struct NewSession : bp::extend::handler {
    template <class Executor> void on_exec_setup(Executor& /*exec*/) const { ::setsid(); }
};

int decode_status(int native) {
    if (WIFEXITED(native)) {
        return WEXITSTATUS(native);
    }
    if (WIFSIGNALED(native)) {
        return 128 + WTERMSIG(native);
    }
    return -1;
}

} // namespace

Result<ProcessResult> BoostProcessRunner::run(const ProcessRequest& request) {
    auto exe = find_executable(request.argv);
    if (!exe) {
        return fail(exe.error());
    }
    std::vector<std::string> args(request.argv.begin() + 1, request.argv.end());

    boost::asio::io_context io;
    std::future<std::string> out;
    std::future<std::string> err;
    // Boost.Process hands on_exit the decoded exit code (WEXITSTATUS, or the signal number).
    int exit_code = -1;
    bool exited = false;
    std::error_code launch_error;
    bp::child child;
    auto on_exit = [&](int status, const std::error_code& /*ec*/) {
        exit_code = status;
        exited = true;
    };
    const std::string cwd = request.cwd.empty() ? "." : request.cwd;
    child = bp::child(*exe, bp::args(args), bp::std_out > out, bp::std_err > err,
                      bp::std_in < boost::asio::buffer(request.stdin_data),
                      bp::env = make_env(request.env), bp::start_dir = cwd, bp::on_exit = on_exit,
                      io, NewProcessGroup{}, bp::error(launch_error));
    if (launch_error) {
        return fail(
            ErrorCode::scheduler_unreachable,
            fmt::format("cannot run '{}': {}", request.argv.front(), launch_error.message()));
    }
    const int pid = child.id();
    io.run_for(request.timeout);
    ProcessResult result;
    if (!io.stopped()) {
        result.timed_out = true;
        ::kill(-pid, SIGKILL);
        // Pipes close once the group is dead; a grandchild that left the group could keep them
        // open, so do not wait for ever.
        io.restart();
        io.run_for(std::chrono::seconds(2));
        io.stop();
    }
    child.detach();
    if (!exited) {
        int status = 0;
        if (::waitpid(pid, &status, 0) == pid) {
            exit_code = decode_status(status);
        }
    }
    result.exit_code = result.timed_out ? 128 + SIGKILL : exit_code;
    using namespace std::chrono_literals;
    if (out.valid() && out.wait_for(0s) == std::future_status::ready) {
        result.out = out.get();
    }
    if (err.valid() && err.wait_for(0s) == std::future_status::ready) {
        result.err = err.get();
    }
    return result;
}

Result<int> BoostProcessRunner::spawn_detached(const DetachedRequest& request) {
    auto exe = find_executable(request.argv);
    if (!exe) {
        return fail(exe.error());
    }
    std::vector<std::string> args(request.argv.begin() + 1, request.argv.end());
    std::error_code launch_error;
    const std::string cwd = request.cwd.empty() ? "." : request.cwd;
    // Appended, not truncated (Boost's path redirection truncates): a job continued in its run
    // directory keeps one log with every attempt's output, as Slurm's --open-mode=append does.
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> output(
        std::fopen(request.output_path.c_str(), "a"), &std::fclose);
    if (!output) {
        return fail(ErrorCode::io, fmt::format("cannot open {} for the job's output: {}",
                                               request.output_path, std::strerror(errno)));
    }
    bp::child child(*exe, bp::args(args),
                    bp::std_in<bp::null, (bp::std_out & bp::std_err)> output.get(),
                    bp::env = make_env(request.env), bp::start_dir = cwd, NewSession{},
                    bp::error(launch_error));
    if (launch_error) {
        return fail(ErrorCode::io, fmt::format("cannot start '{}': {}", request.argv.front(),
                                               launch_error.message()));
    }
    const int pid = child.id();
    child.detach();
    return pid;
}

bool BoostProcessRunner::group_alive(int pgid) {
    if (pgid <= 0) {
        return false;
    }
    // Reap our own finished children first so a zombie does not read as alive.
    int status = 0;
    while (::waitpid(-pgid, &status, WNOHANG) > 0) {
    }
    return ::kill(-pgid, 0) == 0 || errno == EPERM;
}

bool BoostProcessRunner::signal_group(int pgid, int signal) {
    return pgid > 0 && ::kill(-pgid, signal) == 0;
}

} // namespace dljob::adapters
