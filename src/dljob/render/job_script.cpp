#include <dljob/config/resolve.hpp>
#include <dljob/render/job_script.hpp>
#include <dljob/render/shell.hpp>
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/launcher.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <regex>

namespace dljob::render {
namespace {

constexpr std::string_view option_value_re = "[A-Za-z0-9._,:=+-]{1,128}";
constexpr std::string_view token_re = "[A-Za-z0-9][A-Za-z0-9._-]{0,127}";
constexpr std::string_view mail_re = R"([A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,190})";
constexpr std::string_view module_re = "[A-Za-z0-9][A-Za-z0-9._/+-]{0,127}";
constexpr std::string_view env_name_re = "[A-Za-z_][A-Za-z0-9_]{0,63}";
constexpr std::string_view label_re = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}";

bool matches(std::string_view value, std::string_view pattern) {
    return std::regex_match(std::string(value), std::regex{std::string(pattern)});
}

// For messages: control characters escaped, long values shortened (the value is refused, so
// nothing is cut silently).
std::string shown(std::string_view value) {
    std::string out;
    for (const char c : value.substr(0, 60)) {
        const auto byte = static_cast<unsigned char>(c);
        out += byte < 0x20 || byte == 0x7f ? fmt::format("\\x{:02x}", byte) : std::string(1, c);
    }
    return value.size() > 60 ? out + "..." : out;
}

Unexpected refuse(std::string_view field, std::string_view value, std::string_view expected) {
    return fail(ErrorCode::config_invalid,
                fmt::format("{}: '{}' cannot be given to the scheduler; expected {}", field,
                            shown(value), expected),
                "fix the value in the recipe, the site profile or the command line");
}

Result<void> require(std::string_view field, std::string_view value, std::string_view pattern,
                     std::string_view expected) {
    if (!matches(value, pattern)) {
        return refuse(field, value, expected);
    }
    return {};
}

std::uint32_t fnv1a(std::string_view text) {
    std::uint32_t hash = 2166136261U;
    for (const char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 16777619U;
    }
    return hash;
}

bool has_nul(std::string_view value) {
    return value.find('\0') != std::string_view::npos;
}

TemplateData text_item(std::string text) {
    TemplateData item;
    item.set("text", std::move(text));
    return item;
}

Result<std::vector<std::string>> training_command(const RenderRequest& req,
                                                  const ResolvedResources& resources) {
    std::vector<std::string> words;
    const Recipe& recipe = req.recipe;
    if (recipe.kind == RecipeKind::train) {
        if (!req.dltrain_binary.is_absolute() || has_nul(req.dltrain_binary.string())) {
            return refuse("dltrain binary", req.dltrain_binary.string(), "an absolute path");
        }
        if (has_nul(recipe.train.config.string()) || recipe.train.config.empty()) {
            return refuse("train.config", recipe.train.config.string(), "a file path");
        }
        words = {shell_quote(req.dltrain_binary.string()), "train", "--config",
                 shell_quote(recipe.train.config.string()), "--run-dir", R"("$DLJOB_RUN_DIR")",
                 "--data-dir", R"("$DLJOB_DATA_DIR")",
                 // Always named: left to itself dltrain takes a GPU it may not have been given
                 // (a CPU job on a GPU node), and where the GPU it was given cannot be used (no
                 // driver, cuDNN not loaded) it falls back to the CPU with only a warning, which
                 // on a cluster burns a GPU allocation at CPU speed. With `cuda` it refuses
                 // instead, naming what is missing (docs/engine.md, --device).
                 "--device", resources.gpus_per_node > 0 ? "cuda" : "cpu"};
        if (recipe.checkpoint.resume) {
            words.insert(words.end(), {"--resume", "auto"});
        }
        if (recipe.train.threads) {
            words.insert(words.end(), {"--threads", std::to_string(*recipe.train.threads)});
        }
        if (recipe.train.max_iter) {
            words.insert(words.end(), {"--max-iter", std::to_string(*recipe.train.max_iter)});
        }
        if (!recipe.train.weights.empty()) {
            if (has_nul(recipe.train.weights)) {
                return refuse("train.weights", recipe.train.weights, "a file path");
            }
            // Used only until the run has a checkpoint of its own (--resume auto wins).
            words.insert(words.end(),
                         {"--weights", shell_word_with_variables(recipe.train.weights)});
        }
        if (!recipe.train.weights_from_run.empty()) {
            const std::string dir = (recipe.train.weights_from_run / "checkpoints").string();
            if (has_nul(dir) || !recipe.train.weights_from_run.is_absolute()) {
                return refuse("train.weights", dir, "an absolute run directory");
            }
            // iter_<8 digits>.done markers sort by iteration; a checkpoint counts only with
            // its marker (docs/engine.md). None: ".ckpt", which dltrain refuses by name.
            words.insert(
                words.end(),
                {"--weights", fmt::format(R"sh("$(f=$(ls -1 {}/iter_*.done 2>/dev/null | sort | )sh"
                                          R"sh(tail -n 1); printf %s "${{f%.done}}")".ckpt)sh",
                                          shell_quote(dir))});
        }
        for (const auto& [key, value] : recipe.train.solver) {
            DLJOB_TRY(require(fmt::format("train.{}", key), value, R"([A-Za-z0-9.,+\[\]-]{1,128})",
                              "a number, a word or a list of numbers"));
            const std::string assignment = fmt::format("{}={}", key, value);
            words.insert(words.end(), {"--solver", matches(assignment, option_value_re)
                                                       ? assignment
                                                       : shell_quote(assignment)});
        }
        return words;
    }
    if (recipe.command.argv.empty()) {
        return refuse("command.argv", "", "a program and its arguments");
    }
    for (const auto& arg : recipe.command.argv) {
        if (has_nul(arg)) {
            return refuse("command.argv", arg, "arguments without NUL bytes");
        }
        // `~` and $NAME are expanded by the job's shell (a path under $HOME), nothing else.
        words.push_back(shell_word_with_variables(arg));
    }
    return words;
}

Result<const Partition*> find_partition(const RenderRequest& req) {
    const SiteProfile& site = req.site;
    const Partition* partition = site.find_partition(req.partition);
    if (partition != nullptr) {
        return partition;
    }
    std::string names;
    for (const auto& p : site.partitions) {
        names += (names.empty() ? "" : ", ") + p.name;
    }
    return fail(ErrorCode::config_invalid,
                fmt::format("site '{}' has no partition '{}'", site.name,
                            shown(req.partition.empty() ? site.default_partition : req.partition)),
                fmt::format("valid choices: {}", names));
}

// Values that reach directives or the command line of the scheduler: allowlisted.
Result<void> check_scheduler_values(const RenderRequest& req, const Partition& partition) {
    const SiteProfile& site = req.site;
    DLJOB_TRY(require("site name", site.name, label_re, "A-Z a-z 0-9 . _ -"));
    DLJOB_TRY(require("recipe name", req.recipe.name, label_re, "A-Z a-z 0-9 . _ -"));
    DLJOB_TRY(require("partition", partition.name, label_re, "A-Z a-z 0-9 . _ -"));
    DLJOB_TRY(require("job token", req.job_token, token_re,
                      "1 to 128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"));
    if (!partition.queue.empty()) {
        DLJOB_TRY(require("queue", partition.queue, option_value_re, "A-Z a-z 0-9 . _ , : = + -"));
    }
    for (const auto& feature : partition.features) {
        DLJOB_TRY(require("feature", feature, "[A-Za-z0-9._-]{1,64}", "A-Z a-z 0-9 . _ -"));
    }
    for (const auto& extra : partition.extra_directives) {
        DLJOB_TRY(require("extra directive", extra,
                          "--?[A-Za-z][A-Za-z0-9-]*([ =][A-Za-z0-9._,:=+/@-]{1,128})?",
                          "a whole option like --qos=normal or -l gres=ccm"));
    }
    DLJOB_TRY(require("scheduler.warning_signal", site.behaviour.warning_signal,
                      "USR1|USR2|TERM|INT|HUP|none", "one of USR1, USR2, TERM, INT, HUP, none"));
    if (site.behaviour.grace_seconds < 0 || site.behaviour.grace_seconds > 3600) {
        return refuse("scheduler.grace_seconds", std::to_string(site.behaviour.grace_seconds),
                      "0 to 3600 seconds");
    }
    return {};
}

Result<std::string> checked_account(const RenderRequest& req, const Partition& partition) {
    const std::string account = req.account.empty() ? req.site.account : req.account;
    if (!account.empty()) {
        DLJOB_TRY(require("account", account, option_value_re,
                          "A-Z a-z 0-9 . _ , : = + -, not starting with -"));
        if (account.front() == '-') {
            return refuse("account", account, "a value that does not start with -");
        }
    } else if (partition.account_required) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("partition '{}' of site '{}' requires an account", partition.name,
                                req.site.name),
                    "pass --account NAME, or set account: in your copy of the site profile");
    }
    return account;
}

