#pragma once
// RenderRequest -> RenderedJob: the input and output of job-script rendering. Submit (app/) builds
// the request, render/ turns it into the script text and the exact command that submits it.

#include <dljob/domain/recipe.hpp>
#include <dljob/domain/scheduler.hpp>
#include <dljob/domain/site_profile.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dljob {

struct RenderRequest {
    Recipe recipe;
    SiteProfile site;
    std::string partition; // a name in site.partitions; empty: site.default_partition
    std::string account;   // overrides site.account when not empty
    /// The job's human name (usually recipe.name); mapped to what the scheduler accepts.
    std::string job_name;
    /// dljob's own identity for the job, [A-Za-z0-9._-]+, written to <run_dir>/job_token so a
    /// run directory can be matched to the store even when the scheduler forgot the job.
    std::string job_token;
    std::filesystem::path run_dir;        // absolute, chosen by submit; exists before submit
    std::filesystem::path dljob_binary;   // absolute path of dljob (for future in-job helpers)
    std::filesystem::path dltrain_binary; // absolute path of dltrain for `train:` recipes
    std::optional<JobDependency> after;   // submit --after: wait for that job first
};

struct RenderedJob {
    /// The job script's text, written by submit to <run_dir>/<script_name> (mode 0700).
    std::string script;
    std::string script_name; // "job.sh" (slurm, local, sqsub) or "job.pbs" (pbs, moab)
    /// The exact command that submits it, argv[0] first, the script's absolute path inside. The
    /// scheduler options for qsub/msub/sqsub repeat the directives (CLI flags win, legacy §5.5).
    /// local: {"/bin/bash", "<run_dir>/job.sh"}.
    std::vector<std::string> submit_argv;
    /// The words of submit_argv that make the job wait (`--after`): for this submission only,
    /// so they are left out of the command kept for continuations.
    std::vector<std::string> dependency_options;
    /// The scheduler options that ask for this job's resources, without what only a batch job
    /// uses (output file, warning signal, requeue, mail): what `dljob shell` asks for.
    std::vector<std::string> resource_options;
    std::string scheduler_job_name;  // the name the scheduler sees, after mapping
    std::string scheduler = "local"; // the family's name
    ResolvedResources resources;
    /// Visible decisions the user should know about ("job name 'x' mapped to 'dlj-1a2b3c4d'").
    std::vector<std::string> notes;
};

} // namespace dljob
