#include <dljob/domain/site_profile.hpp>

#include <algorithm>

namespace dljob {

const char* to_string(SchedulerKind kind) noexcept {
    switch (kind) {
    case SchedulerKind::pbs:
        return "pbs";
    case SchedulerKind::moab:
        return "moab";
    case SchedulerKind::sqsub:
        return "sqsub";
    case SchedulerKind::slurm:
        return "slurm";
    case SchedulerKind::local:
        return "local";
    }
    return "local";
}

const std::vector<SchedulerKind>& scheduler_kinds() {
    static const std::vector<SchedulerKind> kinds{SchedulerKind::pbs, SchedulerKind::moab,
                                                  SchedulerKind::sqsub, SchedulerKind::slurm,
                                                  SchedulerKind::local};
    return kinds;
}

std::optional<SchedulerKind> scheduler_kind(std::string_view name) {
    for (const SchedulerKind kind : scheduler_kinds()) {
        if (name == to_string(kind)) {
            return kind;
        }
    }
    return std::nullopt;
}

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

} // namespace dljob
