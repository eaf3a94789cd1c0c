#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/reports/logs.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <memory>

namespace dljob::cli {

void set_logs_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand("logs", "Print a job's output (job.log in its run dir)");
    auto id = std::make_shared<std::string>();
    auto follow = std::make_shared<bool>(false);
    command->add_option("JOB", *id, "Job id")->required();
    auto rank = std::make_shared<int>(-1);
    command->add_flag("-f,--follow", *follow, "Keep printing new output until the job ends");
    command
        ->add_option("--rank", *rank,
                     "Only the lines of this data-parallel rank (0 is the first), untagged")
        ->check(CLI::Range(0, 1 << 20));
    command->callback([id, follow, rank, &context] {
        auto jobs = app::JobContext::open();
        app::LogOptions options;
        options.follow = *follow;
        if (*rank >= 0) {
            options.rank = *rank;
        }
        auto printed = app::print_logs(jobs, *id, options, context.out);
        if (!printed) {
            throw Failure(printed.error());
        }
    });
}

} // namespace dljob::cli
