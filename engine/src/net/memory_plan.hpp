#pragma once
// What a net's tensors take, worked out from the config's shapes before anything is allocated,
// so that `num_output: 1000000000` or `batch_size: 1000000` is refused naming the layer and the
// bytes instead of ending as std::bad_alloc (or the OOM killer) after GBs were reserved.

#include <dl/config.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace dl {

/// The most bytes a run's tensors may take, and where that figure came from (for messages).
struct MemoryLimit {
    std::optional<std::uint64_t> bytes; // nothing: no limit ("none")
    std::string source;
};

/// `spec` from --max-memory: bytes, with an optional K, M, G or T (powers of 1024), or "none";
/// empty: DLTRAIN_MAX_MEMORY when set, else this machine's physical memory or this process's
/// cgroup limit, whichever is smaller. Throws
/// dl::Error(usage) for a spec that is neither.
MemoryLimit memory_limit(const std::string& spec);

/// Checks the train net (gradients, solver history and input stage included) and, when
/// `with_test`, the test net, at the Data layers' batch sizes and shapes. Throws
/// dl::Error(config) naming the file, line and layer when a shape passes what an int holds
/// (the nets' shapes are ints) or the running total passes the limit. Layers whose shapes do not
/// fit are left to the net's own checks, which name the problem better. Returns the total.
std::uint64_t check_memory(const NetConfig& config, bool with_test, const MemoryLimit& limit);

/// The memory limit of this process's cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`),
/// read from `proc_cgroup` (/proc/self/cgroup) under `cgroup_root` (/sys/fs/cgroup); nothing when
/// there is none. Slurm's --mem and Torque's mem= are enforced this way on most clusters.
std::optional<std::uint64_t> cgroup_memory_limit(const std::filesystem::path& proc_cgroup,
                                                 const std::filesystem::path& cgroup_root);

/// "1.5 GiB" and the like, for messages.
std::string bytes_text(std::uint64_t bytes);

} // namespace dl
