#include <dljob/config/resolve.hpp>
#include <dljob/render/job_script.hpp>
#include <dljob/render/shell.hpp>

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

struct Plan {
    std::vector<std::string> directives; // the text after "#SBATCH " / "#PBS "
    std::vector<std::string> submit_argv;
    std::vector<std::string> notes;
};

std::string gpu_request(const Partition& partition, int gpus) {
    const std::string typed = partition.gpu_type_in_request
                                  ? fmt::format("{}:{}", partition.node.gpu_model, gpus)
                                  : std::to_string(gpus);
    return partition.gpu_directive == GpuDirective::gres ? fmt::format("--gres=gpu:{}", typed)
                                                         : fmt::format("--gpus-per-node={}", typed);
}

void plan_slurm(const RenderRequest& req, const Partition& partition, const ResolvedResources& res,
                const std::string& name, const std::string& account, const std::string& script,
                const std::string& log, bool log_in_directive, Plan& plan) {
    std::vector<std::string> options;
    options.push_back("--job-name=" + name);
    if (!account.empty()) {
        options.push_back("--account=" + account);
    }
    if (!partition.queue.empty()) {
        options.push_back("--partition=" + partition.queue);
    }
    options.push_back(fmt::format("--nodes={}", res.nodes));
    options.push_back("--ntasks-per-node=1");
    options.push_back(fmt::format("--cpus-per-task={}", res.cores_per_node));
    if (res.gpus_per_node > 0) {
        options.push_back(gpu_request(partition, res.gpus_per_node));
    }
    if (res.memory.mib() > 0) {
        options.push_back("--mem=" + res.memory.slurm());
    }
    options.push_back("--time=" + res.walltime.slurm());
    if (!partition.features.empty()) {
        std::string joined;
        for (const auto& f : partition.features) {
            joined += (joined.empty() ? "" : "&") + f;
        }
        options.push_back("--constraint=" + joined);
    }
    const std::size_t output_index = options.size();
    options.push_back("--output=" + log);
    options.push_back("--open-mode=append");
    if (req.site.behaviour.warning_signal != "none") {
        options.push_back(fmt::format("--signal=B:{}@{}", req.site.behaviour.warning_signal,
                                      req.site.behaviour.grace_seconds));
    }
    // dljob resubmits after exit 75 (reliability.md D1.4); Slurm must not requeue on its own.
    options.push_back("--no-requeue");
    const MailSpec& mail = req.recipe.mail;
    if (!mail.address.empty()) {
        std::string types;
        for (const auto& [on, type] :
             {std::pair{mail.on_begin, "BEGIN"}, std::pair{mail.on_end, "END"},
              std::pair{mail.on_fail, "FAIL"}}) {
            if (on) {
                types += (types.empty() ? "" : ",") + std::string(type);
            }
        }
        options.push_back("--mail-user=" + mail.address);
        options.push_back("--mail-type=" + (types.empty() ? std::string("NONE") : types));
    }
    for (const auto& extra : partition.extra_directives) {
        options.push_back(extra);
    }
    for (std::size_t i = 0; i < options.size(); ++i) {
        if (i != output_index || log_in_directive) {
            plan.directives.push_back(options[i]);
        }
    }
    plan.submit_argv = {"sbatch", "--parsable"};
    for (const auto& option : options) {
        // "-l gres=ccm"-style extras are two argv elements.
        const auto space = option.find(' ');
        if (space == std::string::npos) {
            plan.submit_argv.push_back(option);
        } else {
            plan.submit_argv.push_back(option.substr(0, space));
            plan.submit_argv.push_back(option.substr(space + 1));
        }
    }
    plan.submit_argv.push_back(script);
}

std::string mail_events(const MailSpec& mail) {
    std::string events;
    if (mail.on_begin) {
        events += "b";
    }
    if (mail.on_end) {
        events += "e";
    }
    if (mail.on_fail) {
        events += "a";
    }
    return events.empty() || mail.address.empty() ? std::string("n") : events;
}

