#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/scheduler_table.hpp>
#include <dljob/util/shell.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

const SchedulerFamily& family_of(SchedulerKind kind) {
    switch (kind) {
    case SchedulerKind::slurm:
        return slurm_family();
    case SchedulerKind::pbs:
        return pbs_family();
    case SchedulerKind::moab:
        return moab_family();
    case SchedulerKind::sqsub:
        return sqsub_family();
    case SchedulerKind::local:
        return local_family();
    }
    return local_family();
}

const std::vector<std::string>& scheduler_families() {
    // The names the site profiles know (domain/site_profile.cpp), not a second list.
    static const std::vector<std::string> families = [] {
        std::vector<std::string> names;
        for (const SchedulerKind kind : scheduler_kinds()) {
            names.emplace_back(to_string(kind));
        }
        return names;
    }();
    return families;
}

Result<std::unique_ptr<Scheduler>> make_scheduler(std::string_view family, ProcessRunner& runner,
                                                  const SchedulerOptions& options) {
    // "torque" is the PBS family's other name.
    const std::string_view name = family == "torque" ? std::string_view("pbs") : family;
    if (const auto kind = scheduler_kind(name)) {
        return family_of(*kind).make_adapter(runner, options);
    }
    return fail(ErrorCode::config_invalid, fmt::format("unknown scheduler '{}'", family),
                fmt::format("valid schedulers: {}", fmt::join(scheduler_families(), ", ")));
}

} // namespace dljob::schedulers
