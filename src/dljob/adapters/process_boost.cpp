#include <dljob/adapters/process_boost.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

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

namespace {

// With read(2), not a stream: a process that exits while it is read makes the read fail with
// ESRCH, which libstdc++'s filebuf throws as an exception.
std::optional<std::string> read_proc_file(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return std::nullopt;
    }
    std::string text;
    std::array<char, 4096> buffer{};
    while (true) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            ::close(fd);
            if (n < 0) {
                return std::nullopt;
            }
            return text;
        }
        text.append(buffer.data(), static_cast<std::size_t>(n));
    }
}

template <typename Number> bool parse_number(const std::string& text, Number& value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size();
}

std::vector<std::string> split_nul(const std::string& text) {
    std::vector<std::string> parts;
    std::size_t begin = 0;
    while (begin < text.size()) {
        const std::size_t end = text.find('\0', begin);
        parts.push_back(text.substr(begin, end == std::string::npos ? end : end - begin));
        if (end == std::string::npos) {
            break;
        }
        begin = end + 1;
    }
    return parts;
}

} // namespace

Result<std::vector<ProcessInfo>> BoostProcessRunner::list_processes() {
    const std::filesystem::path proc("/proc");
    std::error_code error;
    std::filesystem::directory_iterator entries(proc, error);
    if (error) {
        return fail(ErrorCode::io, fmt::format("cannot list /proc: {}", error.message()));
    }
    const uid_t me = ::getuid();
    std::vector<ProcessInfo> processes;
    for (const auto& entry : entries) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        struct stat owner {};
        if (::stat(entry.path().c_str(), &owner) != 0 || owner.st_uid != me) {
            continue; // gone meanwhile, or another user's (never a job of ours)
        }
        // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice threads itrealvalue starttime ...": comm may
        // hold spaces and parentheses, so the fields are counted from its last ')'.
        const auto stat = read_proc_file(entry.path() / "stat");
        if (!stat) {
            continue;
        }
        const auto close = stat->rfind(')');
        if (close == std::string::npos) {
            continue;
        }
        std::istringstream fields(stat->substr(close + 1));
        std::vector<std::string> after_comm;
        for (std::string field; fields >> field && after_comm.size() < 20;) {
            after_comm.push_back(field);
        }
        if (after_comm.size() < 20 || after_comm[0] == "Z" || after_comm[0] == "X") {
            continue; // a zombie runs nothing
        }
        ProcessInfo info;
        if (!parse_number(name, info.pid) || !parse_number(after_comm[2], info.pgid) ||
            !parse_number(after_comm[19], info.start_ticks)) {
            continue;
        }
        info.environment = split_nul(read_proc_file(entry.path() / "environ").value_or(""));
        info.command_line = split_nul(read_proc_file(entry.path() / "cmdline").value_or(""));
        processes.push_back(std::move(info));
    }
    return processes;
}

} // namespace dljob::adapters
