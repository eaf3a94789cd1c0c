#include <dljob/schedulers/launcher.hpp>

#include <fmt/format.h>

#include <utility>

namespace dljob::schedulers {
namespace {

// An MPI library's launcher (PBS, Moab and sqsub sites; local for several ranks): the host list
// comes from the scheduler's environment ($PBS_NODEFILE), so only the number of tasks is named.
// The program is the flavour's own name where the site gives it (mpirun.openmpi,
// mpiexec.mpich): the generic mpirun may be another MPI's, or Slurm's srun wrapper.
class MpirunLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::mpirun; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& g) const override {
        std::string out =
            fmt::format("{} -n {}", g.program.empty() ? "mpirun" : g.program, g.ranks());
        return with_site_flags(std::move(out), g);
    }
};

} // namespace

const Launcher& mpirun_launcher() {
    static const MpirunLauncher launcher;
    return launcher;
}

} // namespace dljob::schedulers
