#include <dljob/schedulers/launcher.hpp>

#include <fmt/format.h>

namespace dljob::schedulers {
namespace {

// An MPI library's launcher (PBS and Moab sites): the host list comes from the scheduler's
// environment ($PBS_NODEFILE), so only the number of tasks is named.
class MpirunLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::mpirun; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& g) const override {
        return fmt::format("mpirun -n {}", g.nodes * g.tasks_per_node);
    }
    [[nodiscard]] std::string command(const LaunchGeometry& g,
                                      std::string_view program) const override {
        return fmt::format("{} -- {}", prefix(g), program);
    }
};

} // namespace

const Launcher& mpirun_launcher() {
    static const MpirunLauncher launcher;
    return launcher;
}

} // namespace dljob::schedulers
