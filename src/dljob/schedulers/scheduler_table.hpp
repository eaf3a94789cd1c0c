#pragma once
// Picks a scheduler adapter by its family name (a site profile's `scheduler:` key).

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/scheduler.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// The family names, in the order error messages list them.
const std::vector<std::string>& scheduler_families();

/// The adapter for `family` (slurm, pbs, moab, sqsub, local), or config_invalid naming the
/// valid choices.
Result<std::unique_ptr<Scheduler>> make_scheduler(std::string_view family, ProcessRunner& runner,
                                                  const SchedulerOptions& options = {});

} // namespace dljob::schedulers
