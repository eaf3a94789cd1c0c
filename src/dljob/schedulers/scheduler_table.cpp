#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/scheduler_table.hpp>

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
    static const std::vector<std::string> families{"local", "slurm", "pbs", "moab", "sqsub"};
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
