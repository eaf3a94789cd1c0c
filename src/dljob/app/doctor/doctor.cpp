#include <dljob/adapters/process_boost.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/app/doctor/doctor.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/schedulers/family.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/statvfs.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

namespace dljob::app {
namespace {

constexpr auto command_timeout = std::chrono::seconds(20);
constexpr double gib = 1024.0 * 1024.0 * 1024.0;
// Less than this free on a tier and a job's checkpoints or staged data may not fit.
constexpr double low_space_gib = 1.0;

DoctorFinding finding(DoctorLevel level, std::string topic, std::string what,
                      std::string fix = {}) {
    return DoctorFinding{level, std::move(topic), std::move(what), std::move(fix)};
}

std::string first_line(const std::string& text) {
    std::string line = text.substr(0, text.find('\n'));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
        line.pop_back();
    }
    return line;
}

std::string where(const SiteProfile& site) {
    return site.source_file.empty() ? fmt::format("site {}", site.name) : site.source_file.string();
}

// PATH as the job's login shell would search it: the first executable file of that name.
std::string find_on_path(const std::string& program, const GetEnv& getenv) {
    std::stringstream path(getenv("PATH").value_or("/usr/local/bin:/usr/bin:/bin"));
    std::string dir;
    while (std::getline(path, dir, ':')) {
        const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / program;
        std::error_code ec;
        if (std::filesystem::is_regular_file(candidate, ec) &&
            ::access(candidate.c_str(), X_OK) == 0) {
            return candidate.string();
        }
    }
    return {};
}

Result<ProcessResult> run(ProcessRunner& runner, std::vector<std::string> argv) {
    ProcessRequest request;
    request.argv = std::move(argv);
    request.timeout = command_timeout;
    return runner.run(request);
}

// A program as a family names it: a path (a site profile's spark_submit:), or a name on PATH.
bool program_found(const std::string& program, const GetEnv& getenv) {
    if (program.find('/') == std::string::npos) {
        return !find_on_path(program, getenv).empty();
    }
    std::error_code ec;
    return std::filesystem::is_regular_file(program, ec) && ::access(program.c_str(), X_OK) == 0;
}

void check_scheduler(ProcessRunner& runner, const SiteProfile& site, const GetEnv& getenv,
                     std::vector<DoctorFinding>& out) {
    const std::string user = getenv("USER").value_or("");
    std::set<std::string> checked; // partitions of one family usually need the same commands
    for (const auto& partition : site.partitions) {
        const std::string& family = partition.scheduler;
        const auto commands = schedulers::family_of(family).doctor_commands(partition, user);
        if (!checked
                 .insert(fmt::format("{}\n{}\n{}", family, fmt::join(commands.programs, " "),
                                     fmt::join(commands.query, " ")))
                 .second) {
            continue;
        }
        bool all_there = true;
        for (const auto& program : commands.programs) {
            if (!program_found(program, getenv)) {
                all_there = false;
                const bool path = program.find('/') != std::string::npos;
                out.push_back(finding(
                    DoctorLevel::error, "scheduler",
                    fmt::format("{}: {} is not {} (dljob runs it to submit, poll or cancel)",
                                family, program, path ? "an executable file" : "on PATH"),
                    path ? fmt::format("partition {} of site {} names it: correct the path in "
                                       "the site profile, or install it there",
                                       partition.name, site.name)
                         : fmt::format("run dljob on the site's login node, or load the module "
                                       "that provides {} (module spider {})",
                                       program, program)));
            }
        }
        if (!all_there) {
            continue;
        }
        std::string version = "version not reported";
        if (!commands.version.empty()) {
            if (auto ran = run(runner, commands.version); ran && ran->exit_code == 0) {
                const std::string line = first_line(ran->out.empty() ? ran->err : ran->out);
                version = line.empty() ? version : line;
            }
        }
        if (commands.query.empty()) {
            out.push_back(finding(DoctorLevel::ok, "scheduler",
                                  fmt::format("{}: {} found ({})", family,
                                              fmt::join(commands.programs, ", "), version)));
            continue;
        }
        auto answered = run(runner, commands.query);
        if (!answered || answered->timed_out || answered->exit_code != 0) {
            const std::string why =
                !answered ? answered.error().message
                : answered->timed_out
                    ? fmt::format("no answer in {} s", command_timeout.count())
                    : fmt::format(
                          "exit {}: {}", answered->exit_code,
                          first_line(answered->err.empty() ? answered->out : answered->err));
            out.push_back(finding(DoctorLevel::error, "scheduler",
                                  fmt::format("{}: '{}' does not answer ({})", family,
                                              fmt::join(commands.query, " "), why),
                                  "the scheduler's controller is down or unreachable from this "
                                  "host: try again later, or ask the site's support"));
            continue;
        }
        if (!commands.refusal_in_answer.empty() &&
            answered->out.find(commands.refusal_in_answer) != std::string::npos) {
            out.push_back(finding(DoctorLevel::error, "scheduler",
                                  fmt::format("{}: {}", family, commands.refusal_means),
                                  "ask the site's support, or use another queue in the profile"));
            continue;
        }
        out.push_back(
            finding(DoctorLevel::ok, "scheduler",
                    fmt::format("{}: {} answers ({})", family, commands.query.front(), version)));
    }
}

// The modules a job of the site may load, in the order the job script loads them.
std::vector<std::string> profile_modules(const ModuleSystem& modules) {
    std::vector<std::string> names = modules.preload;
    for (const auto& change : modules.switches) {
        names.push_back(change.to);
    }
    for (const auto& [need, list] : modules.needs) {
        names.insert(names.end(), list.begin(), list.end());
    }
    std::vector<std::string> unique;
    for (auto& name : names) {
        if (std::find(unique.begin(), unique.end(), name) == unique.end()) {
            unique.push_back(std::move(name));
        }
    }
    return unique;
}

// A bash that has `module` as the job script would have it: the profile's init file sourced,
// else a login shell's profile (where sites define it).
std::vector<std::string> module_shell(const ModuleSystem& modules, const std::string& body) {
    if (modules.init_script.empty()) {
        return {"bash", "-lc", body, "dljob-doctor"};
    }
    return {"bash", "-c", ". \"$DLJOB_MODULES_INIT\" >/dev/null 2>&1; " + body, "dljob-doctor"};
}

// One shell: each module looked up (`module -t avail` prints one name a line, on stderr
// with Lmod), then all loaded in the job's order and each looked for in `module -t list`.
constexpr const char* module_check_script = R"sh(
command -v module >/dev/null 2>&1 || { echo "dljob-doctor: no-module-command"; exit 0; }
for m in "$@"; do
  if module -t avail "$m" 2>&1 | sed 's/([^)]*)$//' | grep -qx -e "$m" -e "$m/.*"; then
    echo "dljob-doctor: avail $m"
  else
    echo "dljob-doctor: missing $m"
  fi
done
for m in "$@"; do
  module load "$m" >/dev/null 2>&1
  if module -t list 2>&1 | sed 's/([^)]*)$//' | grep -qx -e "$m" -e "$m/.*"; then
    echo "dljob-doctor: loaded $m"
  else
    echo "dljob-doctor: notloaded $m"
  fi
done
)sh";