Result<void> check_job_values(const RenderRequest& req) {
    if (!req.recipe.mail.address.empty()) {
        DLJOB_TRY(require("mail.address", req.recipe.mail.address, mail_re, "an e-mail address"));
    }
    if (!req.run_dir.is_absolute() || has_nul(req.run_dir.string()) ||
        req.run_dir.string().find('\n') != std::string::npos) {
        return refuse("run directory", req.run_dir.string(),
                      "an absolute path without NUL or newline");
    }
    for (const auto& component : req.run_dir) {
        if (component.string().size() > 255 || req.run_dir.string().size() > 4000) {
            return refuse("run directory", req.run_dir.string(),
                          "a path the file system can hold (names up to 255 bytes)");
        }
    }
    if (req.after && !req.after->scheduler_id.empty()) {
        DLJOB_TRY(require("--after", req.after->scheduler_id, token_re, "a scheduler job id"));
    }
    return {};
}

// The notes a render produces: for the caller, and in the script's comments alike.
class Notes {
public:
    explicit Notes(std::vector<std::string>& out) : m_out(out) {}
    void add(std::string note) {
        // Comments stay on one line and free of the user's raw bytes.
        std::string line;
        for (const char c : note) {
            const auto byte = static_cast<unsigned char>(c);
            line.push_back(byte < 0x20 || byte == 0x7f ? '?' : c);
        }
        m_comments.push_back(text_item(line));
        m_out.push_back(std::move(note));
    }
    [[nodiscard]] const TemplateData::List& comments() const { return m_comments; }

private:
    std::vector<std::string>& m_out;
    TemplateData::List m_comments;
};

