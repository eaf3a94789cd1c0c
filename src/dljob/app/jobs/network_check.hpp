#pragma once
// A train recipe's network config checked by the dltrain that will run it (`dltrain check`:
// it parses and every shape fits), so that a config dltrain would refuse is refused at validate
// and submit time, not after the job has waited in a queue.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/recipe.hpp>
#include <dljob/domain/result.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace dljob::app {

/// config_invalid with dltrain's message (file:line: key ...) when dltrain refuses the config;
/// otherwise what could not be checked here, one note each (no dltrain on this machine, a Data
/// layer without `shape` whose data is not here). Command recipes have nothing to check.
Result<std::vector<std::string>> check_network(ProcessRunner& runner, const Recipe& recipe,
                                               const std::filesystem::path& dltrain);

} // namespace dljob::app
