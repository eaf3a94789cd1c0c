#include <dljob/app/data/data_check.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/job_setup.hpp>
#include <dljob/app/jobs/network_check.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/paths.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace dljob::app {

namespace {

// The recipe as submitted: the file's text, then the --set overrides that won over it, so
// `dljob show` tells what the job really ran with.
std::string recipe_record(const std::filesystem::path& recipe,
                          const std::vector<std::string>& overrides) {
    std::string text = util::read_file(recipe).value_or("");
    if (overrides.empty()) {
        return text;
    }
    if (!text.empty() && text.back() != '\n') {
        text += '\n';
    }
    text += "# ---- dljob submit --set, applied in this order over the values above:\n";
    for (const auto& assignment : overrides) {
        std::string line;
        for (const char c : assignment) {
            line.push_back(c == '\n' || c == '\r' ? ' ' : c);
        }
        text += "# --set " + line + "\n";
    }
    return text;
}

// `--after ID[:ok|any]` against the store: the chain's latest attempt (a continued job ends
// with its last one), on the same site and scheduler. A job that has already ended needs no
// dependency (the scheduler may have forgotten its id); one that failed refuses an `ok`.
Result<std::optional<JobDependency>> resolve_after(JobContext& context, const std::string& after,
                                                   const std::string& site,
                                                   std::vector<std::string>& notes) {
    const auto colon = after.find(':');
    const std::string id = after.substr(0, colon);
    const std::string kind = colon == std::string::npos ? "ok" : after.substr(colon + 1);
    if (kind != "ok" && kind != "any") {
        return fail(ErrorCode::usage,
                    fmt::format("--after {}: expected ID, ID:ok or ID:any, got ':{}'", after, kind),
                    "ok: start only if that job completed; any: start however it ended");
    }
    auto job = context.find_job(id);
    if (!job) {
        return fail(job.error());
    }
    job = context.latest_attempt(*job);
    if (!job) {
        return fail(job.error());
    }
    if (job->site != site) {
        return fail(ErrorCode::usage,
                    fmt::format("--after {}: job {} runs on site {}, this one on {}", after,
                                job->id, job->site, site),
                    "a scheduler can only make a job wait for one of its own");
    }
    if (is_terminal(job->state)) {
        if (kind == "ok" && job->state != JobState::completed) {
            return fail(ErrorCode::usage,
                        fmt::format("--after {}: job {} has ended {}, so a job waiting for it to "
                                    "complete would never run",
                                    after, job->id, to_string(job->state)),
                        fmt::format("use --after {}:any to start it anyway", id));
        }
        notes.push_back(fmt::format("job {} has already ended {}: this one starts without waiting",
                                    job->id, to_string(job->state)));
        return std::optional<JobDependency>{
            JobDependency{job->id, "", job->run_dir, kind == "ok"}}; // for train.weights @ID
    }
    if (job->phase != SubmitPhase::submitted || job->scheduler_id.empty()) {
        return fail(ErrorCode::usage,
                    fmt::format("--after {}: job {} has no scheduler id yet ({})", after, job->id,
                                to_string(job->phase)),
                    "run 'dljob status' until it is submitted");
    }
    return std::optional<JobDependency>{
        JobDependency{job->id, job->scheduler_id, job->run_dir, kind == "ok"}};
}

// The job without the words that make it wait (`--after`), kept for continuations, which must
// not wait again (the job they would wait for may be long forgotten by the scheduler).
void drop_dependency(Job& job, const RenderedJob& rendered) {
    auto& argv = job.submit_argv;
    const auto& words = rendered.dependency_options;
    if (words.empty()) {
        return;
    }
    const auto at = std::search(argv.begin(), argv.end(), words.begin(), words.end());
    if (at != argv.end()) {
        argv.erase(at, at + static_cast<std::ptrdiff_t>(words.size()));
    }
}

// Data that is missing or slow to read in place, a network config dltrain would refuse: said
// before the job waits in a queue.
Result<void> check_before_queueing(JobContext& context, const Recipe& recipe,
                                   std::vector<std::string>& notes) {
    for (auto& note :
         data_notes({recipe.data.source, recipe.data.stage_to}, process_environment())) {
        notes.push_back(std::move(note));
    }
    auto network = check_network(context.runner(), recipe, default_dltrain_binary());
    if (!network) {
        return fail(network.error());
    }
    for (auto& note : *network) {
        notes.push_back(std::move(note));
    }
    return {};
}

// Opened (and created on first use) only now, so that a submit refused for any reason so far,
// or by a store it cannot open, leaves nothing. The row comes before the run directory: a
// submit killed at any instant from here on leaves a row that `dljob status` reconciles by its
// token (and that removes a directory the job never ran in), never a directory that nothing
// records.
Result<RecordedJob> record_and_write(JobContext& context, const SubmitOptions& options,
                                     const PreparedJob& prepared, Job job) {
    JobStore& store = context.store();
    auto recorded = record_job(context, std::move(job));
    if (!recorded) {
        return fail(recorded.error());
    }
    auto written = [&]() -> Result<PendingRunDir> {
        auto pending =
            write_run_dir(prepared.request.run_dir,
                          {{prepared.rendered.script_name, prepared.rendered.script, true},
                           {"recipe.yaml", recipe_record(options.recipe, options.overrides)}});
        if (!pending) {
            return fail(pending.error());
        }
        // For the job to submit its own next attempt (continuations, issue 25).
        DLJOB_TRY(write_chain_file(*recorded));
        return pending;
    }();
    if (!written) {
        (void)store.remove(recorded->id);
        return fail(written.error());
    }
    return RecordedJob{*recorded, std::move(*written)};
}

// The job rendered and checked, not yet recorded.
Result<std::pair<SubmitOutcome, PreparedJob>> prepare_submit(JobContext& context,
                                                             const SubmitOptions& options) {
    auto inputs = options.read ? job_inputs(*options.read, options.recipe, options)
                               : recipe_job_inputs(options.recipe, options.overrides, options);
    if (!inputs) {
        return fail(inputs.error());
    }
    std::vector<std::string> notes;
    if (!options.after.empty()) {
        auto after = resolve_after(context, options.after, inputs->site.name, notes);
        if (!after) {
            return fail(after.error());
        }
        inputs->after = *after;
    }
    const Recipe& recipe = inputs->recipe;
    const int max_continuations =
        recipe.checkpoint.resume ? recipe.checkpoint.max_continuations : 0;
    inputs->run_stem = options.recipe.stem().string();
    auto prepared = prepare_job(std::move(*inputs));
    if (!prepared) {
        return fail(prepared.error());
    }
    DLJOB_TRY(check_before_queueing(context, prepared->request.recipe, notes));
    SubmitOutcome outcome{prepared->job, prepared->rendered, prepared->request.site};
    outcome.rendered.notes.insert(outcome.rendered.notes.end(), notes.begin(), notes.end());
    outcome.job.max_continuations = max_continuations;
    outcome.job.sweep = options.sweep;
    outcome.job.sweep_point = options.sweep_point;
    if (const auto& after = prepared->request.after; after && !after->scheduler_id.empty()) {
        outcome.job.after = after->job_id;
        outcome.job.after_ok = after->ok;
        drop_dependency(outcome.job, prepared->rendered);
    }
    return std::pair{std::move(outcome), std::move(*prepared)};
}

} // namespace

