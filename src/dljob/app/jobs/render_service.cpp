#include <dljob/adapters/template_mustache.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/jobs/run_dir.hpp>
#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/render/job_script.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

namespace dljob::app {
namespace {

std::filesystem::path self_exe() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path() : exe;
}

} // namespace

std::filesystem::path default_dljob_binary() {
    auto exe = self_exe();
    if (!exe.empty() && exe.filename() == "dljob") {
        return exe;
    }
    return std::filesystem::path(DLJOB_SOURCE_DIR) / "build" / "src" / "dljob";
}

std::filesystem::path default_dltrain_binary() {
    std::error_code ec;
    const auto exe = self_exe();
    if (!exe.empty()) {
        // Installed side by side, or the build tree's build/src/dljob and build/engine/dltrain.
        for (const auto& candidate : {exe.parent_path() / "dltrain",
                                      exe.parent_path().parent_path() / "engine" / "dltrain"}) {
            if (std::filesystem::exists(candidate, ec)) {
                return candidate;
            }
        }
    }
    return std::filesystem::path(DLJOB_SOURCE_DIR) / "build" / "engine" / "dltrain";
}

Result<RenderedJob> render_request(const RenderRequest& request) {
    MustacheTemplates templates{templates_dir()};
    return render::render_job(request, templates);
}

Result<RenderedJob> render_recipe(const RenderOptions& options) {
    auto recipe = config::load_recipe(options.recipe, options.overrides);
    if (!recipe) {
        return fail(recipe.error());
    }
    const SiteCatalog catalog{options.site_files};
    auto site = catalog.load(options.site.empty() ? default_site_name : options.site);
    if (!site) {
        return fail(site.error());
    }
    RenderRequest request;
    request.recipe = *recipe;
    request.site = *site;
    request.partition = options.partition;
    request.account = options.account;
    request.job_name = recipe->name;
    request.job_token = options.job_token.empty() ? "preview" : options.job_token;
    const GetEnv getenv = process_environment();
    request.run_dir = options.run_dir.empty() ? default_runs_root(*site, getenv).path /
                                                    (recipe->name + "-" + request.job_token)
                                              : options.run_dir;
    std::error_code ec;
    request.run_dir = std::filesystem::absolute(request.run_dir, ec).lexically_normal();
    request.dltrain_binary = options.dltrain.empty() ? default_dltrain_binary() : options.dltrain;
    request.dljob_binary = options.dljob.empty() ? default_dljob_binary() : options.dljob;
    request.after = options.after;
    // `train.weights: "@ID"`: the checkpoint job ID ends with, which exists only once it has
    // ended, so only for the job this one waits for; the script picks its newest at start.
    if (const std::string& weights = request.recipe.train.weights;
        !weights.empty() && weights.front() == '@') {
        if (!options.after || weights.substr(1) != std::to_string(options.after->job_id)) {
            return fail(
                ErrorCode::config_invalid,
                fmt::format("{}: train.weights: '{}' names the checkpoint of job {}, which "
                            "only exists once that job has ended",
                            recipe->origins.count("train.weights") != 0
                                ? recipe->origins.at("train.weights")
                                : options.recipe.string(),
                            weights, weights.substr(1)),
                fmt::format("submit with --after {} (the job waits for it)", weights.substr(1)));
        }
        request.recipe.train.weights.clear();
        request.recipe.train.weights_from_run = options.after->run_dir;
    }
    auto rendered = render_request(request);
    if (!rendered) {
        return rendered;
    }
    for (auto& note :
         run_dir_notes(request.run_dir, *site, rendered->resources.walltime.seconds(), getenv)) {
        rendered->notes.push_back(std::move(note));
    }
    if (!recipe->sweep.empty()) {
        std::string keys;
        std::size_t points = 1;
        for (const auto& axis : recipe->sweep) {
            keys += fmt::format("{}{} ({} values)", keys.empty() ? "" : ", ", axis.key,
                                axis.values.size());
            points *= axis.values.size();
        }
        rendered->notes.push_back(
            fmt::format("the recipe's sweep: varies {}; this is the job without them, and "
                        "'dljob submit' submits one job per point ({} points)",
                        keys, points));
    }
    return rendered;
}

Result<void> write_rendered(const std::filesystem::path& path, const std::string& content) {
    const std::string error = util::write_file_atomic(path, content, true);
    if (!error.empty()) {
        return fail(ErrorCode::io, error, "check that the folder exists and is writable");
    }
    return {};
}

} // namespace dljob::app
