#include <dljob/app/jobs/cancel.hpp>
#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace dljob::cli {

void set_cancel_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand("cancel", "Cancel jobs through their scheduler");
    auto ids = std::make_shared<std::vector<std::string>>();
    command->add_option("JOB", *ids, "Job ids, or a sweep id (sw-...): every point of it")
        ->required();
    command->callback([ids, &context] {
        auto jobs = app::JobContext::open();
        // Like scancel and qdel: one id that cannot be cancelled (unknown, already gone from
        // a scheduler that refuses) is reported and the others are still cancelled; the exit
        // status is the first failure's.
        int first_failure = 0;
        const auto failed = [&](const Error& error) {
            print_error(context.err, error);
            if (first_failure == 0) {
                first_failure = exit_code_for(error.code);
            }
        };
        std::vector<std::string> expanded;
        std::set<std::string> arrays;
        for (const auto& id : *ids) {
            if (id.rfind("sw-", 0) != 0) {
                expanded.push_back(id);
                continue;
            }
            auto points = app::sweep_cancel_ids(jobs, id);
            if (!points) {
                failed(points.error());
                continue;
            }
            // A sweep that is one job array goes with one scheduler command.
            auto told = app::cancel_arrays(jobs, *points);
            if (!told) {
                failed(told.error());
            } else {
                arrays.insert(told->begin(), told->end());
            }
            expanded.insert(expanded.end(), points->begin(), points->end());
        }
        for (const auto& id : expanded) {
            auto job = app::cancel_job(jobs, id, arrays);
            if (!job) {
                failed(job.error());
                continue;
            }
            context.out << fmt::format("job {}: {}\n", job->id, app::state_text(*job));
        }
        context.exit_code = first_failure;
    });
}

} // namespace dljob::cli