// Asks the family for directives and the submit command; fills `out` and the template's
// scheduler values.
void plan_submission(const RenderRequest& req, const schedulers::SchedulerFamily& family,
                     schedulers::JobFacts& facts, RenderedJob& out, Notes& notes,
                     TemplateData& data) {
    const std::string wanted = req.job_name.empty() ? req.recipe.name : req.job_name;
    if (facts.name != wanted) {
        notes.add(fmt::format(
            "job name '{}' is not accepted by site {} (at most {} characters matching {}); the "
            "scheduler sees '{}'",
            shown(wanted), req.site.name, req.site.behaviour.job_name_max,
            req.site.behaviour.job_name_pattern, facts.name));
    }
    if (!facts.log_in_directive && family.log_in_directives()) {
        notes.add("the run directory has characters directives cannot carry; the log path is "
                  "passed on the submit command line only");
    }
    schedulers::SubmitPlan plan = family.plan(facts);
    for (auto& note : plan.notes) {
        notes.add(std::move(note));
    }
    if (req.after && !req.after->scheduler_id.empty()) {
        out.dependency_options = family.dependency_options(*req.after);
        family.add_submit_options(plan.submit_argv, out.dependency_options);
        notes.add(fmt::format("starts after job {} ({} {}) has ended{}", req.after->job_id,
                              family.name(), req.after->scheduler_id,
                              req.after->ok ? ", and only if it completed" : ", however it ended"));
    }
    TemplateData::List directives;
    for (const auto& d : plan.directives) {
        directives.push_back(text_item(d));
    }
    data.set("directives", directives);
    data.set("submit_command", command_line(plan.submit_argv));
    data.set("submit_from_script", plan.submit_from_script);
    out.submit_argv = std::move(plan.submit_argv);
    out.resource_options = std::move(plan.resource_options);
}

