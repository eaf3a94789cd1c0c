#pragma once
// SiteProfile: everything that differs between clusters, modelled on ReFrame's systems ->
// partitions, with scheduler and launcher as separate axes. Loaded and validated by
// config/site_loader from site-profiles/*.yaml, the user's config directory or --site-file.

#include <dljob/domain/resources.hpp>
#include <dljob/domain/walltime.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob {

enum class LauncherKind { aprun, srun, mpirun, none };
enum class ModuleFlavor { lmod, tcl, cray, none };
/// Whose mpirun a partition's MPI launcher is: its options for tagging each rank's output and
/// placing ranks per node differ (unknown: neither is added).
enum class MpiFlavor { unknown, openmpi, mpich };

const char* to_string(LauncherKind kind) noexcept;
const char* to_string(ModuleFlavor flavor) noexcept;

/// `module switch FROM TO` (Cray: PrgEnv-cray -> PrgEnv-gnu), run before any load.
struct ModuleSwitch {
    std::string from;
    std::string to;
};

struct ModuleSystem {
    ModuleFlavor flavor = ModuleFlavor::none;
    /// Shell file sourced first when `module` may not be defined in batch shells
    /// (e.g. /etc/profile.d/modules.sh); empty: rely on the login environment.
    std::string init_script;
    std::vector<std::string> preload;   // loaded before the needs (Alliance: StdEnv/2023)
    std::vector<ModuleSwitch> switches; // Cray PrgEnv switches
    /// Environment need -> modules, e.g. "cuda" -> {"cudatoolkit/5.5.51-1.0402.9594.3.1"}.
    std::map<std::string, std::vector<std::string>> needs;
    /// The cuDNN major version the `cudnn` need's modules give (0: the stack has no cuDNN);
    /// unset: not said. Older than dltrain's CUDA plugin takes, GPU training cannot run there.
    std::optional<int> cudnn_major;
};

/// How a Slurm partition spells a GPU request.
enum class GpuDirective { gpus_per_node, gres };

/// How a partition runs several ranks: the MPI module to load and the launcher's name and flags
/// (the MPI flavour's own name, e.g. mpirun.openmpi: Debian's slurm-wlm-torque installs an
/// srun wrapper under the generic mpirun). Used only when a job has more than one rank.
struct MpiSpec {
    std::string module;             // loaded after the recipe's modules; empty: none
    std::string launcher;           // mpirun-style launcher's program; empty: "mpirun"
    std::vector<std::string> flags; // after the launcher's own options (srun, aprun too)
    /// `flavor:`, else inferred from the launcher's or the module's name (mpirun.openmpi,
    /// openmpi/4.1, mpiexec.mpich, mpich/3.4).
    MpiFlavor flavor = MpiFlavor::unknown;
};

struct Partition {
    std::string name;  // dljob's name for it (`--partition NAME`)
    std::string queue; // scheduler queue/partition/class; empty: let the scheduler route
    /// The scheduler family's name (slurm, pbs, ...): the families know the names and what each
    /// one accepts (schedulers::check_site); domain and config only carry it.
    std::string scheduler = "local";
    LauncherKind launcher = LauncherKind::none;
    NodeGeometry node;
    int max_nodes = 1;
    Walltime default_walltime = Walltime::from_seconds(3600);
    Walltime max_walltime = Walltime::from_seconds(86400);
    std::vector<std::string> features; // Moab `-l feature=`, Slurm `--constraint=`
    bool account_required = false;
    bool forbids_ppn = false; // Hélios: `nodes=1:gpus=N` only
    GpuDirective gpu_directive = GpuDirective::gpus_per_node;
    bool gpu_type_in_request = false; // Slurm: `--gpus-per-node=a100:2`
    /// sqsub only: job class (`-q`) and type flag (`-f`) for this partition.
    std::string sqsub_flag;
    /// Extra directives, each a whole option as the scheduler takes it (e.g. "--qos=normal",
    /// "-l gres=ccm"); validated against an allowlist of characters, emitted after ours.
    std::vector<std::string> extra_directives;
    MpiSpec mpi;
    /// `scheduler_options:`, what only this partition's family reads (a Spark master, an
    /// executor's memory): key -> its values (one for a scalar). The family checks them.
    std::map<std::string, std::vector<std::string>> scheduler_options;
};

/// A place to keep data, from home to a per-job RAM disk.
struct StorageTier {
    std::string name; // "home", "project", "scratch", "node-local", "ramdisk"
    /// Absolute path, or one that starts with a variable the job's shell expands
    /// ("$SLURM_TMPDIR", "$LSCRATCH", "/N/dc2/scratch/$USER").
    std::string path;
    std::optional<MemorySize> capacity;
    bool per_node = false; // local to each node (staging must run on every node)
    bool network = true;   // a network file system (slow for many small files)
    std::optional<int> purge_days;
    std::optional<std::int64_t> file_quota;
};

struct SchedulerBehaviour {
    std::size_t job_name_max = 64;
    /// Allowed job names, an ECMAScript regex; a recipe name that does not match is mapped to a
    /// visible `dlj-<hash>` name, never silently cut.
    std::string job_name_pattern = "^[A-Za-z0-9._-]+$";
    std::string warning_signal = "USR2"; // sent before the walltime kill (where supported)
    int grace_seconds = 120;             // how long before the kill it arrives
    bool script_on_service_node = false; // Cray: compute work must go through aprun
    /// The most tasks a job array may have (Slurm's MaxArraySize, Torque's max_job_array_size);
    /// 0: not known. A sweep of more points is refused before anything is submitted.
    int max_array_size = 0;
};

struct SiteProfile {
    std::string name;
    std::string description;
    std::vector<std::string> hostnames; // glob patterns for auto-detection (`login*.narval.*`)
    ModuleSystem modules;
    std::vector<Partition> partitions; // at least one
    std::string default_partition;     // name of one of `partitions`
    std::string account;               // default account (`-A`), empty: none
    std::vector<StorageTier> storage;
    SchedulerBehaviour behaviour;
    std::filesystem::path source_file; // where it was loaded from
    /// Where each value came from, by key path ("partitions.gpu.max_walltime" ->
    /// "site-profiles/bigred2.yaml:42:5", or "default"). Shown by `dljob sites show`.
    std::map<std::string, std::string> origins;

    [[nodiscard]] const Partition* find_partition(const std::string& partition_name) const;
    [[nodiscard]] const StorageTier* find_storage(const std::string& tier_name) const;
};

/// The oldest cuDNN dltrain's CUDA plugin runs with: it is built against cuDNN 8 or later (the
/// library split into cudnn_ops/cnn and the API it calls), so a cuDNN 5 or 6 stack of the
/// seeds' era (Big Red II, Helios) cannot load it.
inline constexpr int dltrain_min_cudnn_major = 8;

/// Why dltrain cannot train on this site's GPUs, with what would work there, where the profile
/// says its cuDNN is older than dltrain_min_cudnn_major (modules.cudnn_major); empty otherwise.
std::string gpu_training_blocker(const SiteProfile& site);

} // namespace dljob
