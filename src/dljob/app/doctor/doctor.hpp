#pragma once
// `dljob doctor [--site S]`: checks on a login node what a job of the site will need, before one
// waits a day in the queue to fail: the scheduler's commands answer (and their versions), every
// module the profile loads exists and loads, the storage tiers exist and are writable (free
// space, file quota, purge policy), and dltrain runs (and sees the GPUs on a GPU node). Each
// finding is a line with its level and, unless ok, the fix.

#include <dljob/app/sites/resolve_site.hpp>
#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>
#include <dljob/domain/stage.hpp>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace dljob::app {

enum class DoctorLevel { ok, warning, error };

const char* to_string(DoctorLevel level) noexcept;

struct DoctorFinding {
    DoctorLevel level = DoctorLevel::ok;
    std::string topic; // "scheduler", "module", "storage", "dltrain"
    std::string what;  // "sbatch answers (slurm 23.02.6)"
    std::string fix;   // empty for ok
};

struct DoctorOptions {
    std::filesystem::path dltrain; // the dltrain jobs would run
    /// Where this host has a GPU (a /dev/nvidia0, or CUDA_VISIBLE_DEVICES naming one): then
    /// dltrain must see one through its CUDA plugin.
    bool gpu_node = false;
};

/// Runs every check for `site`; commands run through `runner`, variables expand through `getenv`.
std::vector<DoctorFinding> run_doctor(ProcessRunner& runner, const SiteProfile& site,
                                      const DoctorOptions& options, const GetEnv& getenv);

/// `dljob doctor`: the named site (empty: the one detected for this host, as submit does) with
/// the real process runner and the dltrain next to dljob. Returns the site's name and findings.
struct DoctorReport {
    std::string site;
    std::vector<DoctorFinding> findings;
};
Result<DoctorReport> doctor(const SiteChoice& choice);

/// Whether this host looks like a GPU node (see DoctorOptions::gpu_node).
bool this_host_has_gpus(const GetEnv& getenv);

/// One line per finding ("ok       scheduler  sbatch answers (...)"), a "fix:" line under each
/// that is not ok, and a summary line.
void print_findings(std::ostream& out, const std::vector<DoctorFinding>& findings);

/// True when a finding is an error: a job of the site would fail.
bool any_error(const std::vector<DoctorFinding>& findings);

} // namespace dljob::app