void note_dependant(const JobDependency& after, const std::string& scheduler_id,
                    std::vector<std::string>& notes) {
    if (auto recorded = record_dependant(after.run_dir, scheduler_id, after.ok); !recorded) {
        notes.push_back(fmt::format("{}: if job {} continues, this job still waits for the "
                                    "attempt that runs now",
                                    recorded.error().message, after.job_id));
    }
}

Result<Recipe> read_submit_recipe(const SubmitOptions& options) {
    return config::load_recipe(options.recipe, options.overrides);
}

Result<SubmitOutcome> submit_recipe(JobContext& context, const SubmitOptions& options) {
    auto prepared = prepare_submit(context, options);
    if (!prepared) {
        return fail(prepared.error());
    }
    SubmitOutcome& outcome = prepared->first;
    if (options.dry_run) {
        return outcome;
    }
    auto recorded = record_and_write(context, options, prepared->second, outcome.job);
    if (!recorded) {
        return fail(recorded.error());
    }
    auto submitted = submit_recorded(context, recorded->job);
    if (!submitted) {
        // Kept whenever the row is: a submit with no answer may still run the script.
        if (auto row = context.store().find_by_token(recorded->job.token);
            row && row->has_value()) {
            recorded->run_dir.keep();
        }
        return fail(submitted.error());
    }
    recorded->run_dir.keep();
    outcome.job = *submitted;
    if (const auto& after = prepared->second.request.after; after && !after->scheduler_id.empty()) {
        note_dependant(*after, outcome.job.scheduler_id, outcome.rendered.notes);
    }
    return outcome;
}

