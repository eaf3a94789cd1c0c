#include <dljob/schedulers/launcher.hpp>

namespace dljob::schedulers {
namespace {

// No launcher: the script's own shell runs the program (local, one node).
class NoLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::none; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& /*geometry*/) const override {
        return {};
    }
    [[nodiscard]] std::string command(const LaunchGeometry& /*geometry*/,
                                      std::string_view program) const override {
        return std::string(program);
    }
};

} // namespace

const Launcher& no_launcher() {
    static const NoLauncher launcher;
    return launcher;
}

} // namespace dljob::schedulers
