#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/launcher.hpp>

#include <algorithm>

namespace dljob::schedulers {

LaunchGeometry launch_geometry(const Partition& partition, const ResolvedResources& resources) {
    const int tasks = std::max(1, resources.tasks_per_node);
    LaunchGeometry geometry;
    geometry.nodes = resources.nodes;
    geometry.tasks_per_node = tasks;
    geometry.cores_per_task = std::max(1, resources.cores_per_node / tasks);
    geometry.gpus_per_task = resources.gpus_per_node / tasks;
    geometry.node_cores = partition.node.cores;
    if (geometry.ranks() > 1) {
        geometry.program = partition.mpi.launcher;
        geometry.flags = partition.mpi.flags;
        geometry.flavor = partition.mpi.flavor;
        if (geometry.nodes > 1) {
            geometry.node_file_variable = family_of(partition.scheduler).node_file_variable();
        }
    }
    return geometry;
}

const Launcher& job_launcher(const Partition& partition, const ResolvedResources& resources) {
    if (const Launcher* own = family_of(partition.scheduler).rank_launcher()) {
        return *own;
    }
    if (partition.launcher == LauncherKind::none &&
        resources.nodes * resources.tasks_per_node > 1) {
        return mpirun_launcher();
    }
    return launcher_of(partition.launcher);
}

const Launcher& launcher_of(LauncherKind kind) {
    switch (kind) {
    case LauncherKind::srun:
        return srun_launcher();
    case LauncherKind::aprun:
        return aprun_launcher();
    case LauncherKind::mpirun:
        return mpirun_launcher();
    case LauncherKind::none:
        return no_launcher();
    }
    return no_launcher();
}

std::string Launcher::command(const LaunchGeometry& geometry, std::string_view program) const {
    return prefix(geometry) + " -- " + std::string(program);
}

std::string Launcher::with_site_flags(std::string options, const LaunchGeometry& geometry) {
    for (const auto& flag : geometry.flags) {
        options += " " + flag;
    }
    return options;
}

} // namespace dljob::schedulers
