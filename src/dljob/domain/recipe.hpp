#pragma once
// Recipe: one training job as a user describes it, independent of any cluster (everything that
// differs between clusters lives in the SiteProfile). Loaded and validated by config/recipe_loader.

#include <dljob/domain/resources.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dljob {

/// Where the job reads its data and whether to copy it to faster storage first.
struct DataSpec {
    /// Directory or archive the training reads. May start with `$HOME`, `$SCRATCH`, `~` or another
    /// `$NAME` variable that the job's shell expands at run time; empty for jobs without data.
    std::string source;
    std::string format; // "idx" (MNIST-style), "directory", "archive"; informational for command:
    /// Storage tier kind to copy the data to before training: "none" (read in place), or a tier
    /// kind of the site ("node-local", "ramdisk"). The site's tier decides the path.
    std::string stage_to = "none";
    /// Leave a staged pack on the node when the job ends (`dljob stage-data --keep`), for later
    /// jobs on the same node; by default the last job using it removes it, since node-local
    /// disks and RAM disks are shared with whoever runs there next.
    bool keep_staged = false;
};

/// Whether the data is one tar archive, extracted on the node before the job runs (the Helios
/// seed's own way: tar the small files once, untar them into $RAMDISK in the job): data.format
/// `archive`, or a name GNU tar reads (.tar, .tar.gz, .tgz, .tar.bz2, .tbz2, .tar.xz, .txz,
/// .tar.zst, .tzst).
inline bool is_tar_archive(const DataSpec& data) {
    if (data.format == "archive") {
        return true;
    }
    const std::string_view name(data.source);
    for (const std::string_view suffix :
         {".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst", ".tzst"}) {
        if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
            return true;
        }
    }
    return false;
}

/// `train:` runs the bundled engine:
///   dltrain train --config <config> --run-dir <run_dir> --data-dir <data> --resume auto
///                 [--threads N] [--max-iter N] [--solver KEY=VALUE...]
struct TrainSpec {
    std::filesystem::path config; // network+solver config, absolute (resolved against the recipe)
    std::optional<int> threads;   // --threads; unset: the engine decides
    /// --max-iter: stop after this many iterations instead of the config's solver.max_iter
    /// (a short trial run, `dljob submit --set train.max_iter=200`); unset: the config decides.
    std::optional<int> max_iter;
    /// --weights: fine-tune from this dltrain checkpoint (absolute, or starting with ~ or
    /// $VARIABLE, expanded by the job's shell); empty: train from the fillers.
    std::string weights;
    /// `train.weights: "@ID"` resolved by submit --after ID: that job's run directory; the job
    /// script passes the newest completed checkpoint there as --weights when it starts.
    std::filesystem::path weights_from_run;
    /// Solver values over the network config's (`train.base_lr: 0.01`), in the order of
    /// config::solver_rules, as `dltrain train --solver KEY=VALUE`: the key as dltrain
    /// names it and the value as YAML text. Validated by the recipe loader, so a sweep over
    /// them needs no copy of the network config.
    std::vector<std::pair<std::string, std::string>> solver;
};

/// `command:` runs any program (PyTorch, Torch7, Theano scripts...) with the same treatment:
/// modules, run directory, staging, signals, exit code.
/// One `command.environment` entry, exported after the site's modules are loaded. A value's
/// `$NAME`, `${NAME}` and leading `~` are the job's (expanded there); everything else is literal.
/// prepend/append change a path list as Lmod's prepend_path and append_path do: entries joined
/// by ':', and no empty entry (the current folder, to the loader) when the variable was unset.
struct EnvironmentSetting {
    enum class Mode { set, prepend, append };
    std::string name; // [A-Za-z_][A-Za-z0-9_]*, not DLJOB_*
    Mode mode = Mode::set;
    std::vector<std::string> values; // set: exactly one; prepend/append: the entries, in order
};

struct CommandSpec {
    std::vector<std::string> argv; // program and arguments, never parsed by a shell
    std::vector<EnvironmentSetting> environment;
};

/// Checkpoint and continuation policy.
struct CheckpointPolicy {
    bool resume = true;              // continue from the newest checkpoint (dltrain --resume auto)
    int max_continuations = 20;      // resubmissions after exit 75 before giving up
    int signal_margin_seconds = 120; // warning signal this long before the walltime kill
};

struct MailSpec {
    std::string address; // empty: no mail
    bool on_begin = false;
    bool on_end = false;
    bool on_fail = false;
};

enum class RecipeKind { train, command };

/// Points a sweep may have (`sweep:` and `submit --sweep` together).
inline constexpr std::size_t max_sweep_points = 1000;

/// One key of a recipe's `sweep:` block (or of `submit --sweep`): the values it takes, each as
/// the text a `--set KEY=VALUE` would give it.
struct SweepAxis {
    std::string key; // dotted recipe key, like train.base_lr
    std::vector<std::string> values;
    std::string origin; // file:line:column of the key, or "--sweep N"
};

struct Recipe {
    std::string name; // [A-Za-z0-9._-]+; the scheduler job name is derived from it
    std::string description;
    Resources resources;
    std::vector<std::string> needs;   // environment needs ("cuda", "cudnn", "python", "mpi"...)
    std::vector<std::string> modules; // extra modules loaded after the needs
    bool purge = false;               // `module purge` before anything is loaded
    std::vector<std::string> unload;  // modules unloaded before anything is loaded
    /// A Python environment activated after the modules: a venv's folder (absolute, ~ or
    /// $VARIABLE: its bin/activate is sourced) or a conda environment's name.
    std::string activate;
    DataSpec data;
    RecipeKind kind = RecipeKind::train;
    TrainSpec train;     // meaningful when kind == train
    CommandSpec command; // meaningful when kind == command
    CheckpointPolicy checkpoint;
    MailSpec mail;
    /// `sweep:`: the keys the recipe is swept over, in the file's order (the first varies
    /// slowest); empty for a recipe of one job. Each value is validated as its key's.
    std::vector<SweepAxis> sweep;
    std::filesystem::path source_file; // the recipe file, absolute; empty when built in code
    /// Where each value came from, by key path ("resources.gpus" -> "recipes/mnist.yaml:8:9"),
    /// so checks against a site can point at the line that asked for too much.
    std::map<std::string, std::string> origins;
};

} // namespace dljob
