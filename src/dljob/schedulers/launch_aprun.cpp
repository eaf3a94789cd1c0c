#include <dljob/schedulers/launcher.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace dljob::schedulers {
namespace {

// Cray ALPS: the script runs on a service (MOM) node; aprun reaches the compute nodes. Nodes
// are allocated whole, so each task gets the node's cores (-d) and no binding (-cc none).
class AprunLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::aprun; }
    [[nodiscard]] bool script_off_compute_node() const override { return true; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& g) const override {
        std::string out =
            fmt::format("aprun -n {} -N {} -d {} -cc none", g.ranks(), g.tasks_per_node,
                        std::max(1, g.node_cores / g.tasks_per_node));
        return with_site_flags(std::move(out), g);
    }
    [[nodiscard]] std::string command(const LaunchGeometry& g,
                                      std::string_view program) const override {
        // -b: the program is not copied to the compute node (it is a script on a shared FS).
        return fmt::format("{} -b -- {}", prefix(g), program);
    }
};

} // namespace

const Launcher& aprun_launcher() {
    static const AprunLauncher launcher;
    return launcher;
}

} // namespace dljob::schedulers