// What the check script printed: the modules found and the ones loaded.
struct ModuleVerdicts {
    bool no_module_command = false;
    std::set<std::string> avail;
    std::set<std::string> loaded;
};

ModuleVerdicts parse_module_verdicts(const std::string& output) {
    ModuleVerdicts verdicts;
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
        constexpr std::string_view prefix = "dljob-doctor: ";
        if (line.rfind(prefix, 0) != 0) {
            continue;
        }
        const std::string rest = line.substr(prefix.size());
        const auto space = rest.find(' ');
        const std::string verdict = rest.substr(0, space);
        const std::string name = space == std::string::npos ? "" : rest.substr(space + 1);
        verdicts.no_module_command = verdicts.no_module_command || verdict == "no-module-command";
        if (verdict == "avail") {
            verdicts.avail.insert(name);
        } else if (verdict == "loaded") {
            verdicts.loaded.insert(name);
        }
    }
    return verdicts;
}

void check_modules(ProcessRunner& runner, const SiteProfile& site,
                   std::vector<DoctorFinding>& out) {
    const ModuleSystem& modules = site.modules;
    if (std::string blocker = gpu_training_blocker(site); !blocker.empty()) {
        out.push_back(finding(DoctorLevel::warning, "module", std::move(blocker)));
    }
    if (modules.flavor == ModuleFlavor::none) {
        out.push_back(
            finding(DoctorLevel::ok, "module", "the site has no module system: nothing to load"));
        return;
    }
    const auto names = profile_modules(modules);
    if (names.empty()) {
        out.push_back(finding(DoctorLevel::ok, "module", "the profile loads no module"));
        return;
    }
    ProcessRequest request;
    request.argv = module_shell(modules, module_check_script);
    request.argv.insert(request.argv.end(), names.begin(), names.end());
    request.env["DLJOB_MODULES_INIT"] = modules.init_script;
    request.timeout = std::chrono::seconds(60);
    auto ran = runner.run(request);
    if (!ran || ran->timed_out) {
        out.push_back(finding(DoctorLevel::error, "module",
                              fmt::format("cannot run the module command ({})",
                                          ran ? "timed out" : ran.error().message),
                              "check modules.init in " + where(site)));
        return;
    }
    const ModuleVerdicts verdicts = parse_module_verdicts(ran->out);
    if (verdicts.no_module_command) {
        out.push_back(
            finding(DoctorLevel::error, "module",
                    fmt::format("the module command is not defined{}",
                                modules.init_script.empty()
                                    ? " in a login shell"
                                    : fmt::format(" after sourcing {}", modules.init_script)),
                    fmt::format("set modules.init in {} to the file that defines it (often "
                                "/etc/profile.d/modules.sh or Lmod's init/bash)",
                                where(site))));
        return;
    }
    for (const auto& name : names) {
        const auto base = name.substr(0, name.find('/'));
        if (verdicts.avail.count(name) == 0) {
            out.push_back(finding(
                DoctorLevel::error, "module",
                fmt::format("{}: not found by 'module -t avail {}'", name, name),
                fmt::format("'module spider {}' lists the versions this site has; correct the "
                            "name in {} (modules.needs / preload)",
                            base, where(site))));
        } else if (verdicts.loaded.count(name) == 0) {
            out.push_back(
                finding(DoctorLevel::error, "module",
                        fmt::format("{}: exists but does not load in the job's order", name),
                        fmt::format("'module load {}' says why (a prerequisite to load first?); "
                                    "reorder modules.needs in {}",
                                    name, where(site))));
        } else {
            out.push_back(finding(DoctorLevel::ok, "module", name + ": exists and loads"));
        }
    }
}