// The job's identity, geometry and walltime warning.
void set_job_values(const RenderRequest& req, const schedulers::SchedulerFamily& family,
                    const Partition& partition, const RenderedJob& out, Notes& notes,
                    TemplateData& data) {
    const SiteProfile& site = req.site;
    const ResolvedResources& res = out.resources;
    data.set("recipe_name", req.recipe.name);
    data.set("site_name", site.name);
    data.set("partition_name", partition.name);
    data.set("scheduler", std::string(family.name()));
    data.set("run_dir", shell_quote(req.run_dir.string()));
    data.set("script_path", "\"$DLJOB_RUN_DIR\"/" + shell_quote(out.script_name));
    data.set("job_token", shell_quote(req.job_token));
    data.set("walltime_expr", family.walltime_expression(res.walltime));
    const std::string signal = site.behaviour.warning_signal == "none"
                                   ? std::string("USR2")
                                   : site.behaviour.warning_signal;
    data.set("warning_signal", signal);
    const int warning_seconds =
        std::max(site.behaviour.grace_seconds, req.recipe.checkpoint.signal_margin_seconds);
    data.set("warning_seconds", std::to_string(warning_seconds));
    if (res.walltime.seconds() <= warning_seconds) {
        // The script's timer then warns after a second: the training checkpoints and leaves at
        // once, and a continued job gets nowhere, one attempt after another.
        notes.add(fmt::format(
            "resources.walltime {} is not longer than the {} s checkpoint warning before it: the "
            "job is warned after 1 s; ask for more walltime or a smaller checkpoint.signal_margin "
            "(site {} needs at least {} s)",
            res.walltime.hms(), warning_seconds, site.name, site.behaviour.grace_seconds));
    }
    // Schedulers without a warning signal get a timer in the script (legacy §1.7, §3.5).
    TemplateData::List timer;
    if (!family.signals_before_walltime(site.behaviour)) {
        TemplateData item;
        item.set("signal", signal).set("seconds", std::to_string(warning_seconds));
        timer.push_back(item);
    }
    data.set("timer", timer);
    data.set("nodes", std::to_string(res.nodes));
    data.set("gpus_per_node", std::to_string(res.gpus_per_node));
    data.set("cores_per_node", std::to_string(res.cores_per_node));
    data.set("job_id_expr", std::string(family.job_id_expression()));
}

