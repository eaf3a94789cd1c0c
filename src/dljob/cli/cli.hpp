#pragma once
// The command-line layer: the only folder that includes CLI11. It declares each verb's flags,
// turns them into a request for one application service, and maps typed errors to exit codes.

#include <iosfwd>
#include <string>
#include <vector>

namespace dljob::cli {

/// Runs `dljob` with argv; returns the process exit code. Never throws.
int run(int argc, char** argv);

/// Same, with the arguments after the program name and explicit streams (tests use this).
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

} // namespace dljob::cli
