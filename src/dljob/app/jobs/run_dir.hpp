#pragma once
// A job's run directory while submit or shell sets the job up: a submission that fails before
// the job is recorded for good (the scheduler refused it, the store could not take the row)
// takes its directory with it, so that a failure leaves neither a row nor files behind.

#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>
#include <dljob/domain/stage.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dljob::app {

class PendingRunDir {
public:
    /// Creates `path` (and its parents); io error naming it, with a hint, when it cannot.
    static Result<PendingRunDir> create(std::filesystem::path path);
    /// Removes the directory and all in it, unless kept.
    ~PendingRunDir();
    PendingRunDir(PendingRunDir&& other) noexcept;
    PendingRunDir& operator=(PendingRunDir&&) = delete;
    PendingRunDir(const PendingRunDir&) = delete;
    PendingRunDir& operator=(const PendingRunDir&) = delete;

    /// The job is recorded (or may exist at the scheduler): the directory stays.
    void keep() { m_keep = true; }
    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

private:
    explicit PendingRunDir(std::filesystem::path path) : m_path(std::move(path)) {}
    std::filesystem::path m_path;
    bool m_keep = false;
};

/// Where a site's run directories go when nothing says otherwise.
struct RunsRoot {
    std::filesystem::path path;
    std::string origin; // "$DLJOB_RUNS_DIR", "site graham's scratch tier ($SCRATCH)", ...
};

/// $DLJOB_RUNS_DIR when set; else `dljob/runs` on the site's work tier, the first of its
/// storage tiers `work`, `scratch`, `project` that is shared between nodes and whose path
/// expands here; else `$XDG_DATA_HOME/dljob/runs` (the home file system, which is what a
/// laptop's `local` site has). Home on a cluster is small and quota-limited, and checkpoints
/// filled it.
RunsRoot default_runs_root(const SiteProfile& site, const GetEnv& getenv);

/// The same for a site named in a catalog (`site_files`: extra profiles, as submit takes them);
/// a site that cannot be loaded gets the plain default (rendering then reports the site).
RunsRoot default_runs_root(const std::vector<std::filesystem::path>& site_files,
                           const std::string& site_name, const GetEnv& getenv);

/// Time a run directory must outlive its job by: the results are collected, and a continued
/// job resumes from its checkpoint, after the walltime (days, in seconds).
inline constexpr std::int64_t run_dir_purge_margin_seconds = std::int64_t{7} * 86400;

/// What `render` and `submit` say about `run_dir`: the site tier it lies on (matched by path
/// prefix), and a warning when that tier purges files sooner than the walltime plus
/// run_dir_purge_margin_seconds. (A continued job touches its checkpoints every attempt; what
/// a purge takes is what lies untouched longer than its age.)
std::vector<std::string> run_dir_notes(const std::filesystem::path& run_dir,
                                       const SiteProfile& site, std::int64_t walltime_seconds,
                                       const GetEnv& getenv);

} // namespace dljob::app
