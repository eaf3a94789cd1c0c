#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/jobs/sweep.hpp>
#include <dljob/app/reports/sweep_table.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

namespace dljob::cli {

void set_sweep_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "sweep", "Every point of a sweep (submit --sweep) with its values and final metrics, "
                 "best first");
    auto id = std::make_shared<std::string>();
    command->add_option("SWEEP", *id, "Sweep id, as submit printed it (sw-...)")->required();
    command->callback([id, &context] {
        auto jobs = app::JobContext::open();
        std::vector<std::string> warnings;
        auto rows = app::sweep_table(jobs, *id, warnings);
        if (!rows) {
            throw Failure(rows.error());
        }
        for (const auto& warning : warnings) {
            context.err << "dljob: warning: " << warning << '\n';
        }
        app::print_sweep_table(context.out, *rows);
    });
}

} // namespace dljob::cli
