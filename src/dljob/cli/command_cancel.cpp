#include <dljob/app/cancel.hpp>
#include <dljob/app/job_context.hpp>
#include <dljob/app/status.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <ostream>

namespace dljob::cli {

void set_cancel_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand("cancel", "Cancel jobs through their scheduler");
    auto ids = std::make_shared<std::vector<std::string>>();
    command->add_option("JOB", *ids, "Job ids")->required();
    command->callback([ids, &context] {
        auto jobs = app::JobContext::open();
        if (!jobs) {
            throw Failure(jobs.error());
        }
        for (const auto& id : *ids) {
            auto job = app::cancel_job(*jobs, id);
            if (!job) {
                throw Failure(job.error());
            }
            context.out << fmt::format("job {}: {}\n", job->id, app::state_text(*job));
        }
    });
}

} // namespace dljob::cli
