#pragma once
// Picks a scheduler adapter by its family name (a site profile's `scheduler:` key), and checks a
// loaded site profile against its families.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/scheduler.hpp>
#include <dljob/domain/site_profile.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// The family names, in the order error messages list them.
const std::vector<std::string>& scheduler_families();

/// Every partition's family is one dljob knows, and accepts the partition: its launcher, `node:
/// auto`, and what the family itself asks (check_partition). The error names the key with the
/// file:line:column it was read from (SiteProfile::origins), like the site loader's own.
Result<void> check_site(const SiteProfile& site);

/// The adapter for `family` (slurm, pbs, moab, sqsub, local), or config_invalid naming the
/// valid choices.
Result<std::unique_ptr<Scheduler>> make_scheduler(std::string_view family, ProcessRunner& runner,
                                                  const SchedulerOptions& options = {});

} // namespace dljob::schedulers
