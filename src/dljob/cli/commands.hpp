#pragma once
// One `set_<verb>_command` per verb, each in its own command_<verb>.cpp (micromamba's shape):
// it declares the verb's flags on a new subcommand and sets a callback that calls exactly one
// application service. The table in cli.cpp lists them explicitly (no self-registration).

#include <dljob/domain/error.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>

namespace CLI { // NOLINT(readability-identifier-naming): CLI11 names it so
class App;
}

namespace dljob::cli {

/// What a command needs from the process: where to print. Built once in cli::run.
struct Context {
    std::ostream& out;
    std::ostream& err;
    int exit_code = 0; // set by a command whose outcome is not plain success (e.g. a failed job)
};

using SetCommand = void (*)(CLI::App& app, Context& context);

/// "dljob: error: MESSAGE" and "hint: HINT": how every error reaches the user (cli.cpp), also
/// from a command that reports one failure and goes on with the rest (cancel).
void print_error(std::ostream& err, const Error& error);

/// "512M", "2G", "1048576": bytes, with an optional K/M/G/T (powers of 1024) suffix. Throws a
/// usage Failure naming `flag` otherwise (command_stage_data.cpp).
std::uint64_t parse_bytes(const std::string& text, const std::string& flag);

void set_fetch_data_command(CLI::App& app, Context& context); // command_fetch_data.cpp
void set_pack_command(CLI::App& app, Context& context);       // command_pack.cpp
void set_stage_data_command(CLI::App& app, Context& context); // command_stage_data.cpp
void set_audit_data_command(CLI::App& app, Context& context); // command_audit_data.cpp

void set_sites_command(CLI::App& app, Context& context); // command_sites.cpp (+ render, validate)
void set_render_command(CLI::App& app, Context& context);
void set_validate_command(CLI::App& app, Context& context);
void set_submit_command(CLI::App& app, Context& context); // + status, logs, cancel, show
void set_status_command(CLI::App& app, Context& context);
void set_logs_command(CLI::App& app, Context& context);
void set_cancel_command(CLI::App& app, Context& context);
void set_show_command(CLI::App& app, Context& context);
void set_plot_command(CLI::App& app, Context& context);   // command_plot.cpp
void set_shell_command(CLI::App& app, Context& context);  // command_shell.cpp
void set_doctor_command(CLI::App& app, Context& context); // command_doctor.cpp
void set_sweep_command(CLI::App& app, Context& context);  // command_sweep.cpp

/// Run by job scripts, not people (command_continue_job.cpp).
void set_continue_job_command(CLI::App& app, Context& context);

} // namespace dljob::cli
