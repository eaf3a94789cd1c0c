#pragma once
// `dljob render`: the job script submit would run for a recipe on a site, printed or written.

#include <dljob/app/sites/resolve_site.hpp>
#include <dljob/domain/render_request.hpp>
#include <dljob/domain/result.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dljob::app {

struct RenderOptions : SiteChoice {
    std::filesystem::path recipe;
    std::filesystem::path run_dir; // empty: <runs dir>/<recipe name>-preview
    std::string job_token;         // empty: "preview"
    std::filesystem::path dltrain; // empty: found next to dljob, else "dltrain" in the build
    std::filesystem::path dljob;
    std::vector<std::string> overrides; // `--set KEY=VALUE` applied to the recipe
    std::optional<JobDependency> after; // submit --after; also what `train.weights: "@ID"` names
};

/// Loads the recipe and resolves the site (as submit does), and renders it with templates/.
Result<RenderedJob> render_recipe(const RenderOptions& options);

/// Same from a prepared request (submit uses this once it has chosen the run dir and token).
Result<RenderedJob> render_request(const RenderRequest& request);

/// Writes `content` to `path` atomically; nothing is written on error.
Result<void> write_rendered(const std::filesystem::path& path, const std::string& content);

/// The dltrain and dljob binaries a job script should run: next to this dljob (installed or in
/// the build tree), else by name.
std::filesystem::path default_dltrain_binary();
std::filesystem::path default_dljob_binary();

} // namespace dljob::app
