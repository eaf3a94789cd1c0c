// Rank detection from the launcher's environment, the one-rank communicator, and the loading of
// the MPI plugin (mpi/mpi_plugin.hpp) or the Gloo plugin (gloo/gloo_plugin.hpp) when there are
// several ranks.

#include "gloo/gloo_plugin.hpp"
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

// The first of `candidates` that loads and answers `stamp` at `entry_name`; the others, with
// the loader's reason, appended to `tried`. The handle stays loaded for the life of the
// process: the communicator's code lives in it.
template <typename Api>
const Api* load_first(const std::vector<fs::path>& candidates, const char* entry_name,
                      const char* stamp, int flags, std::string& tried) {
    using Entry = const Api* (*)(const char*);
    for (const auto& path : candidates) {
        std::error_code error;
        if (!fs::is_regular_file(path, error)) {
            tried += fmt::format("\n  {}: not there", path.string());
            continue;
        }
        void* handle = ::dlopen(path.c_str(), flags);
        if (handle == nullptr) {
            const char* why = ::dlerror();
            tried += fmt::format("\n  {}: {}", path.string(), why != nullptr ? why : "no reason");
            continue;
        }
        auto entry = reinterpret_cast<Entry>(
            ::dlsym(handle, entry_name)); // NOLINT(*-reinterpret-cast): dlsym
        const Api* api = entry != nullptr ? entry(stamp) : nullptr;
        if (api == nullptr) {
            tried += fmt::format("\n  {}: not a plugin of this dltrain build (reinstall both)",
                                 path.string());
            continue;
        }
        return api;
    }
    return nullptr;
}

// `file` beside dltrain, then in ../lib/dljob; or only the file `forced_variable` names.
std::vector<fs::path> plugin_candidates(const std::vector<std::string>& files,
                                        const char* forced_variable) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    if (const char* forced = std::getenv(forced_variable); forced != nullptr && *forced) {
        return {fs::path(forced)};
    }
    const fs::path dir = executable_dir();
    std::vector<fs::path> candidates;
    for (const auto& file : files) {
        for (const auto& where : {dir, dir.parent_path() / "lib" / "dljob"}) {
            candidates.push_back(where / file);
        }
    }
    return candidates;
}

const mpi::PluginApi* load_plugin(const RankEnv& env, std::string& tried) {
    std::vector<std::string> files;
    for (const auto& flavour : flavours_for(env)) {
        files.push_back(plugin_file(flavour));
    }
    // RTLD_GLOBAL: Open MPI opens its own components with dlopen, and they bind to libmpi's
    // symbols through the global scope.
    return load_first<mpi::PluginApi>(plugin_candidates(files, "DLTRAIN_MPI_PLUGIN"),
                                      mpi::plugin_entry_name, mpi::plugin_abi_stamp,
                                      RTLD_NOW | RTLD_GLOBAL, tried);
}

const char* env_text(const char* name) {
    const char* value = std::getenv(name); // NOLINT(concurrency-mt-unsafe): before any thread
    return value != nullptr && *value != '\0' ? value : nullptr;
}

// Seconds > 0 from `name`, or `fallback` when it is unset.
double seconds_from(const char* name, double fallback) {
    const char* value = env_text(name);
    if (value == nullptr) {
        return fallback;
    }
    char* end = nullptr;
    const double seconds = std::strtod(value, &end);
    if (*end != '\0' || !(seconds > 0.0)) {
        throw Error(ErrorKind::usage, fmt::format("{}='{}': expected seconds > 0", name, value));
    }
    return seconds;
}

// Whether these ranks meet through Gloo: asked for by name, or started by DLTRAIN_RANK (no MPI
// launcher knows them) unless MPI is asked for by name.
bool meets_through_gloo(const RankEnv& env) {
    const char* comm = env_text("DLTRAIN_COMM");
    const std::string kind = comm != nullptr ? comm : "";
    return kind == "gloo" || (env.launcher == "dltrain" && kind != "mpi");
}

