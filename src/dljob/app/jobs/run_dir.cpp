#include <dljob/app/jobs/run_dir.hpp>
#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/util/paths.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <system_error>
#include <utility>

namespace dljob::app {
namespace {

/// Tiers a run directory may go on, by preference: shared between nodes (the batch side and
/// the compute side both write it) and larger than home.
constexpr std::array<const char*, 3> work_tiers{"work", "scratch", "project"};

std::filesystem::path expanded_tier_path(const StorageTier& tier, const GetEnv& getenv) {
    auto path = expand_variables(tier.path, getenv);
    if (!path || path->empty() || path->front() != '/') {
        return {};
    }
    return std::filesystem::path(*path).lexically_normal();
}

bool is_below(const std::filesystem::path& path, const std::filesystem::path& root) {
    const auto [root_end, unused] =
        std::mismatch(root.begin(), root.end(), path.begin(), path.end());
    (void)unused;
    return root_end == root.end() || (std::next(root_end) == root.end() && root_end->empty());
}

} // namespace

RunsRoot default_runs_root(const SiteProfile& site, const GetEnv& getenv) {
    if (auto set = getenv("DLJOB_RUNS_DIR"); set && !set->empty()) {
        return {std::filesystem::path(*set), "$DLJOB_RUNS_DIR"};
    }
    std::string skipped;
    for (const char* name : work_tiers) {
        const StorageTier* tier = site.find_storage(name);
        if (tier == nullptr || tier->per_node) {
            continue;
        }
        const auto path = expanded_tier_path(*tier, getenv);
        if (path.empty()) {
            skipped +=
                fmt::format("; its {} tier ({}) does not expand here", tier->name, tier->path);
            continue;
        }
        return {path / "dljob" / "runs",
                fmt::format("site {}'s {} tier ({})", site.name, tier->name, tier->path)};
    }
    return {util::data_home() / "dljob" / "runs",
            fmt::format("the default; site {} names no work, scratch or project tier{}", site.name,
                        skipped)};
}

RunsRoot default_runs_root(const std::vector<std::filesystem::path>& site_files,
                           const std::string& site_name, const GetEnv& getenv) {
    auto site = SiteCatalog{site_files}.load(site_name);
    if (!site) {
        auto set = getenv("DLJOB_RUNS_DIR");
        return set && !set->empty() ? RunsRoot{std::filesystem::path(*set), "$DLJOB_RUNS_DIR"}
                                    : RunsRoot{util::data_home() / "dljob" / "runs", "the default"};
    }
    return default_runs_root(*site, getenv);
}

std::vector<std::string> run_dir_notes(const std::filesystem::path& run_dir,
                                       const SiteProfile& site, std::int64_t walltime_seconds,
                                       const GetEnv& getenv) {
    const StorageTier* on = nullptr;
    std::size_t longest = 0;
    for (const StorageTier& tier : site.storage) {
        const auto root = expanded_tier_path(tier, getenv);
        const std::size_t length = root.string().size();
        if (!root.empty() && is_below(run_dir.lexically_normal(), root) && length > longest) {
            on = &tier;
            longest = length;
        }
    }
    std::vector<std::string> notes;
    if (on == nullptr) {
        notes.push_back(fmt::format("run directory {}", run_dir.string()));
        return notes;
    }
    notes.push_back(fmt::format("run directory {} (site {}'s {} tier, {})", run_dir.string(),
                                site.name, on->name, on->path));
    if (on->purge_days) {
        const std::int64_t purge_seconds = std::int64_t{*on->purge_days} * 86400;
        if (purge_seconds < walltime_seconds + run_dir_purge_margin_seconds) {
            notes.push_back(fmt::format(
                "warning: site {}'s {} tier purges files after {} days, sooner than the "
                "walltime ({:.1f} days) plus {} days to collect the results: checkpoints and logs "
                "may be deleted; set DLJOB_RUNS_DIR (or "
                "--run-dir) to a tier that keeps them",
                site.name, on->name, *on->purge_days,
                static_cast<double>(walltime_seconds) / 86400.0,
                run_dir_purge_margin_seconds / 86400));
        }
    }
    return notes;
}

Result<PendingRunDir> PendingRunDir::create(std::filesystem::path path) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) {
        return fail(ErrorCode::io,
                    fmt::format("cannot create run directory {}: {}", path.string(), ec.message()),
                    "set DLJOB_RUNS_DIR to a writable directory");
    }
    return PendingRunDir(std::move(path));
}

PendingRunDir::PendingRunDir(PendingRunDir&& other) noexcept
    : m_path(std::move(other.m_path)), m_keep(other.m_keep) {
    other.m_keep = true; // the moved-from guard owns nothing
}

PendingRunDir::~PendingRunDir() {
    if (!m_keep) {
        std::error_code ec; // best effort: the error being returned matters more
        std::filesystem::remove_all(m_path, ec);
    }
}

} // namespace dljob::app