// PBS/Torque and Moab share the #PBS dialect. Options go on the qsub/msub command line too, with
// a single -l (legacy-schedulers.md §5.5: CLI flags win, and the Slurm wrappers take one -l).
void plan_pbs(const RenderRequest& req, const Partition& partition, const ResolvedResources& res,
              const std::string& name, const std::string& account, const std::string& script,
              const std::string& log, bool log_in_directive, Plan& plan) {
    const bool moab = partition.scheduler == SchedulerKind::moab;
    std::string nodes;
    if (partition.forbids_ppn) {
        nodes = fmt::format("nodes={}:gpus={}", res.nodes, res.gpus_per_node);
    } else if (partition.launcher == LauncherKind::aprun) {
        // Cray nodes are allocated whole; the GPU comes with the node (XK7: one K20).
        nodes = fmt::format("nodes={}:ppn={}", res.nodes, partition.node.cores);
    } else if (res.gpus_per_node > 0) {
        nodes = fmt::format("nodes={}:ppn={}:gpus={}", res.nodes, res.cores_per_node,
                            res.gpus_per_node);
    } else {
        nodes = fmt::format("nodes={}:ppn={}", res.nodes, res.cores_per_node);
    }
    std::string resources = fmt::format("{},walltime={}", nodes, res.walltime.hms());
    // Cray: memory is informational (aprun -m decides); Hélios: memory follows the GPUs.
    if (res.memory.mib() > 0 && partition.launcher != LauncherKind::aprun &&
        !partition.forbids_ppn) {
        resources += ",mem=" + res.memory.pbs();
    }
    std::vector<std::pair<std::string, std::string>> options;
    options.emplace_back("-N", name);
    if (!account.empty()) {
        options.emplace_back("-A", account);
    }
    if (!partition.queue.empty()) {
        options.emplace_back("-q", partition.queue);
    }
    options.emplace_back("-l", resources);
    if (moab && !partition.features.empty()) {
        std::string joined;
        for (const auto& f : partition.features) {
            joined += (joined.empty() ? "" : ":") + f;
        }
        options.emplace_back("-l", "feature=" + joined);
    }
    options.emplace_back("-j", "oe");
    const std::size_t output_index = options.size();
    options.emplace_back("-o", log);
    options.emplace_back("-r", "n");
    options.emplace_back("-m", mail_events(req.recipe.mail));
    if (!req.recipe.mail.address.empty()) {
        options.emplace_back("-M", req.recipe.mail.address);
    }
    for (std::size_t i = 0; i < options.size(); ++i) {
        if (i != output_index || log_in_directive) {
            plan.directives.push_back(options[i].first + " " + options[i].second);
        }
    }
    for (const auto& extra : partition.extra_directives) {
        plan.directives.push_back(extra);
    }
    plan.submit_argv = {moab ? "msub" : "qsub"};
    for (const auto& [flag, value] : options) {
        plan.submit_argv.push_back(flag);
        plan.submit_argv.push_back(value);
    }
    for (const auto& extra : partition.extra_directives) {
        const auto space = extra.find(' ');
        if (space == std::string::npos) {
            plan.submit_argv.push_back(extra);
        } else {
            plan.submit_argv.push_back(extra.substr(0, space));
            plan.submit_argv.push_back(extra.substr(space + 1));
        }
    }
    plan.submit_argv.push_back(script);
}

void plan_sqsub(const RenderRequest& req, const Partition& partition, const ResolvedResources& res,
                const std::string& name, const std::string& script, const std::string& log,
                Plan& plan) {
    MemorySize memory = res.memory;
    if (memory.mib() == 0) {
        // sqsub requires --mpp; take the share of the node that goes with the cores.
        memory = MemorySize::from_mib(std::max<std::int64_t>(
            1024, partition.node.memory.mib() * res.cores_per_node / partition.node.cores));
        plan.notes.push_back(fmt::format("sqsub needs memory: using {} ({} of {} cores' share)",
                                         memory.sqsub(), res.cores_per_node, partition.node.cores));
    }
    plan.submit_argv = {"sqsub", "-q", partition.queue};
    if (!partition.sqsub_flag.empty()) {
        plan.submit_argv.insert(plan.submit_argv.end(), {"-f", partition.sqsub_flag});
    }
    plan.submit_argv.insert(plan.submit_argv.end(), {"-n", std::to_string(res.cores_per_node)});
    if (res.nodes > 1) {
        plan.submit_argv.insert(plan.submit_argv.end(), {"-N", std::to_string(res.nodes)});
    }
    if (res.gpus_per_node > 0) {
        plan.submit_argv.push_back(fmt::format("--gpp={}", res.gpus_per_node));
    }
    plan.submit_argv.push_back("--mpp=" + memory.sqsub());
    plan.submit_argv.insert(plan.submit_argv.end(),
                            {"-r", res.walltime.sqsub(), "-j", name, "-o", log});
    plan.submit_argv.push_back("--idfile=" + (req.run_dir / "jobid").string());
    if (req.recipe.mail.on_end && !req.recipe.mail.address.empty()) {
        plan.submit_argv.push_back("--mail-end");
    }
    for (const auto& extra : partition.extra_directives) {
        plan.submit_argv.push_back(extra);
    }
    // The command is a script, not an MPI program: without --nompirun sqsub wraps it in mpirun.
    plan.submit_argv.insert(plan.submit_argv.end(), {"--nompirun", "/bin/bash", script});
}