Result<RecordedSubmit> record_recipe(JobContext& context, const SubmitOptions& options) {
    auto prepared = prepare_submit(context, options);
    if (!prepared) {
        return fail(prepared.error());
    }
    auto recorded = record_and_write(context, options, prepared->second, prepared->first.job);
    if (!recorded) {
        return fail(recorded.error());
    }
    prepared->first.job = recorded->job;
    return RecordedSubmit{std::move(prepared->first), std::move(*recorded),
                          prepared->second.request.site};
}

SubmitRequest submit_request(const Job& job) {
    SubmitRequest request;
    request.script_path = job.script_path;
    request.run_dir = job.run_dir;
    request.name = job.name;
    request.token = job.token;
    request.log_path = (std::filesystem::path(job.run_dir) / "job.log").string();
    request.submit_argv = job.submit_argv;
    request.attempt = job.attempt;
    request.max_continuations = job.max_continuations;
    if (job.scheduler == "local") {
        // The script warns the training before the walltime itself; the wrapper's watchdog is
        // the hard stop a scheduler would give, one grace minute later.
        request.walltime_s = job.walltime_s + 60;
    }
    return request;
}

Result<Job> record_job(JobContext& context, Job job) {
    job.created_at = util::unix_now();
    return context.store().create(job);
}

Result<Job> submit_recorded(JobContext& context, Job job) {
    JobStore& store = context.store();
    // No transaction is open while the scheduler command runs.
    auto scheduler = context.scheduler(job.scheduler);
    if (!scheduler) {
        (void)store.remove(job.id);
        return fail(scheduler.error());
    }
    SubmitRequest request = submit_request(job);
    // Only the first attempt waits: a continuation starts when its predecessor ended.
    if (job.after != 0 && job.attempt == 1) {
        auto other = store.find(job.after);
        if (other && other->has_value()) {
            request.after =
                JobDependency{job.after, (*other)->scheduler_id, (*other)->run_dir, job.after_ok};
        }
    }
    auto submitted = (*scheduler)->submit(request);
    const std::int64_t now = util::unix_now();
    if (!submitted) {
        const Error& error = submitted.error();
        if (error.code == ErrorCode::scheduler_rejected) {
            (void)store.remove(job.id); // no orphan row
            return fail(error);
        }
        // Timed out or unreachable: the job may exist. Keep the row for reconciliation.
        (void)store.mark_submit_unknown(job.id, now);
        return fail(error.code,
                    fmt::format("{} (job {} recorded; its submission is checked by token)",
                                error.message, job.id),
                    "run 'dljob status' later: it finds the job if the scheduler took it, and "
                    "never submits it twice");
    }
    DLJOB_TRY(store.mark_submitted(job.id, submitted->scheduler_id, submitted->secondary_id, now));
    job.scheduler_id = submitted->scheduler_id;
    job.secondary_id = submitted->secondary_id;
    job.phase = SubmitPhase::submitted;
    return job;
}

Result<Job> record_and_submit(JobContext& context, Job job) {
    // 1. The row, with its token, is committed before the scheduler hears of the job.
    auto created = record_job(context, std::move(job));
    if (!created) {
        return fail(created.error());
    }
    // 2. Submit.
    return submit_recorded(context, *created);
}

} // namespace dljob::app
