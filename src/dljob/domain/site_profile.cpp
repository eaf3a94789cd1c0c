#include <dljob/domain/site_profile.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace dljob {

const char* to_string(LauncherKind kind) noexcept {
    switch (kind) {
    case LauncherKind::aprun:
        return "aprun";
    case LauncherKind::srun:
        return "srun";
    case LauncherKind::mpirun:
        return "mpirun";
    case LauncherKind::none:
        return "none";
    }
    return "none";
}

const char* to_string(ModuleFlavor flavor) noexcept {
    switch (flavor) {
    case ModuleFlavor::lmod:
        return "lmod";
    case ModuleFlavor::tcl:
        return "tcl";
    case ModuleFlavor::cray:
        return "cray";
    case ModuleFlavor::none:
        return "none";
    }
    return "none";
}

const Partition* SiteProfile::find_partition(const std::string& partition_name) const {
    const std::string& wanted = partition_name.empty() ? default_partition : partition_name;
    const auto it = std::find_if(partitions.begin(), partitions.end(),
                                 [&](const Partition& p) { return p.name == wanted; });
    return it == partitions.end() ? nullptr : &*it;
}

const StorageTier* SiteProfile::find_storage(const std::string& tier_name) const {
    const auto it = std::find_if(storage.begin(), storage.end(),
                                 [&](const StorageTier& t) { return t.name == tier_name; });
    return it == storage.end() ? nullptr : &*it;
}

std::string gpu_training_blocker(const SiteProfile& site) {
    const auto& major = site.modules.cudnn_major;
    if (!major || *major >= dltrain_min_cudnn_major) {
        return {};
    }
    // No file path: the text goes into job scripts, which must not depend on where dljob lives.
    return fmt::format(
        "site {}'s modules give {} (its profile's modules.cudnn_major), but dltrain's CUDA plugin "
        "needs "
        "cuDNN {} or later: a train: job on its GPUs stops at its start (exit 1). What works "
        "there: resources.gpus: 0 (dltrain on the CPU), or a command: recipe that runs a "
        "framework built for that stack (the Caffe or Torch of its time), or a site whose cudnn "
        "module is {} or later",
        site.name, *major == 0 ? std::string("no cuDNN") : fmt::format("cuDNN {}", *major),
        dltrain_min_cudnn_major, dltrain_min_cudnn_major);
}

} // namespace dljob
