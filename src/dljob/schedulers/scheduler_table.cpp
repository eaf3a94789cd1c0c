#include <dljob/schedulers/local.hpp>
#include <dljob/schedulers/moab.hpp>
#include <dljob/schedulers/pbs.hpp>
#include <dljob/schedulers/scheduler_table.hpp>
#include <dljob/schedulers/slurm.hpp>
#include <dljob/schedulers/sqsub.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dljob::schedulers {

const std::vector<std::string>& scheduler_families() {
    static const std::vector<std::string> families{"local", "slurm", "pbs", "moab", "sqsub"};
    return families;
}

Result<std::unique_ptr<Scheduler>> make_scheduler(std::string_view family, ProcessRunner& runner,
                                                  const SchedulerOptions& options) {
    std::unique_ptr<Scheduler> scheduler;
    if (family == "local") {
        scheduler = std::make_unique<LocalScheduler>(runner, options);
    } else if (family == "slurm") {
        scheduler = std::make_unique<SlurmScheduler>(runner, options);
    } else if (family == "pbs" || family == "torque") {
        scheduler = std::make_unique<PbsScheduler>(runner, options);
    } else if (family == "moab") {
        scheduler = std::make_unique<MoabScheduler>(runner, options);
    } else if (family == "sqsub") {
        scheduler = std::make_unique<SqsubScheduler>(runner, options);
    } else {
        return fail(ErrorCode::config_invalid, fmt::format("unknown scheduler '{}'", family),
                    fmt::format("valid schedulers: {}", fmt::join(scheduler_families(), ", ")));
    }
    return scheduler;
}

} // namespace dljob::schedulers