// DLTRAIN_RENDEZVOUS into the plugin's options: tcp://HOST:PORT, or a directory.
void read_rendezvous(const std::string& ranks, const RankEnv& env, gloo_comm::Options& options) {
    const char* value = env_text("DLTRAIN_RENDEZVOUS");
    if (value == nullptr) {
        throw Error(ErrorKind::usage,
                    fmt::format("{} ({}) meet through Gloo, which needs DLTRAIN_RENDEZVOUS: a "
                                "directory every rank sees (on a shared file system), or "
                                "tcp://HOST:PORT with HOST rank 0's node and PORT a free port "
                                "there (docs/data-parallel.md, \"Without MPI: Gloo\")",
                                ranks, env.evidence));
    }
    options.rendezvous = value;
    const std::string text = value;
    if (text.find("://") == std::string::npos) {
        return;
    }
    const std::string prefix = "tcp://";
    const auto colon = text.rfind(':');
    const std::string host = text.substr(prefix.size(), colon - prefix.size());
    const std::string port = text.substr(colon + 1);
    char* end = nullptr;
    const long number = std::strtol(port.c_str(), &end, 10);
    if (text.rfind(prefix, 0) != 0 || colon < prefix.size() || host.empty() || port.empty() ||
        *end != '\0' || number < 1 || number > 65535) {
        throw Error(ErrorKind::usage,
                    fmt::format("DLTRAIN_RENDEZVOUS='{}': expected tcp://HOST:PORT (a port of 1 "
                                "to 65535) or a directory",
                                text));
    }
    options.store_host = host;
    options.store_port = static_cast<int>(number);
}

std::unique_ptr<Communicator> make_gloo_communicator(const RankEnv& env, double timeout) {
    if (!env.size) {
        throw Error(ErrorKind::usage,
                    fmt::format("the launcher gives no number of ranks ({}), which Gloo needs: "
                                "set DLTRAIN_RANK and DLTRAIN_WORLD_SIZE",
                                env.evidence));
    }
    const std::string ranks = fmt::format("{} ranks", *env.size);
    gloo_comm::Options options;
    options.rank = env.rank;
    options.size = *env.size;
    options.timeout_s = timeout;
    read_rendezvous(ranks, env, options);
    options.rendezvous_timeout_s = seconds_from("DLTRAIN_RENDEZVOUS_TIMEOUT", timeout);
    const char* iface = env_text("DLTRAIN_GLOO_IFACE");
    options.iface = iface != nullptr ? iface : "";
    std::string tried;
    const auto* plugin = load_first<gloo_comm::PluginApi>(
        plugin_candidates({gloo_comm::plugin_file_name}, "DLTRAIN_GLOO_PLUGIN"),
        gloo_comm::plugin_entry_name, gloo_comm::plugin_abi_stamp, RTLD_NOW | RTLD_LOCAL, tried);
    if (plugin == nullptr) {
        throw Error(ErrorKind::usage,
                    fmt::format("{} ({}) meet through Gloo, but dltrain's Gloo plugin does not "
                                "load (built without libgloo-dev?); tried:{}",
                                ranks, env.evidence, tried));
    }
    return plugin->make_communicator(options);
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
    // DLTRAIN_RANK first: whoever set it started this one process with it (a Spark task, a
    // loop of shell commands), while a launcher's variables may be inherited from an outer
    // step (Spark's workers started by srun).
    const bool found =
        take("dltrain", "DLTRAIN_RANK", "DLTRAIN_WORLD_SIZE", "DLTRAIN_LOCAL_RANK") ||
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
    if (env.launcher == "dltrain") {
        if (!env.size) {
            throw Error(ErrorKind::usage,
                        fmt::format("{} without DLTRAIN_WORLD_SIZE: expected both, the rank and "
                                    "the number of ranks",
                                    evidence));
        }
        // Ranks started on one machine pick a GPU each; where each sees only its own, any
        // rank modulo one is 0.
        if (lookup("DLTRAIN_LOCAL_RANK") == nullptr) {
            env.local_rank = env.rank;
        }
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
    return seconds_from("DLTRAIN_COLLECTIVE_TIMEOUT", 300.0);
}

std::unique_ptr<Communicator> make_communicator(const RankEnv& env) {
    if (!env.distributed()) {
        return make_single_communicator();
    }
    const double timeout = collective_timeout_seconds();
    if (meets_through_gloo(env)) {
        return make_gloo_communicator(env, timeout);
    }
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
