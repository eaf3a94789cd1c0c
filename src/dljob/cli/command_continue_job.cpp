#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/job_context.hpp>
#include <dljob/cli/commands.hpp>

#include <CLI/CLI.hpp>

#include <memory>
#include <ostream>

namespace dljob::cli {

// Run by the rendered job script itself (templates/epilogue.mustache) when the training exits
// 75, on the compute or MOM node: not a verb for people, so it is left out of --help. It never
// opens the job store (which may sit on NFS); the next `dljob status` records what it did.
void set_continue_job_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "continue-job", "Run by a job script that checkpointed: submit its next attempt");
    command->group(""); // hidden
    auto attempt = std::make_shared<app::JobSideAttempt>();
    auto run_dir = std::make_shared<std::string>();
    command->add_option("RUN_DIR", *run_dir, "The job's run directory")->required();
    command->add_option("--token", attempt->token, "This attempt's token")->required();
    command->add_option("--attempt", attempt->attempt, "This attempt's number")->required();
    command->add_option("--previous", attempt->previous_token, "The previous attempt's token");
    command->add_option("--started", attempt->started, "When this attempt's script started");
    command->add_option("--exit-code", attempt->exit_code, "How the training ended");
    command->callback([attempt, run_dir, &context] {
        auto jobs = app::JobContext::open();
        attempt->run_dir = *run_dir;
        std::string note;
        const bool continued = app::continue_from_job(jobs, *attempt, note);
        if (!note.empty()) {
            context.err << "dljob: continue-job: " << note << '\n';
        }
        // The script writes its exit_code only when no next attempt is named (status 1).
        context.exit_code = continued ? 0 : 1;
    });
}

} // namespace dljob::cli
