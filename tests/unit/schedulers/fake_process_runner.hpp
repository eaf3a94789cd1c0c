#pragma once
// A ProcessRunner for unit tests: records every argv and replays scripted output, matched by the
// command's first word(s), so scheduler adapters are tested on recorded real output.

#include <dljob/domain/process_runner.hpp>

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dljob::testing {

class FakeProcessRunner final : public ProcessRunner {
public:
    /// Queues a reply for the next command whose argv[0] is `program`.
    void reply(const std::string& program, ProcessResult result) {
        m_replies[program].push_back(std::move(result));
    }
    void reply(const std::string& program, int exit_code, std::string out, std::string err = {}) {
        reply(program, ProcessResult{exit_code, std::move(out), std::move(err), false});
    }
    void reply_timeout(const std::string& program) {
        reply(program, ProcessResult{137, "", "", true});
    }

    Result<ProcessResult> run(const ProcessRequest& request) override {
        calls.push_back(request.argv);
        requests.push_back(request);
        auto& queue = m_replies[request.argv.at(0)];
        if (queue.empty()) {
            return fail(ErrorCode::scheduler_unreachable,
                        "fake: no reply scripted for " + request.argv.at(0));
        }
        ProcessResult result = queue.front();
        queue.pop_front();
        if (on_run) {
            on_run(request); // what the real command would leave behind (sqsub's --idfile)
        }
        return result;
    }

    Result<int> spawn_detached(const DetachedRequest& request) override {
        calls.push_back(request.argv);
        detached.push_back(request);
        alive_groups.insert(next_pid);
        // What /proc would show of the started process: its own group, its environment.
        ProcessInfo started;
        started.pid = next_pid;
        started.pgid = next_pid;
        started.start_ticks = 1000U + static_cast<std::uint64_t>(next_pid);
        for (const auto& [name, value] : request.env) {
            started.environment.push_back(name + "=" + value);
        }
        started.command_line = request.argv;
        processes.push_back(started);
        return next_pid++;
    }

    bool group_alive(int pgid) override { return alive_groups.count(pgid) > 0; }

    bool signal_group(int pgid, int signal) override {
        signals.emplace_back(pgid, signal);
        std::erase_if(processes, [&](const ProcessInfo& p) { return p.pgid == pgid; });
        return alive_groups.erase(pgid) > 0;
    }

    Result<std::vector<ProcessInfo>> list_processes() override { return processes; }

    /// Called with each run() that has a reply, before it returns.
    std::function<void(const ProcessRequest&)> on_run;
    std::vector<std::vector<std::string>> calls;
    std::vector<ProcessRequest> requests;
    std::vector<DetachedRequest> detached;
    std::vector<std::pair<int, int>> signals;
    std::set<int> alive_groups;
    std::vector<ProcessInfo> processes; // what list_processes() shows; tests add others

    int next_pid = 4242;

private:
    std::map<std::string, std::deque<ProcessResult>> m_replies;
};

} // namespace dljob::testing
