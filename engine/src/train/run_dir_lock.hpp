#pragma once
// A run directory belongs to one training at a time: two dltrain processes (or two independent
// sets of ranks) writing one metrics.jsonl and one checkpoints/ interleave lines and overwrite
// each other's checkpoints, and both exit 0. The owner holds an flock on <run>/.dltrain.lock for
// the life of the training; the kernel releases it on any exit, SIGKILL and a node crash's
// reboot included, so a stale lock never needs removing by hand.

#include <filesystem>
#include <optional>
#include <string>

namespace dl {

class RunDirLock {
public:
    /// Locks `run_dir` (which must exist) or throws dl::Error(usage) naming the process that
    /// holds it, as that process wrote itself into the file: "pid 4242 on node17 since ...".
    /// Where the file system has no locks (some Lustre mounts) it warns on stderr and goes on.
    explicit RunDirLock(const std::filesystem::path& run_dir);
    ~RunDirLock();
    RunDirLock(const RunDirLock&) = delete;
    RunDirLock& operator=(const RunDirLock&) = delete;
    RunDirLock(RunDirLock&&) = delete;
    RunDirLock& operator=(RunDirLock&&) = delete;

    static constexpr const char* file_name = ".dltrain.lock";

private:
    int m_fd = -1;
};

} // namespace dl
