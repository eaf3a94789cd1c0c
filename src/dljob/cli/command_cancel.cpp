#include <dljob/app/jobs/cancel.hpp>
#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/jobs/status.hpp>
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
        // Like scancel and qdel: one id that cannot be cancelled (unknown, already gone from
        // a scheduler that refuses) is reported and the others are still cancelled; the exit
        // status is the first failure's.
        int first_failure = 0;
        for (const auto& id : *ids) {
            auto job = app::cancel_job(jobs, id);
            if (!job) {
                print_error(context.err, job.error());
                if (first_failure == 0) {
                    first_failure = exit_code_for(job.error().code);
                }
                continue;
            }
            context.out << fmt::format("job {}: {}\n", job->id, app::state_text(*job));
        }
        context.exit_code = first_failure;
    });
}

} // namespace dljob::cli
