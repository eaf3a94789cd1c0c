#include <dljob/adapters/template_mustache.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/app/jobs/job_setup.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/sites/site_catalog.hpp>
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
    auto inputs = recipe_job_inputs(options.recipe, options.overrides, options);
    if (!inputs) {
        return fail(inputs.error());
    }
    inputs->token = options.job_token.empty() ? "preview" : options.job_token;
    inputs->run_dir = options.run_dir;
    inputs->dltrain = options.dltrain;
    inputs->dljob = options.dljob;
    inputs->after = options.after;
    auto prepared = prepare_job(std::move(*inputs));
    if (!prepared) {
        return fail(prepared.error());
    }
    RenderedJob rendered = std::move(prepared->rendered);
    if (const auto& sweep = prepared->request.recipe.sweep; !sweep.empty()) {
        std::string keys;
        std::size_t points = 1;
        for (const auto& axis : sweep) {
            keys += fmt::format("{}{} ({} values)", keys.empty() ? "" : ", ", axis.key,
                                axis.values.size());
            points *= axis.values.size();
        }
        rendered.notes.push_back(
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
