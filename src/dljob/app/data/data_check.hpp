#pragma once
// What `dljob submit` tells about a recipe's data before the job waits in a queue: data that is
// not there (and the command that gets it), and small-file trees read in place from a network
// file system (and the commands that pack and stage them). Notes, not errors: the submit host
// may not see every path the compute nodes see ($SCRATCH set only inside jobs, ...).

#include <dljob/domain/stage.hpp>

#include <string>
#include <vector>

namespace dljob::app {

struct DataCheckInput {
    std::string source;   // data.source as written (may hold $HOME, ~, $VAR)
    std::string stage_to; // data.stage_to: "none", "node-local", "ramdisk"
};

std::vector<std::string> data_notes(const DataCheckInput& data, const GetEnv& getenv);

} // namespace dljob::app