std::string count_text(double value) {
    if (value >= 1e6) {
        return fmt::format("{:.1f}M", value / 1e6);
    }
    if (value >= 1e3) {
        return fmt::format("{:.0f}k", value / 1e3);
    }
    return fmt::format("{:.0f}", value);
}

void check_storage(const SiteProfile& site, const GetEnv& getenv, std::vector<DoctorFinding>& out) {
    if (site.storage.empty()) {
        out.push_back(finding(DoctorLevel::warning, "storage", "the profile names no storage tier",
                              "add storage: (home, scratch...) to " + where(site)));
        return;
    }
    for (const auto& tier : site.storage) {
        // A node-local tier here is this host's, not a compute node's: what is wrong with it
        // is a warning, checked for real inside a job (dljob shell).
        const DoctorLevel bad = tier.per_node ? DoctorLevel::warning : DoctorLevel::error;
        const std::string key = fmt::format("storage.{}", tier.name);
        const auto expanded = expand_variables(tier.path, getenv);
        if (!expanded) {
            out.push_back(finding(
                DoctorLevel::warning, "storage",
                fmt::format("{}: {} does not expand here (a variable set only inside jobs?)", key,
                            tier.path),
                "check it inside a job: dljob shell, then dljob doctor"));
            continue;
        }
        const std::filesystem::path path(*expanded);
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) {
            out.push_back(finding(bad, "storage",
                                  fmt::format("{}: {} does not exist", key, *expanded),
                                  fmt::format("create it (mkdir -p {}) or correct {}.path in {}",
                                              *expanded, key, where(site))));
            continue;
        }
        if (!std::filesystem::is_directory(path, ec)) {
            out.push_back(finding(bad, "storage",
                                  fmt::format("{}: {} is not a directory", key, *expanded),
                                  fmt::format("correct {}.path in {}", key, where(site))));
            continue;
        }
        // Written, not only access(2)-checked: a read-only mount or a full quota shows only then.
        const auto probe = path / fmt::format(".dljob-doctor-{}", ::getpid());
        FILE* file = std::fopen(probe.c_str(), "w");
        const int open_errno = errno;
        if (file == nullptr) {
            out.push_back(finding(bad, "storage",
                                  fmt::format("{}: {} is not writable ({})", key, *expanded,
                                              std::strerror(open_errno)),
                                  fmt::format("ask for write access to it, or point {}.path in {} "
                                              "at a directory you own",
                                              key, where(site))));
            continue;
        }
        std::fclose(file);
        std::filesystem::remove(probe, ec);
        std::string text = fmt::format("{}: {} writable", key, *expanded);
        DoctorLevel level = DoctorLevel::ok;
        std::string fix;
        struct statvfs fs {};
        if (::statvfs(path.c_str(), &fs) == 0) {
            const double free_bytes = static_cast<double>(fs.f_bavail) * fs.f_frsize;
            const double total = static_cast<double>(fs.f_blocks) * fs.f_frsize;
            text += fmt::format(", {:.1f} GiB free of {:.1f} GiB", free_bytes / gib, total / gib);
            if (fs.f_files > 0) {
                text +=
                    fmt::format(", {} files free", count_text(static_cast<double>(fs.f_favail)));
            }
            if (free_bytes / gib < low_space_gib) {
                level = DoctorLevel::warning;
                fix = "free space there (old run directories: dljob status --all), or use "
                      "another tier";
            }
        }
        if (tier.file_quota) {
            text += fmt::format("; file quota {} (profile)",
                                count_text(static_cast<double>(*tier.file_quota)));
        }
        if (tier.purge_days) {
            text +=
                fmt::format("; files unused for {} days are purged (profile)", *tier.purge_days);
        }
        out.push_back(finding(level, "storage", text, fix));
    }
}

