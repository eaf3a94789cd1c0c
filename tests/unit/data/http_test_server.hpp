#pragma once
// Starts tests/support/http_server.py on a free loopback port for the length of a test: the
// fetch tests talk to a real HTTP server, never to the internet.

#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dljob::test {

class HttpTestServer {
public:
    /// Serves `root`; requests are logged to `log` ("GET PATH RANGE" per line).
    HttpTestServer(const std::filesystem::path& root, const std::filesystem::path& log)
        : m_log(log) {
        int to_child[2];   // NOLINT(cppcoreguidelines-avoid-c-arrays,modernize-avoid-c-arrays)
        int from_child[2]; // NOLINT(cppcoreguidelines-avoid-c-arrays,modernize-avoid-c-arrays)
        if (pipe(to_child) != 0 || pipe(from_child) != 0) {
            throw std::runtime_error("pipe failed");
        }
        const std::string script = std::string(DLJOB_SOURCE_DIR) + "/tests/support/http_server.py";
        m_pid = fork();
        if (m_pid == 0) {
            dup2(to_child[0], 0);
            dup2(from_child[1], 1);
            close(to_child[1]);
            close(from_child[0]);
            execlp("python3", "python3", script.c_str(), root.c_str(), "--log", log.c_str(),
                   static_cast<char*>(nullptr));
            _exit(127);
        }
        close(to_child[0]);
        close(from_child[1]);
        m_stdin = to_child[1];
        FILE* out = fdopen(from_child[0], "r");
        char line[64] = {}; // NOLINT(cppcoreguidelines-avoid-c-arrays,modernize-avoid-c-arrays)
        if (out == nullptr || fgets(line, sizeof line, out) == nullptr ||
            std::sscanf(line, "PORT %d", &m_port) != 1) {
            throw std::runtime_error("tests/support/http_server.py did not start");
        }
        fclose(out);
    }
    ~HttpTestServer() {
        close(m_stdin);
        kill(m_pid, SIGTERM);
        waitpid(m_pid, nullptr, 0);
    }
    HttpTestServer(const HttpTestServer&) = delete;
    HttpTestServer& operator=(const HttpTestServer&) = delete;
    HttpTestServer(HttpTestServer&&) = delete;
    HttpTestServer& operator=(HttpTestServer&&) = delete;

    [[nodiscard]] std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(m_port) + path;
    }
    [[nodiscard]] std::string base() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    /// The request log so far.
    [[nodiscard]] std::string log() const {
        std::ifstream in(m_log);
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }

private:
    std::filesystem::path m_log;
    pid_t m_pid = -1;
    int m_stdin = -1;
    int m_port = 0;
};

} // namespace dljob::test
