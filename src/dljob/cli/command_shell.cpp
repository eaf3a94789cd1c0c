#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/jobs/shell.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/cli/site_options.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <ostream>

namespace dljob::cli {

void set_shell_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "shell", "Open an interactive shell on a compute node of a site, with the site's "
                 "modules and DLJOB_* variables (leaving it releases the allocation)");
    auto options = std::make_shared<app::ShellOptions>();
    add_site_options(*command, *options, SiteOptionSet::with_partition);
    command->add_option("--gpus", options->gpus,
                        "GPUs in all (on one node where it has them, else on as many nodes as "
                        "it takes)");
    command->add_option("--nodes", options->nodes, "Nodes (default: the recipe's, else 1)");
    command->add_option("--cores", options->cores,
                        "CPU cores per node (with GPUs: shared evenly by them)");
    command->add_option("--mem", options->memory, "Memory per node, e.g. 16G");
    command->add_option("--time", options->time,
                        "Walltime, e.g. 1:00:00 (default: the "
                        "partition's)");
    command->add_option("--recipe", options->recipe,
                        "Also stage this recipe's data and prepare its run directory; "
                        "'dljob_run' runs its command in the session");
    command->add_flag("--dry-run", options->dry_run,
                      "Print the command and the session's rc file; allocate nothing");
    command->callback([options, &context] {
        auto jobs = app::JobContext::open();
        auto terminal = app::make_posix_terminal();
        if (options->dry_run) {
            auto planned = app::open_shell(jobs, *options, *terminal, context.err);
            if (!planned) {
                throw Failure(planned.error());
            }
            for (const auto& note : planned->notes) {
                context.err << "dljob: note: " << note << '\n';
            }
            context.out << planned->command_line << '\n';
            context.out << fmt::format("# site {}, partition {} ({}); nothing was allocated or "
                                       "written. {} would hold:\n",
                                       planned->site, planned->partition, planned->scheduler,
                                       planned->rc_path)
                        << planned->rc_text;
            return;
        }
        auto ended = app::open_shell(jobs, *options, *terminal, context.err);
        if (!ended) {
            throw Failure(ended.error());
        }
        context.exit_code = ended->exit;
    });
}

} // namespace dljob::cli