// Data: read in place or staged to a tier of the site. Returns the data directory expression.
Result<std::string> set_data_values(const RenderRequest& req, const ResolvedResources& resources,
                                    Notes& notes, TemplateData& data) {
    const SiteProfile& site = req.site;
    const std::string source = req.recipe.data.source;
    if (has_nul(source) || source.find('\n') != std::string::npos) {
        return refuse("data.source", source, "a path without control characters");
    }
    data.set("data_source", source.empty() ? std::string("''") : shell_word_with_variables(source));
    std::string data_dir_expr = R"("$DLJOB_DATA_SOURCE")";
    bool stage = false;
    if (req.recipe.data.stage_to != "none") {
        const StorageTier* tier = site.find_storage(req.recipe.data.stage_to);
        if (tier == nullptr) {
            notes.add(fmt::format("site {} has no {} storage; the data is read in place", site.name,
                                  req.recipe.data.stage_to));
        } else {
            if (has_nul(tier->path) || tier->path.find('\n') != std::string::npos) {
                return refuse("storage path", tier->path, "a path without control characters");
            }
            data_dir_expr =
                shell_word_with_variables(tier->path) + "/" + shell_quote("dljob-" + req.job_token);
            stage = true;
        }
    }
    // A tar archive is extracted into the job's own directory on the node (never read in place:
    // a program would get one file where it expects a tree).
    const bool tar_source = !source.empty() && is_tar_archive(req.recipe.data);
    if (tar_source && !stage) {
        return refuse("data.source", source,
                      fmt::format("a directory: a tar archive is extracted on the node, and site "
                                  "{} has no {} storage to extract it to",
                                  site.name, req.recipe.data.stage_to));
    }
    data.set("tar_source", tar_source);
    data.set("data_dir", data_dir_expr);
    data.set("stage", stage);
    // Several ranks on one node each run the compute side's staging (templates/prologue).
    data.set("ranks_share_node",
             req.recipe.kind == RecipeKind::train && resources.tasks_per_node > 1);
    data.set("keep_staged", req.recipe.data.keep_staged);
    const bool dljob_usable = req.dljob_binary.is_absolute() &&
                              !has_nul(req.dljob_binary.string()) &&
                              req.dljob_binary.string().find('\n') == std::string::npos;
    // Packs are staged in the job by dljob itself (templates/prologue.mustache).
    if (stage && !dljob_usable) {
        return refuse("dljob binary", req.dljob_binary.string(), "an absolute path");
    }
    data.set("dljob_binary", shell_quote(req.dljob_binary.string()));
    return data_dir_expr;
}

// The right-hand side of `export NAME=...`: each value one word whose $NAME, ${NAME} and leading
// ~ the job's shell expands and nothing else; a path list joined by ':' around what the variable
// held, with no empty entry when it was unset (as Lmod's prepend_path/append_path).
Result<std::string> environment_value(const EnvironmentSetting& setting) {
    const std::string key = "command.environment." + setting.name;
    if (!matches(setting.name, env_name_re) || setting.name.rfind("DLJOB_", 0) == 0) {
        return refuse("command.environment", setting.name, "a variable name of A-Z a-z 0-9 _");
    }
    std::string joined;
    for (const auto& value : setting.values) {
        if (has_nul(value)) {
            return refuse(key, value, "a value without NUL bytes");
        }
        const bool list = setting.mode != EnvironmentSetting::Mode::set;
        if (list && (value.empty() || value.find(':') != std::string::npos)) {
            return refuse(key, value, "a path list entry, non-empty and without ':'");
        }
        if (!joined.empty()) {
            joined += ':';
        }
        joined += shell_word_with_variables(value);
    }
    switch (setting.mode) {
    case EnvironmentSetting::Mode::set:
        if (setting.values.size() != 1) {
            return refuse(key, joined, "exactly one value");
        }
        return joined;
    case EnvironmentSetting::Mode::prepend:
        return fmt::format("{1}\"${{{0}:+:${{{0}}}}}\"", setting.name, joined);
    case EnvironmentSetting::Mode::append:
        return fmt::format("\"${{{0}:+${{{0}}}:}}\"{1}", setting.name, joined);
    }
    return joined;
}

Result<void> set_command_values(const RenderRequest& req, const ResolvedResources& resources,
                                TemplateData& data) {
    auto command = training_command(req, resources);
    if (!command) {
        return fail(command.error());
    }
    std::string joined;
    for (const auto& word : *command) {
        joined += (joined.empty() ? "" : " ") + word;
    }
    data.set("command", joined);
    TemplateData::List environment;
    for (const auto& setting : req.recipe.command.environment) {
        auto value = environment_value(setting);
        if (!value) {
            return fail(value.error());
        }
        TemplateData item;
        item.set("name", setting.name).set("value", *value);
        environment.push_back(item);
    }
    data.set("environment", environment);
    return {};
}

