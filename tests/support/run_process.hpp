#pragma once
// Runs a command line through /bin/sh and captures its exit code and output, for tests that
// drive the real binaries.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dljob::test {

struct ProcessOutput {
    int exit_code = -1;
    std::string output; // stdout and stderr together, in order
};

inline ProcessOutput run_shell(const std::string& command) {
    ProcessOutput result;
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) {
        return result;
    }
    std::array<char, 4096> buffer{};
    std::size_t n = 0;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
        result.output.append(buffer.data(), n);
    }
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

} // namespace dljob::test