std::string launch_line(const Partition& partition, const ResolvedResources& res) {
    std::string self = R"(/bin/bash "$DLJOB_SCRIPT" --dljob-compute)";
    switch (partition.launcher) {
    case LauncherKind::aprun:
        return fmt::format("aprun -n {} -N 1 -d {} -cc none -b -- {}", res.nodes,
                           partition.node.cores, self);
    case LauncherKind::srun:
        return fmt::format("srun --nodes={0} --ntasks={0} --ntasks-per-node=1 --cpus-per-task={1} "
                           "-- {2}",
                           res.nodes, res.cores_per_node, self);
    case LauncherKind::mpirun:
        return fmt::format("mpirun -n {} -- {}", res.nodes, self);
    case LauncherKind::none:
        return self;
    }
    return self;
}

const char* template_name(SchedulerKind kind) {
    switch (kind) {
    case SchedulerKind::slurm:
        return "slurm.sh";
    case SchedulerKind::pbs:
        return "pbs.sh";
    case SchedulerKind::moab:
        return "moab.sh";
    case SchedulerKind::sqsub:
        return "sqsub.sh";
    case SchedulerKind::local:
        return "local.sh";
    }
    return "local.sh";
}

const char* job_id_expression(SchedulerKind kind) {
    switch (kind) {
    case SchedulerKind::slurm:
        return R"("${SLURM_JOB_ID:-}")";
    case SchedulerKind::pbs:
        return R"("${PBS_JOBID:-${SLURM_JOB_ID:-}}")";
    case SchedulerKind::moab:
        return R"("${MOAB_JOBID:-${PBS_JOBID:-}}")";
    case SchedulerKind::sqsub:
        return R"("${PBS_JOBID:-${LSB_JOBID:-}}")";
    case SchedulerKind::local:
        return R"("local-$$")";
    }
    return "''";
}

