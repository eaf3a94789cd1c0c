#pragma once
// `dljob submit`: render the recipe for a site, record the job (with a unique token) in the store
// BEFORE calling the scheduler, submit, and record the outcome. A submit that times out is left
// to reconciliation by token (`dljob status`), never repeated blindly; a rejected one leaves no
// row behind.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/jobs/run_dir.hpp>
#include <dljob/app/sites/resolve_site.hpp>
#include <dljob/domain/job.hpp>
#include <dljob/domain/recipe.hpp>
#include <dljob/domain/render_request.hpp>
#include <dljob/domain/scheduler.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dljob::app {

struct SubmitOptions : SiteChoice {
    std::filesystem::path recipe;
    bool dry_run = false;
    /// `--set KEY=VALUE`: dotted recipe keys, validated like the file's values and recorded
    /// under the copy of the recipe in the run directory (what `dljob show` prints).
    std::vector<std::string> overrides;
    /// `--after ID[:ok|any]`: a dljob job id this one waits for (ok, the default: and only if
    /// it completed); empty: none.
    std::string after;
    /// A point of a sweep (app/jobs/sweep.hpp): the sweep's id and the point's assignments (also in
    /// `overrides`), recorded with the job.
    std::string sweep;
    std::vector<std::string> sweep_point;
    /// The recipe as `recipe` and `overrides` read, where the caller read it already (submit,
    /// to look for a sweep: block first): submit_recipe then does not read the file again.
    std::optional<Recipe> read;
};

struct SubmitOutcome {
    Job job; // id 0 for a dry run
    RenderedJob rendered;
    SiteProfile site; // the site it was rendered for
};

Result<SubmitOutcome> submit_recipe(JobContext& context, const SubmitOptions& options);

/// The recipe file with the --set overrides applied and validated (what `read` holds).
Result<Recipe> read_submit_recipe(const SubmitOptions& options);

/// A job recorded (phase submitting) with its run directory written, not yet submitted; the
/// directory goes unless kept.
struct RecordedJob {
    Job job;
    PendingRunDir run_dir;
};
struct RecordedSubmit {
    SubmitOutcome outcome;
    RecordedJob recorded;
    SiteProfile site; // the site it was rendered for
};
/// submit_recipe without the scheduler: a sweep's points are recorded one by one, then
/// submitted as one job array (app/jobs/sweep.hpp). Not for a dry run.
Result<RecordedSubmit> record_recipe(JobContext& context, const SubmitOptions& options);

/// Records a submitted job (`scheduler_id`) as a dependant of `after` in its run directory
/// (record_dependant), so a continuation of `after` moves it along; a note when it cannot.
void note_dependant(const JobDependency& after, const std::string& scheduler_id,
                    std::vector<std::string>& notes);

/// The request that submits a recorded job's script (again, for a continuation).
SubmitRequest submit_request(const Job& job);

/// Step 1 of every submission: commit the row (phase submitting, with its token), stamped now.
Result<Job> record_job(JobContext& context, Job job);

/// Step 2: call the scheduler for a recorded job. A refusal removes the row; no answer
/// (timeout) keeps it as submit_unknown for reconciliation by token. Returns the job as
/// submitted.
Result<Job> submit_recorded(JobContext& context, Job job);

/// Steps 1 and 2, for a job whose run directory is ready (a continuation).
Result<Job> record_and_submit(JobContext& context, Job job);

} // namespace dljob::app