// `dltrain device-query` as a job would run it: with the site's cuda and cudnn modules loaded.
ProcessRequest device_query_request(const SiteProfile& site, const std::filesystem::path& dltrain) {
    std::vector<std::string> cuda_modules;
    for (const char* need : {"cuda", "cudnn"}) {
        if (auto it = site.modules.needs.find(need); it != site.modules.needs.end()) {
            cuda_modules.insert(cuda_modules.end(), it->second.begin(), it->second.end());
        }
    }
    ProcessRequest request;
    if (site.modules.flavor == ModuleFlavor::none || cuda_modules.empty()) {
        request.argv = {dltrain.string(), "device-query"};
    } else {
        request.argv = module_shell(site.modules, "for m in \"$@\"; do module load \"$m\" "
                                                  ">/dev/null 2>&1; done; exec \"$DLJOB_DLTRAIN\" "
                                                  "device-query");
        request.argv.insert(request.argv.end(), cuda_modules.begin(), cuda_modules.end());
        request.env["DLJOB_MODULES_INIT"] = site.modules.init_script;
        request.env["DLJOB_DLTRAIN"] = dltrain.string();
    }
    return request;
}

void check_dltrain(ProcessRunner& runner, const SiteProfile& site, const DoctorOptions& options,
                   std::vector<DoctorFinding>& out) {
    std::error_code ec;
    const auto& dltrain = options.dltrain;
    if (!std::filesystem::exists(dltrain, ec)) {
        out.push_back(
            finding(DoctorLevel::error, "dltrain",
                    fmt::format("{} does not exist (train: recipes run it)", dltrain.string()),
                    "install dljob with its dltrain beside it (cmake --install), or "
                    "build it (scripts/build.sh)"));
        return;
    }
    auto version = run(runner, {dltrain.string(), "--version"});
    if (!version || version->exit_code != 0) {
        out.push_back(finding(DoctorLevel::error, "dltrain",
                              fmt::format("{} does not run ({})", dltrain.string(),
                                          version ? first_line(version->err + version->out)
                                                  : version.error().message),
                              "rebuild dltrain on this cluster (its libraries may be missing: "
                              "ldd " +
                                  dltrain.string() + ")"));
        return;
    }
    out.push_back(finding(DoctorLevel::ok, "dltrain", first_line(version->out)));
    const bool gpu_site = std::any_of(site.partitions.begin(), site.partitions.end(),
                                      [](const Partition& p) { return p.node.gpus > 0; });
    if (!options.gpu_node) {
        if (gpu_site) {
            out.push_back(finding(DoctorLevel::ok, "dltrain",
                                  "no GPU on this host: the CUDA plugin is checked on a GPU node "
                                  "(dljob shell --gpus 1, then dljob doctor)"));
        }
        return;
    }
    ProcessRequest request = device_query_request(site, dltrain);
    request.timeout = std::chrono::seconds(120);
    auto query = runner.run(request);
    if (!query || query->exit_code != 0) {
        out.push_back(finding(DoctorLevel::error, "dltrain",
                              fmt::format("dltrain device-query failed ({})",
                                          query ? first_line(query->err) : query.error().message),
                              "run it by hand: dltrain device-query"));
        return;
    }
    int gpus = 0;
    std::string reason;
    std::istringstream lines(query->out);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("GPU ", 0) == 0) {
            ++gpus;
        } else if (line.rfind("GPUs: none", 0) == 0) {
            reason = line.substr(std::string_view("GPUs: ").size());
        }
    }
    if (gpus == 0) {
        out.push_back(finding(DoctorLevel::error, "dltrain",
                              fmt::format("this host has a GPU but dltrain sees {}", reason),
                              "load the site's cuda and cudnn modules (modules.needs) and check "
                              "that libdltrain-cuda.so is beside dltrain or in ../lib/dljob"));
        return;
    }
    out.push_back(finding(DoctorLevel::ok, "dltrain",
                          fmt::format("the CUDA plugin loads and sees {} GPU(s)", gpus)));
}

} // namespace

