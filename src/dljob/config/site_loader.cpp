#include <dljob/config/fields.hpp>
#include <dljob/config/site_loader.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <regex>

namespace dljob::config {
namespace {

// A path the job's shell may expand: literal parts are quoted when rendered, `$NAME` and
// `${NAME}` are left to the shell. Must be absolute or start with a variable.
constexpr std::string_view storage_path_pattern =
    R"((/|\$[A-Za-z_]|\$\{[A-Za-z_])[A-Za-z0-9._/+${}-]{0,4000})";
constexpr std::string_view hostname_pattern = R"([A-Za-z0-9.*?\[\]-]{1,255})";
// Whole scheduler options from a profile: no spaces except one between an option and its value
// (`-l gres=ccm`), no shell metacharacters.
constexpr std::string_view extra_directive_pattern =
    R"(--?[A-Za-z][A-Za-z0-9-]*([ =][A-Za-z0-9._,:=+/@-]{1,128})?)";
// A value of `scheduler_options:` (a Spark master URL, `30g`, a `--conf` line's key=value): one
// word, no shell metacharacters; the family says which keys and values it takes.
constexpr std::string_view scheduler_option_pattern = R"([A-Za-z0-9._,:=+/@%-]{1,256})";
constexpr std::string_view scheduler_option_describe =
    "one word of A-Z a-z 0-9 . _ , : = + / @ % - (at most 256)";
constexpr std::string_view signal_pattern = "(USR1|USR2|TERM|INT|HUP|none)";

template <class T> Result<void> assign(Result<T> result, T& target) {
    if (!result) {
        return fail(result.error());
    }
    target = std::move(*result);
    return {};
}

Result<void> read_modules(const YamlNode& node, SiteProfile& site) {
    DLJOB_TRY(check_mapping(node, "modules",
                            {"system", "init", "preload", "switch", "needs", "cudnn_major"}));
    ModuleSystem& modules = site.modules;
    for (const auto& entry : node.entries) {
        const std::string key = join_key("modules", entry.key);
        site.origins[key] = entry.value.mark.str();
        if (entry.key == "system") {
            auto v = read_choice(entry.value, key, {"lmod", "tcl", "cray", "none"});
            if (!v) {
                return fail(v.error());
            }
            modules.flavor = *v == "lmod"   ? ModuleFlavor::lmod
                             : *v == "tcl"  ? ModuleFlavor::tcl
                             : *v == "cray" ? ModuleFlavor::cray
                                            : ModuleFlavor::none;
        } else if (entry.key == "cudnn_major") {
            int major = 0;
            DLJOB_TRY(assign(read_int(entry.value, key, 0, 99), major));
            modules.cudnn_major = major;
        } else if (entry.key == "init") {
            DLJOB_TRY(assign(read_word(entry.value, key, R"(/[A-Za-z0-9._/+-]{0,4000})",
                                       "an absolute path of A-Z a-z 0-9 . _ / + -"),
                             modules.init_script));
        } else if (entry.key == "preload") {
            DLJOB_TRY(assign(read_word_list(entry.value, key, module_pattern, module_describe),
                             modules.preload));
        } else if (entry.key == "switch") {
            if (!entry.value.is_sequence()) {
                return invalid(entry.value.mark, key,
                               "expected a list of {from: MODULE, to: MODULE}");
            }
            for (std::size_t i = 0; i < entry.value.items.size(); ++i) {
                const YamlNode& item = entry.value.items[i];
                const std::string item_key = fmt::format("{}[{}]", key, i);
                DLJOB_TRY(check_mapping(item, item_key, {"from", "to"}));
                const auto* from = item.find("from");
                const auto* to = item.find("to");
                if (from == nullptr || to == nullptr) {
                    return invalid(item.mark, item_key, "expected both from: and to:");
                }
                ModuleSwitch sw;
                DLJOB_TRY(
                    assign(read_word(*from, item_key + ".from", module_pattern, module_describe),
                           sw.from));
                DLJOB_TRY(assign(read_word(*to, item_key + ".to", module_pattern, module_describe),
                                 sw.to));
                modules.switches.push_back(sw);
            }
        } else if (entry.key == "needs") {
            if (!entry.value.is_mapping()) {
                return invalid(entry.value.mark, key,
                               "expected a mapping of need: [modules], e.g. cuda: [cuda/12.2]");
            }
            const std::regex need_re{std::string(name_pattern)};
            for (const auto& need : entry.value.entries) {
                const std::string need_key = join_key(key, need.key);
                if (!std::regex_match(need.key, need_re)) {
                    return invalid(need.key_mark, need_key,
                                   fmt::format("expected a need name of {}", name_describe));
                }
                std::vector<std::string> list;
                DLJOB_TRY(assign(
                    read_word_list(need.value, need_key, module_pattern, module_describe), list));
                modules.needs[need.key] = list;
                site.origins[need_key] = need.value.mark.str();
            }
        }
    }
    if (modules.flavor == ModuleFlavor::none &&
        (!modules.preload.empty() || !modules.switches.empty() || !modules.needs.empty())) {
        return invalid(node.mark, "modules.system",
                       "system is none but modules are listed; expected lmod, tcl or cray");
    }
    if (!modules.switches.empty() && modules.flavor == ModuleFlavor::none) {
        return invalid(node.mark, "modules.switch", "switch needs a module system");
    }
    return {};
}

Result<void> read_scheduler(const YamlNode& node, SiteProfile& site) {
    DLJOB_TRY(check_mapping(node, "scheduler",
                            {"job_name_max", "job_name_pattern", "warning_signal", "grace_seconds",
                             "script_on_service_node", "max_array_size"}));
    SchedulerBehaviour& b = site.behaviour;
    for (const auto& entry : node.entries) {
        const std::string key = join_key("scheduler", entry.key);
        site.origins[key] = entry.value.mark.str();
        if (entry.key == "job_name_max") {
            int max = 0;
            DLJOB_TRY(assign(read_int(entry.value, key, 8, 256), max));
            b.job_name_max = static_cast<std::size_t>(max);
        } else if (entry.key == "job_name_pattern") {
            std::string pattern;
            DLJOB_TRY(assign(read_string(entry.value, key), pattern));
            try {
                const std::regex re{pattern};
                // A pattern that admits shell or directive metacharacters defeats the point.
                for (const char* probe : {"a b", "a;b", "a$b", "a\nb", "a'b", "a\"b", "a`b"}) {
                    if (std::regex_search(probe, re) && std::regex_match(probe, re)) {
                        return invalid(entry.value.mark, key,
                                       "the pattern admits spaces, quotes or shell "
                                       "metacharacters; expected a stricter one like "
                                       "^[A-Za-z][A-Za-z0-9_-]*$");
                    }
                }
            } catch (const std::regex_error& e) {
                return invalid(entry.value.mark, key,
                               fmt::format("not a valid regular expression: {}", e.what()));
            }
            b.job_name_pattern = pattern;
        } else if (entry.key == "warning_signal") {
            DLJOB_TRY(assign(read_word(entry.value, key, signal_pattern,
                                       "one of USR1, USR2, TERM, INT, HUP, none"),
                             b.warning_signal));
        } else if (entry.key == "grace_seconds") {
            DLJOB_TRY(assign(read_int(entry.value, key, 0, 3600), b.grace_seconds));
        } else if (entry.key == "script_on_service_node") {
            DLJOB_TRY(assign(read_bool(entry.value, key), b.script_on_service_node));
        } else if (entry.key == "max_array_size") {
            DLJOB_TRY(assign(read_int(entry.value, key, 1, 100000000), b.max_array_size));
        }
    }
    return {};
}

Result<void> read_node(const YamlNode& node, const std::string& path, SiteProfile& site,
                       NodeGeometry& geometry) {
    DLJOB_TRY(check_mapping(node, path, {"cores", "memory", "gpus", "gpu_model", "cores_per_gpu"}));
    for (const auto& entry : node.entries) {
        const std::string key = join_key(path, entry.key);
        site.origins[key] = entry.value.mark.str();
        // `auto`: this machine's, found when a command loads the profile (local partitions).
        const bool from_machine =
            entry.value.is_scalar() && !entry.value.quoted && entry.value.scalar == "auto";
        if (entry.key == "cores") {
            geometry.from_machine.cores = from_machine;
            if (!from_machine) {
                DLJOB_TRY(assign(read_int(entry.value, key, 1, 4096), geometry.cores));
            }
        } else if (entry.key == "memory") {
            geometry.from_machine.memory = from_machine;
            if (!from_machine) {
                DLJOB_TRY(assign(read_memory(entry.value, key), geometry.memory));
            }
        } else if (entry.key == "gpus") {
            geometry.from_machine.gpus = from_machine;
            if (!from_machine) {
                DLJOB_TRY(assign(read_int(entry.value, key, 0, 64), geometry.gpus));
            }
        } else if (entry.key == "gpu_model") {
            DLJOB_TRY(assign(read_word(entry.value, key, "[a-z0-9_.-]{1,32}",
                                       "a lower-case GPU model like k20, v100, a100"),
                             geometry.gpu_model));
        } else if (entry.key == "cores_per_gpu") {
            DLJOB_TRY(assign(read_number(entry.value, key, 0.0, 256.0), geometry.cores_per_gpu));
        }
    }
    if (node.find("cores") == nullptr || node.find("memory") == nullptr) {
        return invalid(node.mark, path, "expected at least cores: and memory:");
    }
    if (geometry.describes_machine() &&
        (!geometry.gpu_model.empty() || geometry.cores_per_gpu > 0)) {
        return invalid(node.mark, path,
                       "gpu_model and cores_per_gpu describe a cluster's nodes; a node of auto "
                       "values is the machine dljob runs on, whatever it has");
    }
    if (geometry.gpus == 0 && !geometry.from_machine.gpus &&
        (!geometry.gpu_model.empty() || geometry.cores_per_gpu > 0)) {
        return invalid(node.mark, join_key(path, "gpus"),
                       "gpu_model and cores_per_gpu need gpus of 1 or more");
    }
    if (geometry.cores_per_gpu * geometry.gpus > geometry.cores) {
        return invalid(node.find("cores_per_gpu")->mark, join_key(path, "cores_per_gpu"),
                       fmt::format("{} GPUs x {} cores each exceeds the node's {} cores",
                                   geometry.gpus, geometry.cores_per_gpu, geometry.cores));
    }
    return {};
}

// `mpi: {module: openmpi/4.1, launcher: mpirun.openmpi, flags: [--bind-to, none]}`: how the
// partition runs several ranks (rendered only for jobs of more than one rank).
// An MPI's flavor by the names its launcher and module go by: Debian's alternatives and the
// clusters' module trees both carry it (mpirun.openmpi, mpiexec.mpich, openmpi/4.1.5, mpich/3.4).
MpiFlavor infer_mpi_flavor(const MpiSpec& mpi) {
    const std::string program = std::filesystem::path(mpi.launcher).filename().string();
    if (program.ends_with(".openmpi") || mpi.module.starts_with("openmpi")) {
        return MpiFlavor::openmpi;
    }
    if (program.ends_with(".mpich") || mpi.module.starts_with("mpich")) {
        return MpiFlavor::mpich;
    }
    return MpiFlavor::unknown;
}

Result<void> read_mpi(const YamlNode& node, const std::string& path, MpiSpec& mpi) {
    DLJOB_TRY(check_mapping(node, path, {"module", "launcher", "flags", "flavor"}));
    if (const auto* module = node.find("module")) {
        DLJOB_TRY(assign(read_word(*module, join_key(path, "module"),
                                   "[A-Za-z0-9][A-Za-z0-9._/+-]{0,127}",
                                   "a module name of A-Z a-z 0-9 . _ / + -"),
                         mpi.module));
    }
    if (const auto* launcher = node.find("launcher")) {
        DLJOB_TRY(assign(read_word(*launcher, join_key(path, "launcher"),
                                   "[A-Za-z0-9/][A-Za-z0-9._/+-]{0,255}",
                                   "a program name or path, e.g. mpirun.openmpi"),
                         mpi.launcher));
    }
    if (const auto* flags = node.find("flags")) {
        DLJOB_TRY(assign(read_word_list(*flags, join_key(path, "flags"),
                                        "-{0,2}[A-Za-z0-9][A-Za-z0-9._,:=/+-]{0,127}",
                                        "options and their values, each a list item"),
                         mpi.flags));
    }
    if (const auto* flavor = node.find("flavor")) {
        std::string v;
        DLJOB_TRY(assign(read_choice(*flavor, join_key(path, "flavor"), {"openmpi", "mpich"}), v));
        mpi.flavor = v == "openmpi" ? MpiFlavor::openmpi : MpiFlavor::mpich;
    } else {
        mpi.flavor = infer_mpi_flavor(mpi);
    }
    return {};
}

// A partition's walltime: {default, max}, the default no longer than the maximum.
Result<void> read_partition_walltime(const YamlNode& value, const std::string& key,
                                     SiteProfile& site, Partition& p) {
    DLJOB_TRY(check_mapping(value, key, {"default", "max"}));
    const auto* def = value.find("default");
    const auto* max = value.find("max");
    if (def == nullptr || max == nullptr) {
        return invalid(value.mark, key, "expected both default: and max:");
    }
    DLJOB_TRY(assign(read_walltime(*def, key + ".default"), p.default_walltime));
    DLJOB_TRY(assign(read_walltime(*max, key + ".max"), p.max_walltime));
    site.origins[key + ".default"] = def->mark.str();
    site.origins[key + ".max"] = max->mark.str();
    if (p.default_walltime > p.max_walltime) {
        return invalid(def->mark, key + ".default",
                       fmt::format("default {} is above the maximum {}", p.default_walltime.hms(),
                                   p.max_walltime.hms()));
    }
    return {};
}

// `scheduler_options:`: key -> a word or a list of words, kept for the family to check.
Result<void> read_scheduler_options(const YamlNode& node, const std::string& path,
                                    SiteProfile& site, Partition& p) {
    if (!node.is_mapping()) {
        return invalid(node.mark, path, "expected a mapping of option: value or [values]");
    }
    for (const auto& entry : node.entries) {
        const std::string key = join_key(path, entry.key);
        if (!std::regex_match(entry.key, std::regex{std::string(name_pattern)})) {
            return invalid(entry.key_mark, key,
                           fmt::format("expected a name of {}", name_describe));
        }
        site.origins[key] = entry.value.mark.str();
        std::vector<std::string> values;
        if (entry.value.is_sequence()) {
            DLJOB_TRY(assign(read_word_list(entry.value, key, scheduler_option_pattern,
                                            scheduler_option_describe),
                             values));
        } else {
            std::string value;
            DLJOB_TRY(assign(
                read_word(entry.value, key, scheduler_option_pattern, scheduler_option_describe),
                value));
            values.push_back(std::move(value));
        }
        p.scheduler_options[entry.key] = std::move(values);
    }
    return {};
}

// One key of a partition (the keys were checked against the known ones).
Result<void> read_partition_field(const YamlNode::Entry& field, const std::string& key,
                                  SiteProfile& site, Partition& p) {
    const YamlNode& value = field.value;
    if (field.key == "queue") {
        DLJOB_TRY(
            assign(read_word(value, key, option_value_pattern, option_value_describe), p.queue));
    } else if (field.key == "scheduler") {
        // Which names are families is the families' to say (schedulers::check_site).
        DLJOB_TRY(assign(read_word(value, key, name_pattern, name_describe), p.scheduler));
    } else if (field.key == "launcher") {
        std::string v;
        DLJOB_TRY(assign(read_choice(value, key, {"aprun", "srun", "mpirun", "none"}), v));
        p.launcher = v == "aprun"    ? LauncherKind::aprun
                     : v == "srun"   ? LauncherKind::srun
                     : v == "mpirun" ? LauncherKind::mpirun
                                     : LauncherKind::none;
    } else if (field.key == "node") {
        DLJOB_TRY(read_node(value, key, site, p.node));
    } else if (field.key == "max_nodes") {
        DLJOB_TRY(assign(read_int(value, key, 1, 100000), p.max_nodes));
    } else if (field.key == "walltime") {
        DLJOB_TRY(read_partition_walltime(value, key, site, p));
    } else if (field.key == "features") {
        DLJOB_TRY(assign(read_word_list(value, key, "[A-Za-z0-9._-]{1,64}",
                                        "feature names of A-Z a-z 0-9 . _ -"),
                         p.features));
    } else if (field.key == "account_required") {
        DLJOB_TRY(assign(read_bool(value, key), p.account_required));
    } else if (field.key == "forbids_ppn") {
        DLJOB_TRY(assign(read_bool(value, key), p.forbids_ppn));
    } else if (field.key == "gpu_directive") {
        std::string v;
        DLJOB_TRY(assign(read_choice(value, key, {"gpus-per-node", "gres"}), v));
        p.gpu_directive = v == "gres" ? GpuDirective::gres : GpuDirective::gpus_per_node;
    } else if (field.key == "gpu_type_in_request") {
        DLJOB_TRY(assign(read_bool(value, key), p.gpu_type_in_request));
    } else if (field.key == "sqsub_flag") {
        DLJOB_TRY(assign(read_choice(value, key, {"threaded", "mpi", "serial"}), p.sqsub_flag));
    } else if (field.key == "extra_directives") {
        DLJOB_TRY(assign(read_word_list(value, key, extra_directive_pattern,
                                        "whole options like --qos=normal or -l gres=ccm"),
                         p.extra_directives));
    } else if (field.key == "mpi") {
        DLJOB_TRY(read_mpi(value, key, p.mpi));
    } else if (field.key == "scheduler_options") {
        DLJOB_TRY(read_scheduler_options(value, key, site, p));
    }
    return {};
}

// What a partition's keys must agree on between them; what its family accepts (launchers,
// node: auto, a queue) is the family's to check (schedulers::check_site).
Result<void> check_partition(const YamlNode& node, const std::string& path, const Partition& p) {
    if (p.forbids_ppn && p.node.gpus > 0 && p.node.cores_per_gpu <= 0) {
        return invalid(node.mark, join_key(path, "node.cores_per_gpu"),
                       "forbids_ppn means cores come with GPUs; say how many per GPU");
    }
    if (p.gpu_type_in_request && p.node.gpu_model.empty()) {
        return invalid(node.mark, join_key(path, "gpu_type_in_request"), "needs node.gpu_model");
    }
    return {};
}

Result<Partition> read_partition(const YamlNode::Entry& entry, SiteProfile& site) {
    const std::string path = join_key("partitions", entry.key);
    const YamlNode& node = entry.value;
    DLJOB_TRY(check_mapping(node, path,
                            {"queue", "scheduler", "launcher", "node", "max_nodes", "walltime",
                             "features", "account_required", "forbids_ppn", "gpu_directive",
                             "gpu_type_in_request", "sqsub_flag", "extra_directives", "mpi",
                             "scheduler_options"}));
    Partition p;
    p.name = entry.key;
    if (!std::regex_match(p.name, std::regex{std::string(name_pattern)})) {
        return invalid(entry.key_mark, path, fmt::format("expected a name of {}", name_describe));
    }
    for (const char* required : {"scheduler", "node", "walltime"}) {
        if (node.find(required) == nullptr) {
            return invalid(node.mark, join_key(path, required), "missing; it is required");
        }
    }
    // The partition's own place: where a check of its family about a key it lacks points.
    site.origins[path] = node.mark.str();
    for (const auto& field : node.entries) {
        const std::string key = join_key(path, field.key);
        site.origins[key] = field.value.mark.str();
        DLJOB_TRY(read_partition_field(field, key, site, p));
    }
    DLJOB_TRY(check_partition(node, path, p));
    return p;
}

Result<void> read_storage(const YamlNode& node, SiteProfile& site) {
    if (!node.is_mapping()) {
        return invalid(node.mark, "storage", "expected a mapping of tier name: {path: ...}");
    }
    for (const auto& entry : node.entries) {
        const std::string path = join_key("storage", entry.key);
        StorageTier tier;
        DLJOB_TRY(assign(
            read_choice(YamlNode{YamlNode::Kind::scalar, entry.key_mark, entry.key, false, {}, {}},
                        path, {"home", "project", "scratch", "node-local", "ramdisk"}),
            tier.name));
        DLJOB_TRY(
            check_mapping(entry.value, path,
                          {"path", "capacity", "per_node", "network", "purge_days", "file_quota"}));
        for (const auto& field : entry.value.entries) {
            const std::string key = join_key(path, field.key);
            site.origins[key] = field.value.mark.str();
            if (field.key == "path") {
                DLJOB_TRY(assign(read_word(field.value, key, storage_path_pattern,
                                           "an absolute path or one starting with $VARIABLE, of "
                                           "A-Z a-z 0-9 . _ / + - $ { }"),
                                 tier.path));
            } else if (field.key == "capacity") {
                MemorySize capacity;
                DLJOB_TRY(assign(read_memory(field.value, key), capacity));
                tier.capacity = capacity;
            } else if (field.key == "per_node") {
                DLJOB_TRY(assign(read_bool(field.value, key), tier.per_node));
            } else if (field.key == "network") {
                DLJOB_TRY(assign(read_bool(field.value, key), tier.network));
            } else if (field.key == "purge_days") {
                int days = 0;
                DLJOB_TRY(assign(read_int(field.value, key, 1, 3650), days));
                tier.purge_days = days;
            } else if (field.key == "file_quota") {
                int quota = 0;
                DLJOB_TRY(assign(read_int(field.value, key, 1, 2000000000), quota));
                tier.file_quota = quota;
            }
        }
        if (tier.path.empty()) {
            return invalid(entry.value.mark, join_key(path, "path"), "missing; it is required");
        }
        site.storage.push_back(tier);
    }
    return {};
}

} // namespace

bool looks_like_site_profile(const YamlNode& root) {
    return root.is_mapping() && root.find("partitions") != nullptr;
}

Result<SiteProfile> site_profile_from_yaml(const YamlNode& root) {
    DLJOB_TRY(check_mapping(root, "",
                            {"name", "description", "hostnames", "account", "modules", "scheduler",
                             "default_partition", "partitions", "storage"}));
    SiteProfile site;
    const auto* name = root.find("name");
    if (name == nullptr) {
        return invalid(root.mark, "name", fmt::format("missing: expected {}", name_describe));
    }
    DLJOB_TRY(assign(read_word(*name, "name", name_pattern, name_describe), site.name));
    site.origins["name"] = name->mark.str();
    if (const auto* n = root.find("description"); n != nullptr) {
        DLJOB_TRY(assign(read_string(*n, "description"), site.description));
    }
    if (const auto* n = root.find("hostnames"); n != nullptr) {
        DLJOB_TRY(assign(read_word_list(*n, "hostnames", hostname_pattern,
                                        "host name globs of A-Z a-z 0-9 . - * ? [ ]"),
                         site.hostnames));
    }
    if (const auto* n = root.find("account"); n != nullptr) {
        DLJOB_TRY(assign(read_word(*n, "account", option_value_pattern, option_value_describe),
                         site.account));
        site.origins["account"] = n->mark.str();
    }
    if (const auto* n = root.find("modules"); n != nullptr) {
        DLJOB_TRY(read_modules(*n, site));
    }
    if (const auto* n = root.find("scheduler"); n != nullptr) {
        DLJOB_TRY(read_scheduler(*n, site));
    }
    const auto* partitions = root.find("partitions");
    if (partitions == nullptr || !partitions->is_mapping() || partitions->entries.empty()) {
        return invalid(partitions != nullptr ? partitions->mark : root.mark, "partitions",
                       "expected a mapping with at least one partition");
    }
    for (const auto& entry : partitions->entries) {
        auto partition = read_partition(entry, site);
        if (!partition) {
            return fail(partition.error());
        }
        site.partitions.push_back(std::move(*partition));
    }
    if (const auto* n = root.find("default_partition"); n != nullptr) {
        DLJOB_TRY(assign(read_word(*n, "default_partition", name_pattern, name_describe),
                         site.default_partition));
        if (site.find_partition(site.default_partition) == nullptr) {
            std::string names;
            for (const auto& p : site.partitions) {
                names += names.empty() ? p.name : ", " + p.name;
            }
            return invalid(
                n->mark, "default_partition",
                fmt::format("no partition '{}'; valid choices: {}", site.default_partition, names));
        }
        site.origins["default_partition"] = n->mark.str();
    } else {
        site.default_partition = site.partitions.front().name;
        site.origins["default_partition"] = "default (the first partition)";
    }
    if (const auto* n = root.find("storage"); n != nullptr) {
        DLJOB_TRY(read_storage(*n, site));
    }
    return site;
}

Result<SiteProfile> load_site_profile(const std::filesystem::path& path) {
    auto document = parse_yaml_file(path);
    if (!document) {
        return fail(document.error());
    }
    auto site = site_profile_from_yaml(*document);
    if (!site) {
        return fail(site.error());
    }
    site->source_file = path;
    return site;
}

bool describes_machine(const SiteProfile& site) {
    return std::any_of(site.partitions.begin(), site.partitions.end(),
                       [](const Partition& p) { return p.node.describes_machine(); });
}

void describe_machine(SiteProfile& site, const MachineFacts& machine) {
    for (Partition& p : site.partitions) {
        NodeGeometry& node = p.node;
        const std::string key = "partitions." + p.name + ".node.";
        // `sites show` prints these next to each value, where a number would show its line.
        const auto origin = [&](const char* name, const std::string& found) {
            std::string said = site.origins[key + name];
            const std::string file = site.source_file.string() + ":";
            if (!site.source_file.empty() && said.rfind(file, 0) == 0) {
                said = "line " + said.substr(file.size());
            }
            site.origins[key + name] = fmt::format("this machine: {} (auto, {})", found, said);
        };
        if (node.from_machine.cores) {
            node.cores = std::max(1, machine.cores);
            node.cores_found = machine.cores_found;
            origin("cores", machine.cores_found);
        }
        if (node.from_machine.memory) {
            node.memory = machine.memory;
            node.memory_found = machine.memory_found;
            origin("memory", machine.memory_found);
        }
        if (node.from_machine.gpus) {
            node.gpus = std::max(0, machine.gpus);
            node.gpus_found = machine.gpus_found;
            origin("gpus", machine.gpus_found);
        }
    }
}

} // namespace dljob::config
