#pragma once
// Launchers (srun, aprun, mpirun, none): how a job script starts its training processes on the
// allocated nodes. Each is one small file (schedulers/launch_<name>.cpp), given the resolved
// geometry and returning its command line; the site profile's partition names which one
// (`launcher:`), and the renderer and `dljob shell` ask it.

#include <dljob/domain/site_profile.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// Where the job's processes run: what a launcher needs to start them.
struct LaunchGeometry {
    int nodes = 1;
    int tasks_per_node = 1;
    int cores_per_task = 1; // CPU cores each task may use (--cpus-per-task)
    int gpus_per_task = 0;
    int node_cores = 1; // cores of a whole node (Cray nodes are allocated whole)
    /// The partition's MPI settings (mpi: in the site profile), given only to jobs of more
    /// than one rank: the mpirun-style program to call, and flags after the launcher's own.
    std::string program;
    std::vector<std::string> flags;
    MpiFlavor flavor = MpiFlavor::unknown;
    /// On several nodes: the variable naming the scheduler's host list ($PBS_NODEFILE); empty:
    /// the MPI asks the scheduler itself.
    std::string node_file_variable;

    [[nodiscard]] int ranks() const { return nodes * tasks_per_node; }
};

class Launcher {
public:
    virtual ~Launcher() = default;
    [[nodiscard]] virtual LauncherKind kind() const = 0;
    /// Its name in the job script's comments and steps: the kind's, or the family's own
    /// launcher's ("spark").
    [[nodiscard]] virtual std::string_view name() const { return to_string(kind()); }
    /// Whether the job script (and an interactive shell) runs on a service node, away from the
    /// compute nodes, so that even one process must be started through the launcher (Cray).
    [[nodiscard]] virtual bool script_off_compute_node() const { return false; }
    /// The words before the program that start one task per slot of `geometry`; empty: the
    /// program runs where the script runs.
    [[nodiscard]] virtual std::string prefix(const LaunchGeometry& geometry) const = 0;
    /// The whole command line that starts `program` (shell words, already quoted): by default
    /// the prefix, `--` and the program.
    [[nodiscard]] virtual std::string command(const LaunchGeometry& geometry,
                                              std::string_view program) const;

protected:
    /// `options` followed by the partition's MPI flags (mpi.flags), which come after the
    /// launcher's own.
    static std::string with_site_flags(std::string options, const LaunchGeometry& geometry);
};

/// The geometry of a job with `resources` on `partition`.
LaunchGeometry launch_geometry(const Partition& partition, const ResolvedResources& resources);

/// The launcher that starts the job's processes: the partition's, except that several ranks on
/// a partition without one (local) are started by the MPI launcher (`mpi.launcher`).
const Launcher& job_launcher(const Partition& partition, const ResolvedResources& resources);

/// The launcher of `kind`.
const Launcher& launcher_of(LauncherKind kind);

const Launcher& srun_launcher();
const Launcher& aprun_launcher();
const Launcher& mpirun_launcher();
const Launcher& no_launcher();

} // namespace dljob::schedulers
