#pragma once
// Runs a piece of a test in a forked child with little memory and an alarm, for tests of the
// bounds on hostile input: without the bound the child runs out of memory or is woken by the
// alarm and the test fails, instead of the test taking gigabytes of the machine's memory or
// waiting forever on a FIFO.

#include <sys/resource.h>
#include <sys/wait.h>

#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <string>

namespace dljob::test {

struct ChildOutcome {
    bool returned = false; // the body returned (no signal, no exception, no exit)
    int signal = 0;        // what ended the child otherwise (SIGALRM: it waited too long)
    std::string output;    // what the body returned
};

// Address space the child may add to what it already maps. The sanitizers reserve terabytes of
// shadow memory up front, so under them the limit is left off (the bound is then checked, only
// not protected against).
inline constexpr std::size_t child_memory = std::size_t{1} << 30;
inline constexpr unsigned child_alarm_seconds = 60;

inline ChildOutcome run_bounded(const std::function<std::string()>& body) {
    std::array<int, 2> fds{};
    if (::pipe(fds.data()) != 0) {
        return {};
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
        std::size_t pages = 0;
        std::ifstream("/proc/self/statm") >> pages;
        const auto limit =
            static_cast<rlim_t>(pages * static_cast<std::size_t>(::getpagesize()) + child_memory);
        const rlimit as{limit, limit};
        ::setrlimit(RLIMIT_AS, &as);
#endif
        ::alarm(child_alarm_seconds);
        std::string out;
        int code = 0;
        try {
            out = body();
        } catch (const std::exception& e) {
            out = std::string("the child threw (out of memory?): ") + e.what();
            code = 2;
        }
        std::size_t written = 0;
        while (written < out.size()) {
            const ssize_t n = ::write(fds[1], out.data() + written, out.size() - written);
            if (n <= 0) {
                ::_exit(3);
            }
            written += static_cast<std::size_t>(n);
        }
        ::_exit(code);
    }
    ::close(fds[1]);
    ChildOutcome outcome;
    std::array<char, 4096> buffer{};
    ssize_t n = 0;
    while ((n = ::read(fds[0], buffer.data(), buffer.size())) > 0) {
        outcome.output.append(buffer.data(), static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    outcome.returned = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (!outcome.returned && outcome.output.empty()) {
        outcome.output = WIFSIGNALED(status)
                             ? "the child was killed by signal " + std::to_string(outcome.signal)
                             : "the child exited " + std::to_string(WEXITSTATUS(status));
    }
    return outcome;
}

} // namespace dljob::test