// Module lines: switches, preload, then the recipe's needs (via the site's map) and extra
// modules, each module loaded once (two needs may map to one module: cuda, cudnn on Cray).
class ModuleLines {
public:
    Result<void> add(const std::string& verb, const std::vector<std::string>& args,
                     const std::string& field) {
        if (verb == "load") {
            if (std::find(m_loaded.begin(), m_loaded.end(), args.front()) != m_loaded.end()) {
                return {};
            }
            m_loaded.push_back(args.front());
        }
        std::string quoted;
        for (const auto& arg : args) {
            DLJOB_TRY(require(field, arg, module_re, "a module name of A-Z a-z 0-9 . _ / + -"));
            quoted += " " + arg;
        }
        TemplateData item;
        item.set("step", shell_quote("module " + verb + quoted));
        item.set("args", verb + quoted);
        // dljob_module checks that the last module named is loaded after the command: true of
        // load and switch, never of unload and purge, which run as they are.
        item.set("checked", verb == "load" || verb == "switch");
        m_commands.push_back(item);
        return {};
    }
    [[nodiscard]] const TemplateData::List& commands() const { return m_commands; }

private:
    TemplateData::List m_commands;
    std::vector<std::string> m_loaded;
};

Result<void> add_needed_modules(const RenderRequest& req, ModuleLines& lines) {
    const ModuleSystem& modules = req.site.modules;
    for (const auto& need : req.recipe.needs) {
        const auto it = modules.needs.find(need);
        if (it == modules.needs.end()) {
            if (modules.flavor == ModuleFlavor::none) {
                continue; // nothing to load: the machine provides it or the job fails visibly
            }
            std::string known;
            for (const auto& [key, unused] : modules.needs) {
                known += (known.empty() ? "" : ", ") + key;
            }
            return fail(ErrorCode::config_invalid,
                        fmt::format("site '{}' does not say which modules provide '{}'",
                                    req.site.name, shown(need)),
                        fmt::format("needs it knows: {}; or name the module under "
                                    "environment.modules",
                                    known.empty() ? "none" : known));
        }
        for (const auto& name : it->second) {
            DLJOB_TRY(lines.add("load", {name}, "modules.needs." + need));
        }
    }
    return {};
}

Result<void> set_module_values(const RenderRequest& req, const Partition& partition, int ranks,
                               TemplateData& data) {
    const ModuleSystem& modules = req.site.modules;
    ModuleLines lines;
    // What the user asked to clear goes first, so that nothing dljob loads is undone by it
    // (the SHARCNET seed unloads intel, mkl and openmpi before it loads gcc).
    if ((req.recipe.purge || !req.recipe.unload.empty()) && modules.flavor == ModuleFlavor::none) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("site '{}' has no module system, but the recipe purges or "
                                "unloads modules",
                                req.site.name),
                    "drop environment.purge and environment.unload for this site");
    }
    if (req.recipe.purge) {
        DLJOB_TRY(lines.add("purge", {}, "environment.purge"));
    }
    for (const auto& name : req.recipe.unload) {
        DLJOB_TRY(lines.add("unload", {name}, "environment.unload"));
    }
    for (const auto& sw : modules.switches) {
        DLJOB_TRY(lines.add("switch", {sw.from, sw.to}, "modules.switch"));
    }
    for (const auto& name : modules.preload) {
        DLJOB_TRY(lines.add("load", {name}, "modules.preload"));
    }
    DLJOB_TRY(add_needed_modules(req, lines));
    for (const auto& name : req.recipe.modules) {
        if (modules.flavor == ModuleFlavor::none) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("site '{}' has no module system, but the recipe lists module "
                                    "'{}'",
                                    req.site.name, shown(name)),
                        "drop environment.modules for this site");
        }
        DLJOB_TRY(lines.add("load", {name}, "environment.modules"));
    }
    // The MPI library the ranks' launcher and dltrain's MPI plugin need (site profile `mpi:`).
    if (ranks > 1 && !partition.mpi.module.empty()) {
        DLJOB_TRY(lines.add("load", {partition.mpi.module}, "mpi.module"));
    }
    data.set("module_commands", lines.commands());
    TemplateData::List activate;
    if (!req.recipe.activate.empty()) {
        const std::string& env = req.recipe.activate;
        if (has_nul(env)) {
            return refuse("environment.activate", env, "a value without NUL bytes");
        }
        TemplateData item;
        // A path is a venv (its bin/activate sourced); a bare name a conda environment, whose
        // `conda activate` needs conda's shell hook in this non-interactive shell first.
        const bool venv = env.front() == '/' || env.front() == '~' || env.front() == '$';
        item.set("step", shell_quote("activate " + env));
        item.set("activate_command",
                 venv ? ". " + shell_word_with_variables(env + "/bin/activate")
                      : "eval \"$(conda shell.bash hook)\" && conda activate " + shell_quote(env));
        activate.push_back(item);
    }
    data.set("activate", activate);
    data.set("has_modules", !lines.commands().empty());
    TemplateData::List module_init;
    if (!modules.init_script.empty() && !lines.commands().empty()) {
        DLJOB_TRY(require("modules.init", modules.init_script, "/[A-Za-z0-9._/+-]{0,4000}",
                          "an absolute path of A-Z a-z 0-9 . _ / + -"));
        TemplateData item;
        item.set("step", shell_quote(". " + modules.init_script));
        item.set("path", shell_quote(modules.init_script));
        module_init.push_back(item);
    }
    data.set("module_init", module_init);
    return {};
}

