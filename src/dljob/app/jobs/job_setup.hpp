#pragma once
// One preparation for every verb that makes a job (submit, render, shell, sweeps): the recipe
// is loaded once by the caller, the site resolved once (app/sites/resolve_site.hpp), and here
// the run directory is chosen, the script rendered, the job record filled in and the run
// directory written, the same way for all of them.

#include <dljob/app/jobs/run_dir.hpp>
#include <dljob/app/sites/resolve_site.hpp>
#include <dljob/domain/job.hpp>
#include <dljob/domain/recipe.hpp>
#include <dljob/domain/render_request.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dljob::app {

struct JobInputs {
    Recipe recipe;
    SiteProfile site;
    std::string partition;
    std::string account;
    std::string job_name; // empty: the recipe's name
    std::string token;    // empty: a fresh random one
    /// The run directory; empty: <runs root of the site>/<run_stem>-<token>.
    std::filesystem::path run_dir;
    std::string run_stem;               // empty: the recipe's name
    std::filesystem::path dltrain;      // empty: default_dltrain_binary()
    std::filesystem::path dljob;        // empty: default_dljob_binary()
    std::optional<JobDependency> after; // --after; also what `train.weights: "@ID"` names
    /// Where the recipe came from, for errors (train.weights) and the job record.
    std::filesystem::path recipe_path;
};

struct PreparedJob {
    RenderRequest request; // recipe, site, run_dir (absolute) and token as rendered
    RenderedJob rendered;  // notes include what the run directory's tier means for the job
    /// The store row to be: name, site, scheduler, run_dir, script_path, recipe_path,
    /// walltime_s, token, submit_argv.
    Job job;
};

/// The inputs of a job made from a recipe file: the recipe with its `--set` overrides and the
/// site `where` names (resolve_site), each loaded once, with the partition and account.
Result<JobInputs> recipe_job_inputs(const std::filesystem::path& recipe,
                                    const std::vector<std::string>& overrides,
                                    const SiteChoice& where);
/// The same for a recipe already read from `path`.
Result<JobInputs> job_inputs(Recipe recipe, const std::filesystem::path& path,
                             const SiteChoice& where);

Result<PreparedJob> prepare_job(JobInputs inputs);

struct RunFile {
    std::filesystem::path name; // relative to the run directory
    std::string content;
    bool executable = false;
};

/// Creates the run directory and writes `files` into it, each atomically; on any error the
/// directory is removed and the error names the file. Removed too when the result is dropped
/// without keep().
Result<PendingRunDir> write_run_dir(const std::filesystem::path& run_dir,
                                    const std::vector<RunFile>& files);

} // namespace dljob::app
