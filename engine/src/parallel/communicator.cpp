// Rank detection from the launcher's environment, the one-rank communicator, and the loading of
// the MPI plugin (mpi/mpi_plugin.hpp) when there are several ranks.

#include "mpi/mpi_plugin.hpp"

#include <dl/communicator.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>

#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

namespace dl {
namespace {

namespace fs = std::filesystem;

class SingleCommunicator final : public Communicator {
public:
    [[nodiscard]] std::string name() const override { return "single"; }
    [[nodiscard]] int rank() const override { return 0; }
    [[nodiscard]] int size() const override { return 1; }
    [[nodiscard]] bool accepts(const Memory& /*memory*/) const override { return true; }
    void allreduce_sum(float* /*data*/, std::size_t /*count*/,
                       const std::string& /*what*/) override {}
    void allreduce_max(std::int64_t* /*values*/, std::size_t /*count*/,
                       const std::string& /*what*/) override {}
    void broadcast(void* /*data*/, std::size_t /*bytes*/, int /*root*/,
                   const std::string& /*what*/) override {}
    void set_timeout(double /*seconds*/) override {}
    [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

// A launcher variable as a non-negative number; nothing when unset.
std::optional<int> number(const EnvLookup& lookup, const char* name, std::string& evidence) {
    const char* value = lookup(name);
    if (value == nullptr || *value == '\0') {
        return std::nullopt;
    }
    errno = 0;
    char* end = nullptr;
    const long parsed = std::strtol(value, &end, 10);
    if (errno != 0 || *end != '\0' || parsed < 0 || parsed > 1'000'000) {
        throw Error(ErrorKind::usage,
                    fmt::format("{}='{}' is not a rank number (set by the launcher, or by hand?)",
                                name, value));
    }
    evidence += fmt::format("{}{}={}", evidence.empty() ? "" : " ", name, value);
    return static_cast<int>(parsed);
}

fs::path executable_dir() {
    std::error_code error;
    const auto exe = fs::read_symlink("/proc/self/exe", error);
    return error ? fs::path() : exe.parent_path();
}

std::string plugin_file(const std::string& flavour) {
    return "libdltrain-mpi-" + flavour + ".so";
}

// The flavours to try, in order: the one the user names, else the launcher's.
std::vector<std::string> flavours_for(const RankEnv& env) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    if (const char* named = std::getenv("DLTRAIN_MPI"); named != nullptr && *named != '\0') {
        return {named};
    }
    if (env.launcher == "openmpi" || std::getenv("PMIX_RANK") != nullptr) { // NOLINT
        return {"openmpi", "mpi"};
    }
    if (env.launcher == "mpich" || env.launcher == "alps") {
        return {"mpich", "mpi"};
    }
    // srun without PMIx: Slurm's PMI-2, which MPICH (and Cray MPICH) speak.
    return {"mpich", "openmpi", "mpi"};
}

// The handle stays loaded for the life of the process: the communicator's code lives in it.
const mpi::PluginApi* load_plugin(const RankEnv& env, std::string& tried) {
    std::vector<fs::path> candidates;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    if (const char* forced = std::getenv("DLTRAIN_MPI_PLUGIN"); forced != nullptr && *forced) {
        candidates.emplace_back(forced);
    } else {
        const fs::path dir = executable_dir();
        for (const auto& flavour : flavours_for(env)) {
            for (const auto& where : {dir, dir.parent_path() / "lib" / "dljob"}) {
                candidates.push_back(where / plugin_file(flavour));
            }
        }
    }
    for (const auto& path : candidates) {
        std::error_code error;
        if (!fs::is_regular_file(path, error)) {
            tried += fmt::format("\n  {}: not there", path.string());
            continue;
        }
        // RTLD_GLOBAL: Open MPI opens its own components with dlopen, and they bind to
        // libmpi's symbols through the global scope.
        void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
        if (handle == nullptr) {
            const char* why = ::dlerror();
            tried += fmt::format("\n  {}: {}", path.string(), why != nullptr ? why : "no reason");
            continue;
        }
        auto entry = reinterpret_cast<mpi::PluginEntry>( // NOLINT(*-reinterpret-cast): dlsym
            ::dlsym(handle, mpi::plugin_entry_name));
        const mpi::PluginApi* api = entry != nullptr ? entry(mpi::plugin_abi_stamp) : nullptr;
        if (api == nullptr) {
            tried += fmt::format("\n  {}: not a plugin of this dltrain build (reinstall both)",
                                 path.string());
            continue;
        }
        return api;
    }
    return nullptr;
}

} // namespace

RankEnv detect_rank_env(const EnvLookup& lookup) {
    RankEnv env;
    std::string evidence;
    const auto take = [&](const char* launcher, const char* rank, const char* size,
                          const char* local) {
        const auto r = number(lookup, rank, evidence);
        if (!r) {
            evidence.clear();
            return false;
        }
        env.launcher = launcher;
        env.rank = *r;
        env.size = size != nullptr ? number(lookup, size, evidence) : std::nullopt;
        env.local_rank = local != nullptr ? number(lookup, local, evidence).value_or(0) : 0;
        return true;
    };
    const bool found =
        take("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "OMPI_COMM_WORLD_LOCAL_RANK") ||
        take("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID") ||
        // SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: only srun sets it, so a batch script that
        // asked for 4 tasks but runs dltrain once is one rank, not rank 0 of 4 waiting forever.
        (lookup("SLURM_STEP_NUM_TASKS") != nullptr &&
         take("slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID")) ||
        take("alps", "ALPS_APP_PE", nullptr, nullptr);
    if (!found) {
        return RankEnv{};
    }
    if (env.size && (*env.size == 0 || env.rank >= *env.size)) {
        throw Error(ErrorKind::usage,
                    fmt::format("the launcher's environment says rank {} of {} ({})", env.rank,
                                *env.size, evidence));
    }
    // ALPS gives no local rank; aprun -N 1 (one GPU per XK7 node) makes it 0.
    env.evidence = evidence;
    return env;
}

RankEnv detect_rank_env() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    return detect_rank_env([](const char* name) { return std::getenv(name); });
}

std::unique_ptr<Communicator> make_single_communicator() {
    return std::make_unique<SingleCommunicator>();
}

double collective_timeout_seconds() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    const char* value = std::getenv("DLTRAIN_COLLECTIVE_TIMEOUT");
    if (value == nullptr || *value == '\0') {
        return 300.0;
    }
    char* end = nullptr;
    const double seconds = std::strtod(value, &end);
    if (*end != '\0' || !(seconds > 0.0)) {
        throw Error(ErrorKind::usage,
                    fmt::format("DLTRAIN_COLLECTIVE_TIMEOUT='{}': expected seconds > 0", value));
    }
    return seconds;
}

std::unique_ptr<Communicator> make_communicator(const RankEnv& env) {
    if (!env.distributed()) {
        return make_single_communicator();
    }
    const double timeout = collective_timeout_seconds();
    std::string tried;
    const mpi::PluginApi* plugin = load_plugin(env, tried);
    const std::string ranks = env.size ? fmt::format("{} ranks", *env.size) : "ranks";
    if (plugin == nullptr) {
        throw Error(ErrorKind::usage,
                    fmt::format("the launcher started {} ({}) but no MPI plugin of dltrain "
                                "loads: load the site's MPI module, or set DLTRAIN_MPI "
                                "(openmpi, mpich, mpi) or DLTRAIN_MPI_PLUGIN; tried:{}",
                                ranks, env.evidence, tried));
    }
    auto comm = plugin->make_communicator(timeout);
    if (env.size && comm->size() != *env.size) {
        // The classic silent failure: an MPI that does not know this launcher starts each
        // process as a world of its own, N trainings of one on one run directory.
        throw Error(ErrorKind::usage,
                    fmt::format("the launcher started {} ({}) but {} sees a world of {}: the "
                                "plugin ({}) is for another MPI than the launcher's; set "
                                "DLTRAIN_MPI to the launcher's flavour",
                                ranks, env.evidence, comm->name(), comm->size(), plugin->flavour));
    }
    return comm;
}

} // namespace dl
