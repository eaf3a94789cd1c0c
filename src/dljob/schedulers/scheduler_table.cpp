#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/scheduler_table.hpp>
#include <dljob/util/shell.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace dljob::schedulers {

std::string SchedulerFamily::walltime_expression(const Walltime& walltime) const {
    return std::to_string(walltime.seconds());
}

bool SchedulerFamily::signals_before_walltime(const SchedulerBehaviour& /*behaviour*/) const {
    return false;
}

void SchedulerFamily::add_submit_options(std::vector<std::string>& submit_argv,
                                         const std::vector<std::string>& options) const {
    const auto at = submit_argv.empty() ? submit_argv.end() : submit_argv.end() - 1;
    submit_argv.insert(at, options.begin(), options.end());
}

std::vector<std::string> SchedulerFamily::array_options(const ArraySpec& /*array*/) const {
    return {};
}

std::string SchedulerFamily::array_task_id(const std::string& array_id, int /*index*/) const {
    return array_id;
}

std::string SchedulerFamily::array_of(const std::string& task_id) const {
    return task_id;
}

std::vector<std::string>
SchedulerFamily::retarget_dependency(const std::string& /*dependant*/,
                                     const JobDependency& /*after*/) const {
    return {};
}

std::string array_script(const SchedulerFamily& family, const ArrayScriptFacts& facts) {
    std::string out = "#!/bin/bash\n";
    const std::string prefix(family.directive_prefix());
    std::vector<std::string> directives = facts.directives;
    const auto options = family.array_options(facts.array);
    directives.push_back(fmt::format("{}", fmt::join(options, " ")));
    for (const auto& directive : directives) {
        out += fmt::format("{} {}\n", prefix, directive);
    }
    out += fmt::format(
        "# dljob sweep {}: one job array of {} points; each task runs its point's own job script\n"
        "# (its run directory, log and record). Rendered by dljob.\n",
        facts.sweep, facts.scripts.size());
    out += "set -u\n";
    out += fmt::format("dljob_index={}\n", family.array_index_expression());
    out += "case \"$dljob_index\" in\n";
    for (std::size_t i = 0; i < facts.scripts.size(); ++i) {
        out += fmt::format("{}) dljob_point={} ;;\n", i, util::shell_quote(facts.scripts[i]));
    }
    out += fmt::format("*)\n    echo \"dljob: error: array task index '$dljob_index' is no point "
                       "of sweep {}\" >&2\n    exit 1\n    ;;\nesac\n",
                       facts.sweep);
    // The point's script takes the task's id for its record (job_identity) and unsets it, so
    // that a next attempt it submits (a job of its own, not a task) does not inherit it.
    out += fmt::format("DLJOB_ARRAY_TASK_ID={}\nexport DLJOB_ARRAY_TASK_ID\n",
                       family.array_task_id_expression());
    // The scheduler's output file is the array's; the point's own log is where `dljob logs`
    // and continuations look.
    out += "exec >>\"$(dirname -- \"$dljob_point\")/job.log\" 2>&1\n";
    out += "exec /bin/bash \"$dljob_point\"\n";
    return out;
}

// Declares every family file's NAME_family() and defines family_table() (written at build time
// by cmake/write_family_table.cmake, in file-name order).
#include "dljob_family_table.inc"

const std::vector<const SchedulerFamily*>& families() {
    static const std::vector<const SchedulerFamily*> all = family_table();
    return all;
}

const SchedulerFamily* find_family(std::string_view name) {
    // "torque" is the PBS family's other name.
    const std::string_view wanted = name == "torque" ? std::string_view("pbs") : name;
    for (const SchedulerFamily* family : families()) {
        if (family->name() == wanted) {
            return family;
        }
    }
    return nullptr;
}

const SchedulerFamily& family_of(std::string_view name) {
    if (const SchedulerFamily* family = find_family(name)) {
        return *family;
    }
    throw std::logic_error(fmt::format("scheduler family '{}' is not one of dljob's", name));
}

const std::vector<std::string>& scheduler_families() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const SchedulerFamily* family : families()) {
            out.emplace_back(family->name());
        }
        return out;
    }();
    return names;
}

namespace {

// "file:line:column: key: message", as the site loader says it, from where `key` (or else the
// partition, or else the file) was read.
Unexpected site_invalid(const SiteProfile& site, const std::string& partition_key,
                        const std::string& key, const std::string& message, std::string hint) {
    auto origin = site.origins.find(key);
    if (origin == site.origins.end()) {
        origin = site.origins.find(partition_key);
    }
    const std::string where =
        origin != site.origins.end() ? origin->second : site.source_file.string();
    return fail(ErrorCode::config_invalid, fmt::format("{}: {}: {}", where, key, message),
                std::move(hint));
}

std::string launcher_names(const std::vector<LauncherKind>& launchers) {
    std::vector<std::string> names;
    names.reserve(launchers.size());
    for (const LauncherKind launcher : launchers) {
        names.emplace_back(to_string(launcher));
    }
    return fmt::format("{}", fmt::join(names, ", "));
}

// The families whose jobs may use `launcher`, for the hint.
std::string families_running(LauncherKind launcher) {
    std::vector<std::string> names;
    for (const SchedulerFamily* family : families()) {
        const auto accepted = family->launchers();
        if (std::find(accepted.begin(), accepted.end(), launcher) != accepted.end()) {
            names.emplace_back(family->name());
        }
    }
    return fmt::format("{}", fmt::join(names, ", "));
}

Result<void> check_partition_family(const SiteProfile& site, const Partition& p) {
    const std::string path = "partitions." + p.name;
    const SchedulerFamily* family = find_family(p.scheduler);
    if (family == nullptr) {
        return site_invalid(site, path, path + ".scheduler",
                            fmt::format("'{}' is not a scheduler family dljob knows; expected one "
                                        "of {}",
                                        p.scheduler, fmt::join(scheduler_families(), ", ")),
                            "");
    }
    const auto launchers = family->launchers();
    if (std::find(launchers.begin(), launchers.end(), p.launcher) == launchers.end()) {
        return site_invalid(
            site, path, path + ".launcher",
            fmt::format("{} does not run under {}; expected {}", to_string(p.launcher),
                        family->name(), launcher_names(launchers)),
            fmt::format("{} runs under {}", to_string(p.launcher), families_running(p.launcher)));
    }
    if (p.node.describes_machine() && !family->runs_on_this_machine()) {
        return site_invalid(site, path, path + ".node",
                            fmt::format("auto is the machine dljob runs on, and a {} job runs on "
                                        "the scheduler's nodes; expected the nodes' numbers",
                                        family->name()),
                            "auto is for a partition with scheduler: local");
    }
    if (auto problem = family->check_partition(p)) {
        return site_invalid(site, path, path + "." + problem->key, problem->message,
                            std::move(problem->hint));
    }
    return {};
}

} // namespace

Result<void> check_site(const SiteProfile& site) {
    for (const Partition& partition : site.partitions) {
        DLJOB_TRY(check_partition_family(site, partition));
    }
    return {};
}

Result<std::unique_ptr<Scheduler>> make_scheduler(std::string_view family, ProcessRunner& runner,
                                                  const SchedulerOptions& options) {
    if (const SchedulerFamily* found = find_family(family)) {
        return found->make_adapter(runner, options);
    }
    return fail(ErrorCode::config_invalid, fmt::format("unknown scheduler '{}'", family),
                fmt::format("valid schedulers: {}", fmt::join(scheduler_families(), ", ")));
}

} // namespace dljob::schedulers
