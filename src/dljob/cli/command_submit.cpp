#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/app/jobs/sweep.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/cli/site_options.hpp>
#include <dljob/domain/error.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/shell.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <ostream>
#include <thread>

namespace dljob::cli {

namespace {

// A dry run shows what would be submitted: each point's script, and where the points are one
// job array, the array's script and the one command that submits it.
void print_dry_sweep(Context& context, const app::SweepOutcome& swept) {
    for (const auto& note : swept.points.front().rendered.notes) {
        context.err << "dljob: note: " << note << '\n';
    }
    for (std::size_t i = 0; i < swept.points.size(); ++i) {
        const auto& point = swept.points[i];
        context.out << fmt::format("# point {}: {} ({})\n", i + 1,
                                   fmt::join(point.job.sweep_point, " "), point.job.script_path)
                    << point.rendered.script;
    }
    if (!swept.array_script.empty()) {
        const auto& first = swept.points.front().job;
        context.out << fmt::format("# the job array ({} tasks, task i runs point i + 1): {}\n",
                                   swept.points.size(),
                                   (std::filesystem::path(first.run_dir) / "array.sh").string())
                    << swept.array_script;
        if (!swept.array_command.empty()) {
            context.out << fmt::format("# submitted with:\n# {}\n",
                                       util::command_line(swept.array_command));
        }
    }
    context.out << fmt::format("sweep {}: {} points{} (dry run: nothing submitted)\n", swept.sweep,
                               swept.points.size(),
                               swept.array_script.empty() ? ", a job each" : ", one job array");
}

void print_sweep(Context& context, const app::SweepOutcome& swept, bool dry_run) {
    if (dry_run) {
        print_dry_sweep(context, swept);
        return;
    }
    for (const auto& point : swept.points) {
        const Job& job = point.job;
        context.out << fmt::format("submitted job {} ({}) as {} {}: {}\n", job.id, job.name,
                                   job.scheduler, job.scheduler_id,
                                   fmt::join(job.sweep_point, " "));
    }
    context.out << fmt::format("sweep {}: {} points\n", swept.sweep, swept.points.size());
}

// `submit --wait`: the job's state and progress whenever they change, through its
// continuations, until the chain ends; the exit code says whether it completed.
void follow_job(Context& context, app::JobContext& jobs, std::int64_t id) {
    app::StatusOptions status;
    std::int64_t waiting_for = id;
    status.ids = {std::to_string(waiting_for)};
    status.min_interval_s = std::min<std::int64_t>(app::default_poll_interval(), 5);
    std::string last_line;
    while (true) {
        std::vector<std::string> warnings;
        auto views = app::job_status(jobs, status, warnings);
        if (!views) {
            throw Failure(views.error());
        }
        const auto& view = views->front();
        std::string line = app::state_text(view.job);
        if (view.metrics) {
            line += "  " + app::progress_text(*view.metrics, view.job.state);
        }
        if (line != last_line) {
            context.out << fmt::format("job {}: {}\n", waiting_for, line) << std::flush;
            last_line = line;
        }
        for (const auto& warning : warnings) {
            context.err << "dljob: warning: " << warning << '\n';
        }
        if (is_terminal(view.job.state) && view.job.phase == SubmitPhase::submitted) {
            // Checkpointed before the walltime and submitted again: wait for that attempt.
            auto next = jobs.store().continuation_of(waiting_for);
            if (next && next->has_value()) {
                waiting_for = (*next)->id;
                status.ids = {std::to_string(waiting_for)};
                context.out << fmt::format("job {}: continued as job {} (attempt {})\n",
                                           view.job.id, waiting_for, (*next)->attempt)
                            << std::flush;
                continue;
            }
            if (view.metrics && view.metrics->accuracy) {
                context.out << fmt::format("final accuracy: {:.4f}\n", *view.metrics->accuracy);
            }
            context.exit_code = view.job.state == JobState::completed ? 0 : 1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
    }
}

} // namespace

namespace {

// What `submit` was given, kept past the parse for its callback.
struct SubmitArgs {
    app::SubmitOptions options;
    bool wait = false;
    std::vector<std::string> sweeps;
    int sweep_limit = 0;          // read only when given
    CLI::Option* after = nullptr; // given or not
    CLI::Option* limit = nullptr; // given or not
};

// Given but empty or meaningless values are refused, never taken as "not given".
void refuse_empty_values(const SubmitArgs& args) {
    if (args.after->count() > 0 && args.options.after.empty()) {
        throw Failure(ErrorCode::usage, "--after '': expected a dljob job id: ID, ID:ok or ID:any",
                      "leave --after out to start at once");
    }
    if (args.limit->count() > 0 && args.sweep_limit < 1) {
        throw Failure(ErrorCode::usage,
                      fmt::format("--sweep-limit {}: expected 1 or more", args.sweep_limit),
                      "leave --sweep-limit out to run every point at once");
    }
}

// One job: submitted (or, with --dry-run, its script printed), then followed with --wait.
void submit_one(SubmitArgs& args, app::JobContext& jobs, Context& context) {
    auto outcome = app::submit_recipe(jobs, args.options);
    if (!outcome) {
        throw Failure(outcome.error());
    }
    for (const auto& note : outcome->rendered.notes) {
        context.err << "dljob: note: " << note << '\n';
    }
    if (args.options.dry_run) {
        context.out << outcome->rendered.script;
        return;
    }
    const Job& job = outcome->job;
    context.out << fmt::format("submitted job {} ({}) to {} as {} {}\nrun dir: {}\n", job.id,
                               job.name, job.site, job.scheduler, job.scheduler_id, job.run_dir);
    if (args.wait) {
        follow_job(context, jobs, job.id);
    }
}

void run_submit(SubmitArgs& args, Context& context) {
    refuse_empty_values(args);
    const bool limited = args.limit->count() > 0;
    auto jobs = app::JobContext::open();
    // Read once: its sweep: block sweeps as --sweep does, else it is the one job's recipe.
    auto recipe = app::read_submit_recipe(args.options);
    if (!recipe) {
        throw Failure(recipe.error());
    }
    auto axes = app::submit_sweep_axes(*recipe, args.options, args.sweeps);
    if (!axes) {
        throw Failure(axes.error());
    }
    if (!axes->empty()) {
        if (args.wait) {
            throw Failure(ErrorCode::usage, "--wait follows one job, not a sweep",
                          "follow the sweep with: dljob sweep ID");
        }
        auto swept = app::submit_sweep(jobs, args.options, *axes, limited ? args.sweep_limit : 0);
        if (!swept) {
            throw Failure(swept.error());
        }
        print_sweep(context, *swept, args.options.dry_run);
        return;
    }
    if (limited) {
        throw Failure(
            ErrorCode::usage,
            fmt::format("--sweep-limit {}: this submit is one job, not a sweep", args.sweep_limit),
            "add --sweep KEY=V1,V2 (or a sweep: block), or leave --sweep-limit out");
    }
    args.options.read = std::move(*recipe);
    submit_one(args, jobs, context);
}

} // namespace

void set_submit_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "submit", "Render a recipe for a site and submit it (default site: the one matching "
                  "this host, else local)");
    auto args = std::make_shared<SubmitArgs>();
    app::SubmitOptions& options = args->options;
    command->add_option("RECIPE", options.recipe, "Recipe file (YAML)")->required();
    add_site_options(*command, options, SiteOptionSet::with_partition);
    command
        ->add_option("--set", options.overrides,
                     "Override a recipe value, KEY=VALUE with a dotted key "
                     "(--set train.max_iter=200); repeatable, validated like the recipe")
        ->allow_extra_args(false);
    args->after = command->add_option("--after", options.after,
                                      "Start only after dljob job ID has ended: ID or ID:ok "
                                      "(only if it completed), ID:any (however it ended)");
    command
        ->add_option("--sweep", args->sweeps,
                     "Submit one job per value: KEY=V1,V2,... or KEY=A..B (whole numbers); "
                     "repeatable, the cartesian product of all")
        ->allow_extra_args(false);
    args->limit = command->add_option("--sweep-limit", args->sweep_limit,
                                      "At most N points of the sweep run at once (N >= 1; "
                                      "default: no limit)");
    command->add_flag("--dry-run", options.dry_run, "Print the job script; submit nothing");
    command->add_flag("--wait", args->wait,
                      "Wait for the job to end, showing its progress; exit 1 unless it "
                      "COMPLETED");
    command->callback([args, &context] { run_submit(*args, context); });
}

} // namespace dljob::cli
