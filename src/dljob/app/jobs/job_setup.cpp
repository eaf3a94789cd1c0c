#include <dljob/app/data/stage.hpp>
#include <dljob/app/jobs/job_setup.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

namespace dljob::app {
namespace {

// `train.weights: "@ID"`: the checkpoint job ID ends with, which exists only once it has
// ended, so only for the job this one waits for; the script picks its newest at start.
Result<void> resolve_weights_from_job(const JobInputs& inputs, Recipe& recipe) {
    const std::string& weights = recipe.train.weights;
    if (weights.empty() || weights.front() != '@') {
        return {};
    }
    if (!inputs.after || weights.substr(1) != std::to_string(inputs.after->job_id)) {
        const auto origin = recipe.origins.find("train.weights");
        return fail(
            ErrorCode::config_invalid,
            fmt::format("{}: train.weights: '{}' names the checkpoint of job {}, which "
                        "only exists once that job has ended",
                        origin != recipe.origins.end() ? origin->second
                                                       : inputs.recipe_path.string(),
                        weights, weights.substr(1)),
            fmt::format("submit with --after {} (the job waits for it)", weights.substr(1)));
    }
    recipe.train.weights.clear();
    recipe.train.weights_from_run = inputs.after->run_dir;
    return {};
}

} // namespace

Result<JobInputs> recipe_job_inputs(const std::filesystem::path& recipe,
                                    const std::vector<std::string>& overrides,
                                    const SiteChoice& where) {
    auto loaded = config::load_recipe(recipe, overrides);
    if (!loaded) {
        return fail(loaded.error());
    }
    return job_inputs(std::move(*loaded), recipe, where);
}

Result<JobInputs> job_inputs(Recipe recipe, const std::filesystem::path& path,
                             const SiteChoice& where) {
    auto site = resolve_site(where);
    if (!site) {
        return fail(site.error());
    }
    JobInputs inputs;
    inputs.recipe = std::move(recipe);
    inputs.site = std::move(*site);
    inputs.partition = where.partition;
    inputs.account = where.account;
    inputs.recipe_path = path;
    return inputs;
}

Result<PreparedJob> prepare_job(JobInputs inputs) {
    PreparedJob prepared;
    RenderRequest& request = prepared.request;
    request.job_name = inputs.job_name.empty() ? inputs.recipe.name : inputs.job_name;
    request.job_token = inputs.token.empty() ? util::random_hex(10) : inputs.token;
    const GetEnv getenv = process_environment();
    if (inputs.run_dir.empty()) {
        const std::string stem = inputs.run_stem.empty() ? inputs.recipe.name : inputs.run_stem;
        inputs.run_dir =
            default_runs_root(inputs.site, getenv).path / (stem + "-" + request.job_token);
    }
    std::error_code ec;
    request.run_dir = std::filesystem::absolute(inputs.run_dir, ec).lexically_normal();
    request.partition = inputs.partition;
    request.account = inputs.account;
    request.dltrain_binary = inputs.dltrain.empty() ? default_dltrain_binary() : inputs.dltrain;
    request.dljob_binary = inputs.dljob.empty() ? default_dljob_binary() : inputs.dljob;
    request.after = inputs.after;
    DLJOB_TRY(resolve_weights_from_job(inputs, inputs.recipe));
    request.recipe = std::move(inputs.recipe);
    request.site = std::move(inputs.site);

    auto rendered = render_request(request);
    if (!rendered) {
        return fail(rendered.error());
    }
    prepared.rendered = std::move(*rendered);
    for (auto& note : run_dir_notes(request.run_dir, request.site,
                                    prepared.rendered.resources.walltime.seconds(), getenv)) {
        prepared.rendered.notes.push_back(std::move(note));
    }

    Job& job = prepared.job;
    job.name = prepared.rendered.scheduler_job_name;
    job.site = request.site.name;
    job.scheduler = prepared.rendered.scheduler;
    job.run_dir = request.run_dir.string();
    job.script_path = (request.run_dir / prepared.rendered.script_name).string();
    job.recipe_path = inputs.recipe_path.empty()
                          ? std::string()
                          : std::filesystem::absolute(inputs.recipe_path, ec).string();
    job.walltime_s = prepared.rendered.resources.walltime.seconds();
    job.token = request.job_token;
    job.submit_argv = prepared.rendered.submit_argv;
    return prepared;
}

Result<PendingRunDir> write_run_dir(const std::filesystem::path& run_dir,
                                    const std::vector<RunFile>& files) {
    auto pending = PendingRunDir::create(run_dir);
    if (!pending) {
        return fail(pending.error());
    }
    for (const auto& file : files) {
        const std::string error =
            util::write_file_atomic(run_dir / file.name, file.content, file.executable);
        if (!error.empty()) {
            return fail(ErrorCode::io, error, "check that the folder exists and is writable");
        }
    }
    return pending;
}

} // namespace dljob::app