Result<std::vector<std::string>> training_command(const RenderRequest& req,
                                                  const std::string& data_dir_expr) {
    (void)data_dir_expr;
    std::vector<std::string> words;
    const Recipe& recipe = req.recipe;
    if (recipe.kind == RecipeKind::train) {
        if (!req.dltrain_binary.is_absolute() || has_nul(req.dltrain_binary.string())) {
            return refuse("dltrain binary", req.dltrain_binary.string(), "an absolute path");
        }
        if (has_nul(recipe.train.config.string()) || recipe.train.config.empty()) {
            return refuse("train.config", recipe.train.config.string(), "a file path");
        }
        words = {shell_quote(req.dltrain_binary.string()),
                 "train",
                 "--config",
                 shell_quote(recipe.train.config.string()),
                 "--run-dir",
                 R"("$DLJOB_RUN_DIR")",
                 "--data-dir",
                 R"("$DLJOB_DATA_DIR")"};
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

} // namespace

std::vector<std::string> dependency_options(SchedulerKind kind, const JobDependency& after) {
    const char* const condition = after.ok ? "afterok" : "afterany";
    switch (kind) {
    case SchedulerKind::slurm:
        return {fmt::format("--dependency={}:{}", condition, after.scheduler_id)};
    case SchedulerKind::pbs:
    case SchedulerKind::moab:
        // Torque's qsub, PBS Pro's and Moab's msub all take the PBS form.
        return {"-W", fmt::format("depend={}:{}", condition, after.scheduler_id)};
    case SchedulerKind::sqsub:
        // sqsub -w waits for the job to end, however it ends; for `ok` dljob status cancels
        // a dependant whose job failed before it could start.
        return {"-w", after.scheduler_id};
    case SchedulerKind::local:
        return {}; // the local wrapper waits (schedulers/local.cpp)
    }
    return {};
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

std::string command_line(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& arg : argv) {
        if (!out.empty()) {
            out.push_back(' ');
        }
        out += is_directive_safe(arg) ? arg : shell_quote(arg);
    }
    return out;
}

Result<RenderedJob> render_job(const RenderRequest& req, TemplateEngine& templates) {
    const SiteProfile& site = req.site;
    const Partition* partition = site.find_partition(req.partition);
    if (partition == nullptr) {
        std::string names;
        for (const auto& p : site.partitions) {
            names += (names.empty() ? "" : ", ") + p.name;
        }
        return fail(
            ErrorCode::config_invalid,
            fmt::format("site '{}' has no partition '{}'", site.name,
                        shown(req.partition.empty() ? site.default_partition : req.partition)),
            fmt::format("valid choices: {}", names));
    }
    auto resources = config::resolve_resources(req.recipe, site, *partition);
    if (!resources) {
        return fail(resources.error());
    }
    const ResolvedResources& res = *resources;

    // Values that reach directives or the command line of the scheduler: allowlisted.
    DLJOB_TRY(require("site name", site.name, label_re, "A-Z a-z 0-9 . _ -"));
    DLJOB_TRY(require("recipe name", req.recipe.name, label_re, "A-Z a-z 0-9 . _ -"));
    DLJOB_TRY(require("partition", partition->name, label_re, "A-Z a-z 0-9 . _ -"));
    DLJOB_TRY(require("job token", req.job_token, token_re,
                      "1 to 128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"));
    if (!partition->queue.empty()) {
        DLJOB_TRY(require("queue", partition->queue, option_value_re, "A-Z a-z 0-9 . _ , : = + -"));
    }
    for (const auto& feature : partition->features) {
        DLJOB_TRY(require("feature", feature, "[A-Za-z0-9._-]{1,64}", "A-Z a-z 0-9 . _ -"));
    }
    for (const auto& extra : partition->extra_directives) {
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
    const std::string account = req.account.empty() ? site.account : req.account;
    if (!account.empty()) {
        DLJOB_TRY(require("account", account, option_value_re,
                          "A-Z a-z 0-9 . _ , : = + -, not starting with -"));
        if (account.front() == '-') {
            return refuse("account", account, "a value that does not start with -");
        }
    } else if (partition->account_required) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("partition '{}' of site '{}' requires an account", partition->name,
                                site.name),
                    "pass --account NAME, or set account: in your copy of the site profile");
    }
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

    RenderedJob out;
    out.scheduler = partition->scheduler;
    out.resources = res;
    const std::string wanted_name = req.job_name.empty() ? req.recipe.name : req.job_name;
    out.scheduler_job_name = scheduler_job_name(wanted_name, site.behaviour);
    Plan plan;
    if (out.scheduler_job_name != wanted_name) {
        plan.notes.push_back(fmt::format(
            "job name '{}' is not accepted by site {} (at most {} characters matching {}); the "
            "scheduler sees '{}'",
            shown(wanted_name), site.name, site.behaviour.job_name_max,
            site.behaviour.job_name_pattern, out.scheduler_job_name));
    }
    const bool pbs_family =
        partition->scheduler == SchedulerKind::pbs || partition->scheduler == SchedulerKind::moab;
    out.script_name = pbs_family ? "job.pbs" : "job.sh";
    const std::string script = (req.run_dir / out.script_name).string();
    const std::string log = (req.run_dir / "job.log").string();
    const bool log_safe = is_directive_safe(log);
    if (!log_safe && partition->scheduler != SchedulerKind::sqsub &&
        partition->scheduler != SchedulerKind::local) {
        plan.notes.push_back("the run directory has characters directives cannot carry; the log "
                             "path is passed on the submit command line only");
    }
    switch (partition->scheduler) {
    case SchedulerKind::slurm:
        plan_slurm(req, *partition, res, out.scheduler_job_name, account, script, log, log_safe,
                   plan);
        break;
    case SchedulerKind::pbs:
    case SchedulerKind::moab:
        plan_pbs(req, *partition, res, out.scheduler_job_name, account, script, log, log_safe,
                 plan);
        break;
    case SchedulerKind::sqsub:
        plan_sqsub(req, *partition, res, out.scheduler_job_name, script, log, plan);
        break;
    case SchedulerKind::local:
        plan.submit_argv = {"/bin/bash", script};
        break;
    }
    if (req.after && !req.after->scheduler_id.empty()) {
        DLJOB_TRY(require("--after", req.after->scheduler_id, token_re, "a scheduler job id"));
        out.dependency_options = dependency_options(partition->scheduler, *req.after);
        // Options go before the script; sqsub's before --nompirun and the command.
        auto at = std::find(plan.submit_argv.begin(), plan.submit_argv.end(), "--nompirun");
        if (partition->scheduler != SchedulerKind::sqsub) {
            at = plan.submit_argv.end() - 1;
        }
        plan.submit_argv.insert(at, out.dependency_options.begin(), out.dependency_options.end());
        plan.notes.push_back(
            fmt::format("starts after job {} ({} {}) has ended{}", req.after->job_id,
                        to_string(partition->scheduler), req.after->scheduler_id,
                        req.after->ok ? ", and only if it completed" : ", however it ended"));
    }
    out.submit_argv = plan.submit_argv;
    out.notes = plan.notes;

    // Script values: quoted.
    TemplateData data;
    TemplateData::List directives;
    for (const auto& d : plan.directives) {
        directives.push_back(text_item(d));
    }
    data.set("directives", directives);
    TemplateData::List notes;
    const auto comment_note = [&notes](const std::string& note) {
        // Notes go into comments: keep them on one line and free of the user's raw bytes.
        std::string line;
        for (const char c : note) {
            const auto byte = static_cast<unsigned char>(c);
            line.push_back(byte < 0x20 || byte == 0x7f ? '?' : c);
        }
        notes.push_back(text_item(line));
    };
    for (const auto& note : plan.notes) {
        comment_note(note);
    }
    data.set("notes", notes);
    // A note found after that: for the caller and in the script's comments alike.
    const auto late_note = [&](std::string note) {
        comment_note(note);
        data.set("notes", notes);
        out.notes.push_back(std::move(note));
    };
    data.set("recipe_name", req.recipe.name);
    data.set("site_name", site.name);
    data.set("partition_name", partition->name);
    data.set("scheduler", to_string(partition->scheduler));
    data.set("submit_command", command_line(plan.submit_argv));
    data.set("run_dir", shell_quote(req.run_dir.string()));
    data.set("script_path", "\"$DLJOB_RUN_DIR\"/" + shell_quote(out.script_name));
    data.set("job_token", shell_quote(req.job_token));
    data.set("walltime_expr", pbs_family
                                  ? fmt::format("\"${{PBS_WALLTIME:-{}}}\"", res.walltime.seconds())
                                  : std::to_string(res.walltime.seconds()));
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
        late_note(fmt::format(
            "resources.walltime {} is not longer than the {} s checkpoint warning before it: the "
            "job is warned after 1 s; ask for more walltime or a smaller checkpoint.signal_margin "
            "(site {} needs at least {} s)",
            res.walltime.hms(), warning_seconds, site.name, site.behaviour.grace_seconds));
    }
    data.set("nodes", std::to_string(res.nodes));
    data.set("gpus_per_node", std::to_string(res.gpus_per_node));
    data.set("cores_per_node", std::to_string(res.cores_per_node));
    data.set("job_id_expr", job_id_expression(partition->scheduler));

    // Data: read in place or staged to a tier of the site.
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
            late_note(fmt::format("site {} has no {} storage; the data is read in place", site.name,
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
    data.set("data_dir", data_dir_expr);
    data.set("stage", stage);
    data.set("keep_staged", req.recipe.data.keep_staged);
    // Packs are staged in the job by dljob itself (templates/prologue.mustache).
    if (stage && (!req.dljob_binary.is_absolute() || has_nul(req.dljob_binary.string()) ||
                  req.dljob_binary.string().find('\n') != std::string::npos)) {
        return refuse("dljob binary", req.dljob_binary.string(), "an absolute path");
    }
    data.set("dljob_binary", shell_quote(req.dljob_binary.string()));
    // A batch job that checkpointed submits its next attempt itself through `dljob
    // continue-job` (the local wrapper does so for `local`); without a usable dljob path the
    // next `dljob status` continues it instead.
    data.set("continue_job", partition->scheduler != SchedulerKind::local &&
                                 req.dljob_binary.is_absolute() &&
                                 !has_nul(req.dljob_binary.string()) &&
                                 req.dljob_binary.string().find('\n') == std::string::npos);

    auto command = training_command(req, data_dir_expr);
    if (!command) {
        return fail(command.error());
    }
    std::string joined;
    for (const auto& word : *command) {
        joined += (joined.empty() ? "" : " ") + word;
    }
    data.set("command", joined);
    TemplateData::List environment;
    for (const auto& [name, value] : req.recipe.command.environment) {
        if (!matches(name, env_name_re) || name.rfind("DLJOB_", 0) == 0) {
            return refuse("command.environment", name, "a variable name of A-Z a-z 0-9 _");
        }
        if (has_nul(value)) {
            return refuse("command.environment." + name, value, "a value without NUL bytes");
        }
        TemplateData item;
        item.set("name", name).set("value", shell_quote(value));
        environment.push_back(item);
    }
    data.set("environment", environment);

    // Modules: switches, preload, then the recipe's needs (via the site's map) and extra modules.
    const ModuleSystem& modules = site.modules;
    TemplateData::List module_commands;
    std::vector<std::string> loaded; // two needs may map to one module (cuda, cudnn on Cray)
    const auto add_module = [&](const std::string& verb, const std::vector<std::string>& args,
                                const std::string& field) -> Result<void> {
        if (verb == "load") {
            if (std::find(loaded.begin(), loaded.end(), args.front()) != loaded.end()) {
                return {};
            }
            loaded.push_back(args.front());
        }
        std::string quoted;
        for (const auto& arg : args) {
            DLJOB_TRY(require(field, arg, module_re, "a module name of A-Z a-z 0-9 . _ / + -"));
            quoted += " " + arg;
        }
        TemplateData item;
        item.set("step", shell_quote("module " + verb + quoted));
        item.set("args", verb + quoted);
        module_commands.push_back(item);
        return {};
    };
    for (const auto& sw : modules.switches) {
        DLJOB_TRY(add_module("switch", {sw.from, sw.to}, "modules.switch"));
    }
    for (const auto& name : modules.preload) {
        DLJOB_TRY(add_module("load", {name}, "modules.preload"));
    }
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
                        fmt::format("site '{}' does not say which modules provide '{}'", site.name,
                                    shown(need)),
                        fmt::format("needs it knows: {}; or name the module under "
                                    "environment.modules",
                                    known.empty() ? "none" : known));
        }
        for (const auto& name : it->second) {
            DLJOB_TRY(add_module("load", {name}, "modules.needs." + need));
        }
    }
    for (const auto& name : req.recipe.modules) {
        if (modules.flavor == ModuleFlavor::none) {
            return fail(ErrorCode::config_invalid,
                        fmt::format("site '{}' has no module system, but the recipe lists module "
                                    "'{}'",
                                    site.name, shown(name)),
                        "drop environment.modules for this site");
        }
        DLJOB_TRY(add_module("load", {name}, "environment.modules"));
    }
    data.set("module_commands", module_commands);
    data.set("has_modules", !module_commands.empty());
    TemplateData::List module_init;
    if (!modules.init_script.empty() && !module_commands.empty()) {
        DLJOB_TRY(require("modules.init", modules.init_script, "/[A-Za-z0-9._/+-]{0,4000}",
                          "an absolute path of A-Z a-z 0-9 . _ / + -"));
        TemplateData item;
        item.set("step", shell_quote(". " + modules.init_script));
        item.set("path", shell_quote(modules.init_script));
        module_init.push_back(item);
    }
    data.set("module_init", module_init);

    // Schedulers without a warning signal get a timer in the script (legacy §1.7, §3.5).
    const bool scheduler_signals =
        partition->scheduler == SchedulerKind::slurm && site.behaviour.warning_signal != "none";
    TemplateData::List timer;
    if (!scheduler_signals) {
        TemplateData item;
        item.set("signal", signal).set("seconds", std::to_string(warning_seconds));
        timer.push_back(item);
    }
    data.set("timer", timer);
    data.set("launch", launch_line(*partition, res));
    data.set("launch_step", shell_quote(std::string("run the training through ") +
                                        to_string(partition->launcher) + " launcher"));
    data.set("launcher_description", partition->launcher == LauncherKind::none
                                         ? std::string("this shell's node")
                                         : fmt::format("started by {} on the compute nodes",
                                                       to_string(partition->launcher)));

    auto script_text = templates.render(template_name(partition->scheduler), data);
    if (!script_text) {
        return fail(script_text.error());
    }
    out.script = std::move(*script_text);
    return out;
}

} // namespace dljob::render
