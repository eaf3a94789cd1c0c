#pragma once
// This Linux machine as the `local` site offers it (domain/machine.hpp): the CPUs and memory a
// job started from here may use and the NVIDIA GPUs it can see. A few small files are read
// (/proc/meminfo, /proc/self/cgroup, cgroup v2 limits, the names in /dev); no program runs
// (nvidia-smi can hang for minutes on a wedged GPU), so it costs well under a millisecond.

#include <dljob/domain/machine.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace dljob::adapters {

class LinuxMachine final : public MachineProbe {
public:
    using GetEnv = std::function<std::optional<std::string>(const std::string&)>;
    /// `root`: where /proc, /sys and /dev are looked for (tests give a tree of their own);
    /// `getenv`: CUDA_VISIBLE_DEVICES. The CPUs are always this process's affinity mask.
    explicit LinuxMachine(std::filesystem::path root = "/", GetEnv getenv = {});

    [[nodiscard]] MachineFacts describe() const override;

private:
    std::filesystem::path m_root;
    GetEnv m_getenv;
};

/// /dev/nvidia0, /dev/nvidia1 ...: one file per GPU the driver knows (nvidiactl, nvidia-uvm and
/// nvidia-caps are not GPUs).
int count_gpu_device_files(const std::filesystem::path& dev);

/// The GPUs a CUDA program sees, given the GPUs the driver knows and CUDA_VISIBLE_DEVICES
/// (nullopt: unset) with CUDA's rules: a comma-separated list of indices below `devices` or
/// GPU-/MIG- UUIDs, read up to the first entry that is neither (so "", "-1" and Torque's
/// "NoDevFiles" hide every GPU). `found` says how, for messages.
struct VisibleGpus {
    int count = 0;
    std::string found;
};
VisibleGpus visible_gpus(int devices, const std::optional<std::string>& cuda_visible_devices);

/// MemTotal of /proc/meminfo's text, in KiB.
std::optional<std::int64_t> meminfo_total_kib(std::string_view meminfo);

/// The cgroup v2 path of /proc/self/cgroup's text ("0::/user.slice/x.scope" -> that path).
std::optional<std::string> cgroup_v2_path(std::string_view proc_self_cgroup);

} // namespace dljob::adapters
