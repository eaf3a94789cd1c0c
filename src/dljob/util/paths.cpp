#include <dljob/util/paths.hpp>

#include <cstdlib>

namespace dljob::util {
namespace {

std::filesystem::path env_path(const char* name) {
    const char* value = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read at startup
    return value != nullptr && *value != '\0' ? std::filesystem::path(value)
                                              : std::filesystem::path();
}

} // namespace

std::filesystem::path data_home() {
    auto xdg = env_path("XDG_DATA_HOME");
    if (!xdg.empty() && xdg.is_absolute()) {
        return xdg;
    }
    auto home = env_path("HOME");
    return (home.empty() ? std::filesystem::path(".") : home) / ".local" / "share";
}

std::filesystem::path job_store_path() {
    auto path = env_path("DLJOB_STORE");
    return path.empty() ? data_home() / "dljob" / "jobs.db" : path;
}

std::filesystem::path runs_dir() {
    auto path = env_path("DLJOB_RUNS_DIR");
    return path.empty() ? data_home() / "dljob" / "runs" : path;
}

} // namespace dljob::util
