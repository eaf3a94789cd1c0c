#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/reports/show.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <memory>

namespace dljob::cli {

void set_show_command(CLI::App& app, Context& context) {
    auto* command =
        app.add_subcommand("show", "Show one job: record, state history, recipe and job script");
    auto id = std::make_shared<std::string>();
    command->add_option("JOB", *id, "Job id")->required();
    command->callback([id, &context] {
        auto jobs = app::JobContext::open();
        auto shown = app::show_job(jobs, *id, context.out);
        if (!shown) {
            throw Failure(shown.error());
        }
    });
}

} // namespace dljob::cli