const char* to_string(DoctorLevel level) noexcept {
    switch (level) {
    case DoctorLevel::ok:
        return "ok";
    case DoctorLevel::warning:
        return "warning";
    case DoctorLevel::error:
        return "error";
    }
    return "error";
}

bool this_host_has_gpus(const GetEnv& getenv) {
    std::error_code ec;
    if (std::filesystem::exists("/dev/nvidia0", ec)) {
        return true;
    }
    const auto visible = getenv("CUDA_VISIBLE_DEVICES");
    return visible && !visible->empty() && *visible != "-1" && *visible != "NoDevFiles";
}

std::vector<DoctorFinding> run_doctor(ProcessRunner& runner, const SiteProfile& site,
                                      const DoctorOptions& options, const GetEnv& getenv) {
    std::vector<DoctorFinding> out;
    check_scheduler(runner, site, getenv, out);
    check_modules(runner, site, out);
    check_storage(site, getenv, out);
    check_dltrain(runner, site, options, out);
    return out;
}

void print_findings(std::ostream& out, const std::vector<DoctorFinding>& findings) {
    int errors = 0;
    int warnings = 0;
    for (const auto& f : findings) {
        out << fmt::format("{:<8} {:<10} {}\n", to_string(f.level), f.topic, f.what);
        if (!f.fix.empty()) {
            out << fmt::format("{:<8} {:<10} fix: {}\n", "", "", f.fix);
        }
        errors += f.level == DoctorLevel::error ? 1 : 0;
        warnings += f.level == DoctorLevel::warning ? 1 : 0;
    }
    out << fmt::format("{} check(s): {} error(s), {} warning(s){}\n", findings.size(), errors,
                       warnings, errors > 0 ? ": a job of this site would fail" : "");
}

Result<DoctorReport> doctor(const SiteChoice& choice) {
    auto profile = resolve_site(choice);
    if (!profile) {
        return fail(profile.error());
    }
    adapters::BoostProcessRunner runner;
    const GetEnv getenv = process_environment();
    DoctorOptions options;
    options.dltrain = default_dltrain_binary();
    options.gpu_node = this_host_has_gpus(getenv);
    return DoctorReport{profile->name, run_doctor(runner, *profile, options, getenv)};
}

bool any_error(const std::vector<DoctorFinding>& findings) {
    return std::any_of(findings.begin(), findings.end(),
                       [](const DoctorFinding& f) { return f.level == DoctorLevel::error; });
}

} // namespace dljob::app