// How the script starts the training: the partition's launcher, given the job's geometry.
void set_launch_values(const Partition& partition, const ResolvedResources& res,
                       TemplateData& data) {
    const schedulers::Launcher& launcher = schedulers::job_launcher(partition, res);
    const std::string self = R"(/bin/bash "$DLJOB_SCRIPT" --dljob-compute)";
    data.set("launch", launcher.command(schedulers::launch_geometry(partition, res), self));
    data.set("launch_step",
             shell_quote(fmt::format("run the training through {} launcher", launcher.name())));
    data.set("launcher_description",
             launcher.name() == "none"
                 ? std::string("this shell's node")
                 : fmt::format("started by {} on the compute nodes", launcher.name()));
}

} // namespace

std::vector<std::string> dependency_options(const std::string& family, const JobDependency& after) {
    return schedulers::family_of(family).dependency_options(after);
}

std::string scheduler_job_name(const std::string& wanted, const SchedulerBehaviour& behaviour) {
    bool ok = !wanted.empty() && wanted.size() <= behaviour.job_name_max &&
              matches(wanted, "[A-Za-z0-9._-]+") && wanted.front() != '-' && wanted.front() != '.';
    if (ok) {
        try {
            ok = std::regex_search(wanted, std::regex{behaviour.job_name_pattern});
        } catch (const std::regex_error&) {
            ok = false;
        }
    }
    return ok ? wanted : fmt::format("dlj-{:08x}", fnv1a(wanted));
}

// dltrain's CUDA plugin needs the CUDA runtime and cuDNN when the job runs. A GPU training on a
// site with modules that does not ask for them gets neither loaded, and dltrain then refuses the
// GPU it was given: said at render (and so at validate and submit), not after the queue.
void note_cuda_needs(const RenderRequest& req, const ResolvedResources& resources, Notes& notes) {
    if (req.recipe.kind != RecipeKind::train || resources.gpus_per_node == 0 ||
        req.site.modules.flavor == ModuleFlavor::none) {
        return;
    }
    if (const std::string blocker = gpu_training_blocker(req.site); !blocker.empty()) {
        notes.add(blocker);
    }
    std::string missing;
    for (const char* need : {"cuda", "cudnn"}) {
        if (std::find(req.recipe.needs.begin(), req.recipe.needs.end(), need) ==
            req.recipe.needs.end()) {
            missing += std::string(missing.empty() ? "" : " and ") + need;
        }
    }
    if (!missing.empty()) {
        notes.add(fmt::format("the recipe asks for GPUs but its environment.needs has no {}: "
                              "site {} loads them as modules, and without them dltrain's CUDA "
                              "plugin cannot start and the job fails; add needs: [cuda, cudnn]",
                              missing, req.site.name));
    }
}

