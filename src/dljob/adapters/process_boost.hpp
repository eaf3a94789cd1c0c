#pragma once
// ProcessRunner over Boost.Process: the only place dljob starts other programs.

#include <dljob/domain/process_runner.hpp>

namespace dljob::adapters {

class BoostProcessRunner final : public ProcessRunner {
public:
    Result<ProcessResult> run(const ProcessRequest& request) override;
    Result<int> spawn_detached(const DetachedRequest& request) override;
    bool group_alive(int pgid) override;
    bool signal_group(int pgid, int signal) override;
    /// Reads /proc (Linux): each process's stat (group, start time), environ and cmdline.
    Result<std::vector<ProcessInfo>> list_processes() override;
};

} // namespace dljob::adapters
