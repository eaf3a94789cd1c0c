#include <dljob/schedulers/launcher.hpp>

#include <fmt/format.h>

#include <utility>

namespace dljob::schedulers {
namespace {

// Slurm's own launcher: one task per slot, each with its cores. Several ranks: each task gets
// its own GPU (dltrain then uses its cuda:0), a rank that fails ends the step at once instead
// of leaving the others waiting in a collective until their timeout, and the ranks' output is
// kept apart by a label.
class SrunLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::srun; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& g) const override {
        std::string out =
            fmt::format("srun --nodes={} --ntasks={} --ntasks-per-node={} --cpus-per-task={}",
                        g.nodes, g.ranks(), g.tasks_per_node, g.cores_per_task);
        if (g.ranks() > 1) {
            if (g.gpus_per_task > 0) {
                out += fmt::format(" --gpus-per-task={}", g.gpus_per_task);
            }
            // --label: each line of job.log starts with the rank that wrote it ("1: ...").
            out += " --kill-on-bad-exit=1 --label";
        }
        return with_site_flags(std::move(out), g);
    }
};

} // namespace

const Launcher& srun_launcher() {
    static const SrunLauncher launcher;
    return launcher;
}

} // namespace dljob::schedulers