// More GPUs than a node has, with nodes: left out: the job gets the fewest whole nodes that hold
// them (config/resolve.cpp). Said, so that `render` shows where they and the ranks go.
void note_gpu_nodes(const RenderRequest& req, const ResolvedResources& resources, Notes& notes) {
    const Resources& want = req.recipe.resources;
    if (want.gpus == 0 || want.nodes || resources.nodes <= 1) {
        return;
    }
    notes.add(fmt::format(
        "{} GPUs on nodes of {} GPU(s) each: {} whole nodes, {}", want.gpus,
        resources.gpus_per_node, resources.nodes,
        req.recipe.kind == RecipeKind::train
            ? fmt::format("one dltrain rank per GPU ({} per node)", resources.tasks_per_node)
            : std::string("the command once on each")));
}

Result<RenderedJob> render_job(const RenderRequest& req, TemplateEngine& templates) {
    auto partition = find_partition(req);
    if (!partition) {
        return fail(partition.error());
    }
    const Partition& part = **partition;
    auto resources = config::resolve_resources(req.recipe, req.site, part);
    if (!resources) {
        return fail(resources.error());
    }
    DLJOB_TRY(check_scheduler_values(req, part));
    auto account = checked_account(req, part);
    if (!account) {
        return fail(account.error());
    }
    DLJOB_TRY(check_job_values(req));

    const schedulers::SchedulerFamily& family = schedulers::family_of(part.scheduler);
    if (const std::string refused = family.refusal(schedulers::JobFeature::after);
        req.after && !refused.empty()) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("--after: site {} ({}) cannot make a job wait for another: {}",
                                req.site.name, family.name(), refused));
    }
    RenderedJob out;
    out.scheduler = part.scheduler;
    out.resources = *resources;
    out.scheduler_job_name = scheduler_job_name(
        req.job_name.empty() ? req.recipe.name : req.job_name, req.site.behaviour);
    out.script_name = std::string(family.script_name());
    const std::string log = (req.run_dir / "job.log").string();
    schedulers::JobFacts facts{req,           part,
                               out.resources, out.scheduler_job_name,
                               *account,      (req.run_dir / out.script_name).string(),
                               log,           is_directive_safe(log)};
    Notes notes(out.notes);
    note_cuda_needs(req, out.resources, notes);
    note_gpu_nodes(req, out.resources, notes);
    TemplateData data;
    plan_submission(req, family, facts, out, notes, data);
    set_job_values(req, family, part, out, notes, data);
    auto data_dir = set_data_values(req, out.resources, notes, data);
    if (!data_dir) {
        return fail(data_dir.error());
    }
    // A batch job that checkpointed submits its next attempt itself through `dljob
    // continue-job` (the local wrapper does so for `local`); without a usable dljob path the
    // next `dljob status` continues it instead.
    data.set("continue_job", family.job_continues_itself() && req.dljob_binary.is_absolute() &&
                                 !has_nul(req.dljob_binary.string()) &&
                                 req.dljob_binary.string().find('\n') == std::string::npos);
    DLJOB_TRY(set_command_values(req, out.resources, data));
    DLJOB_TRY(
        set_module_values(req, part, out.resources.nodes * out.resources.tasks_per_node, data));
    set_launch_values(part, out.resources, data);
    data.set("notes", notes.comments());

    auto script_text = templates.render(std::string(family.template_name()), data);
    if (!script_text) {
        return fail(script_text.error());
    }
    out.script = std::move(*script_text);
    return out;
}

} // namespace dljob::render
