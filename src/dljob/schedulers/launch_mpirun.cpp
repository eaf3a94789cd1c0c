#include <dljob/schedulers/launcher.hpp>

#include <fmt/format.h>

#include <utility>

namespace dljob::schedulers {
namespace {

// An MPI library's launcher (PBS, Moab and sqsub sites; local for several ranks). The program is
// the flavor's own name where the site gives it (mpirun.openmpi, mpiexec.mpich): the generic
// mpirun may be another MPI's, or Slurm's srun wrapper. Where the flavor is known, each line of
// output is tagged with its rank (what `dljob logs --rank` reads) and, on several nodes, the
// ranks are spread T per node over the scheduler's host list; an MPI of unknown flavor is left
// to its defaults (all ranks on the first hosts of $PBS_NODEFILE, untagged output).
class MpirunLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::mpirun; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& g) const override {
        std::string out =
            fmt::format("{} -n {}", g.program.empty() ? "mpirun" : g.program, g.ranks());
        const bool spread = g.nodes > 1;
        const std::string hosts =
            g.node_file_variable.empty() ? "" : fmt::format("\"${}\"", g.node_file_variable);
        switch (g.flavor) {
        case MpiFlavor::openmpi:
            out += " --tag-output";
            if (spread) {
                out += fmt::format(" --map-by ppr:{}:node", g.tasks_per_node);
                out += hosts.empty() ? "" : " --hostfile " + hosts;
            }
            break;
        case MpiFlavor::mpich: // Hydra's mpiexec
            out += " -prepend-rank";
            if (spread) {
                out += fmt::format(" -ppn {}", g.tasks_per_node);
                out += hosts.empty() ? "" : " -f " + hosts;
            }
            break;
        case MpiFlavor::unknown:
            break;
        }
        return with_site_flags(std::move(out), g);
    }
};

} // namespace

const Launcher& mpirun_launcher() {
    static const MpirunLauncher launcher;
    return launcher;
}

} // namespace dljob::schedulers
