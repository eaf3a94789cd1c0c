#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>
#include <dljob/util/files.hpp>

#include <CLI/CLI.hpp>

#include <chrono>
#include <memory>
#include <ostream>
#include <thread>

namespace dljob::cli {

void set_status_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "status", "Show jobs: state (with the scheduler's reason), elapsed time and training "
                  "progress");
    auto options = std::make_shared<app::StatusOptions>();
    auto watch = std::make_shared<bool>(false);
    command->add_option("JOB", options->ids, "Job ids (default: unfinished jobs)");
    command->add_flag("--all", options->all, "Also list finished jobs");
    auto expand = std::make_shared<bool>(false);
    command->add_flag("--json", options->json, "Print JSON for scripts");
    command->add_flag("--expand", *expand,
                      "List every point of a sweep (default: one line per sweep)");
    auto* watch_flag =
        command->add_flag("--watch", *watch,
                          "Refresh every few seconds until interrupted, with a sparkline of each "
                          "job's training loss");
    auto frames = std::make_shared<int>(0);
    command
        ->add_option("--frames", *frames,
                     "With --watch: stop after N frames (0, the default: until interrupted)")
        ->check(CLI::NonNegativeNumber)
        ->needs(watch_flag);
    command->callback([options, watch, expand, frames, &context] {
        auto jobs = app::JobContext::open();
        options->min_interval_s = app::default_poll_interval();
        // Naming jobs is an explicit request: ask their scheduler now.
        options->force = !options->ids.empty() && options->min_interval_s == 0;
        for (int frame = 1;; ++frame) {
            std::vector<std::string> warnings;
            auto views = app::job_status(jobs, *options, warnings);
            if (!views) {
                throw Failure(views.error());
            }
            for (const auto& warning : warnings) {
                context.err << "dljob: warning: " << warning << '\n';
            }
            if (options->json) {
                app::print_status_json(context.out, *views);
            } else if (*watch) {
                app::print_watch_frame(context.out, *views, util::unix_now(),
                                       !*expand && options->ids.empty());
            } else {
                // Named jobs or a named sweep are shown point by point.
                app::print_status_table(context.out, *views, util::unix_now(),
                                        !*expand && options->ids.empty());
            }
            context.out << std::flush;
            if (!*watch || frame == *frames) {
                return;
            }
            std::this_thread::sleep_for(std::chrono::seconds(5));
            if (!options->json) { // JSON lines stay one object a line, frame after frame
                context.out << '\n';
            }
        }
    });
}

} // namespace dljob::cli
