#include <dljob/schedulers/launcher.hpp>

#include <fmt/format.h>

namespace dljob::schedulers {
namespace {

// Slurm's own launcher: one task per slot, each with its cores.
class SrunLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::srun; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& g) const override {
        return fmt::format("srun --nodes={} --ntasks={} --ntasks-per-node={} --cpus-per-task={}",
                           g.nodes, g.nodes * g.tasks_per_node, g.tasks_per_node, g.cores_per_task);
    }
    [[nodiscard]] std::string command(const LaunchGeometry& g,
                                      std::string_view program) const override {
        return fmt::format("{} -- {}", prefix(g), program);
    }
};

} // namespace

const Launcher& srun_launcher() {
    static const SrunLauncher launcher;
    return launcher;
}

} // namespace dljob::schedulers
