#include <dljob/app/data_check.hpp>
#include <dljob/app/network_check.hpp>
#include <dljob/app/render_service.hpp>
#include <dljob/app/run_dir.hpp>
#include <dljob/app/site_catalog.hpp>
#include <dljob/app/stage.hpp>
#include <dljob/app/submit.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/paths.hpp>

#include <fmt/format.h>

#include <fnmatch.h>
#include <unistd.h>

#include <array>

namespace dljob::app {

namespace {

// The recipe as submitted: the file's text, then the --set overrides that won over it, so
// `dljob show` tells what the job really ran with.
std::string recipe_record(const std::filesystem::path& recipe,
                          const std::vector<std::string>& overrides) {
    std::string text = util::read_file(recipe).value_or("");
    if (overrides.empty()) {
        return text;
    }
    if (!text.empty() && text.back() != '\n') {
        text += '\n';
    }
    text += "# ---- dljob submit --set, applied in this order over the values above:\n";
    for (const auto& assignment : overrides) {
        std::string line;
        for (const char c : assignment) {
            line.push_back(c == '\n' || c == '\r' ? ' ' : c);
        }
        text += "# --set " + line + "\n";
    }
    return text;
}

} // namespace

std::string detect_site(const std::vector<std::filesystem::path>& site_files,
                        const std::string& hostname) {
    // One pass over the profiles: each is loaded (and validated) once by list().
    for (const auto& entry : SiteCatalog(site_files).list()) {
        if (!entry.error.empty()) {
            continue;
        }
        for (const auto& pattern : entry.hostnames) {
            if (::fnmatch(pattern.c_str(), hostname.c_str(), FNM_CASEFOLD) == 0) {
                return entry.name;
            }
        }
    }
    return default_site_name;
}

Result<SubmitOutcome> submit_recipe(JobContext& context, const SubmitOptions& options) {
    std::string site = options.site;
    if (site.empty()) {
        std::string hostname = options.hostname;
        if (hostname.empty()) {
            std::array<char, 256> host{};
            ::gethostname(host.data(), host.size() - 1);
            hostname = host.data();
        }
        site = detect_site(options.site_files, hostname);
    }
    const std::string token = util::random_hex(10);
    const std::string stem = options.recipe.stem().string();
    const auto run_dir = std::filesystem::absolute(util::runs_dir() / (stem + "-" + token));

    RenderOptions render;
    render.recipe = options.recipe;
    render.site = site;
    render.site_files = options.site_files;
    render.partition = options.partition;
    render.account = options.account;
    render.run_dir = run_dir;
    render.job_token = token;
    render.overrides = options.overrides;
    auto rendered = render_recipe(render);
    if (!rendered) {
        return fail(rendered.error());
    }
    SubmitOutcome outcome{Job{}, *rendered};
    // Data that is missing or slow to read in place, a network config dltrain would refuse:
    // say so before the job waits in a queue.
    if (auto recipe = config::load_recipe(options.recipe, options.overrides)) {
        for (auto& note :
             data_notes({recipe->data.source, recipe->data.stage_to}, process_environment())) {
            outcome.rendered.notes.push_back(std::move(note));
        }
        auto network = check_network(context.runner(), *recipe, default_dltrain_binary());
        if (!network) {
            return fail(network.error());
        }
        for (auto& note : *network) {
            outcome.rendered.notes.push_back(std::move(note));
        }
    }
    outcome.job.name = rendered->scheduler_job_name;
    outcome.job.site = site;
    outcome.job.scheduler = to_string(rendered->scheduler);
    outcome.job.run_dir = run_dir.string();
    outcome.job.script_path = (run_dir / rendered->script_name).string();
    outcome.job.recipe_path = std::filesystem::absolute(options.recipe).string();
    outcome.job.walltime_s = rendered->resources.walltime.seconds();
    outcome.job.token = token;
    if (options.dry_run) {
        return outcome;
    }

    // Opened (and created on first use) only now, and before the run directory, so that a
    // submit refused for any reason so far, or by a store it cannot open, leaves nothing.
    JobStore& store = context.store();
    auto pending = PendingRunDir::create(run_dir);
    if (!pending) {
        return fail(pending.error());
    }
    DLJOB_TRY(write_rendered(outcome.job.script_path, rendered->script));
    (void)util::write_file_atomic(run_dir / "recipe.yaml",
                                  recipe_record(options.recipe, options.overrides));

    // 1. The row, with its token, is committed before the scheduler hears of the job.
    outcome.job.created_at = util::unix_now();
    auto created = store.create(outcome.job);
    if (!created) {
        return fail(created.error());
    }
    outcome.job = *created;

    // 2. Submit. No transaction is open while the scheduler command runs.
    auto scheduler = context.scheduler(outcome.job.scheduler);
    if (!scheduler) {
        (void)store.remove(outcome.job.id);
        return fail(scheduler.error());
    }
    SubmitRequest request;
    request.script_path = outcome.job.script_path;
    request.run_dir = outcome.job.run_dir;
    request.name = outcome.job.name;
    request.token = token;
    request.log_path = (run_dir / "job.log").string();
    request.submit_argv = rendered->submit_argv;
    if (rendered->scheduler == SchedulerKind::local) {
        // The script warns the training before the walltime itself; the wrapper's watchdog is
        // the hard stop a scheduler would give, one grace minute later.
        request.walltime_s = outcome.job.walltime_s + 60;
    }
    auto submitted = (*scheduler)->submit(request);
    const std::int64_t now = util::unix_now();
    if (!submitted) {
        const Error& error = submitted.error();
        if (error.code == ErrorCode::scheduler_rejected) {
            (void)store.remove(outcome.job.id); // no orphan row
            return fail(error);
        }
        // Timed out or unreachable: the job may exist. Keep the row for reconciliation, and
        // the script it would run.
        pending->keep();
        (void)store.mark_submit_unknown(outcome.job.id, now);
        return fail(error.code,
                    fmt::format("{} (job {} recorded; its submission is checked by token)",
                                error.message, outcome.job.id),
                    "run 'dljob status' later: it finds the job if the scheduler took it, and "
                    "never submits it twice");
    }
    pending->keep();
    DLJOB_TRY(store.mark_submitted(outcome.job.id, submitted->scheduler_id, submitted->secondary_id,
                                   now));
    outcome.job.scheduler_id = submitted->scheduler_id;
    outcome.job.secondary_id = submitted->secondary_id;
    outcome.job.phase = SubmitPhase::submitted;
    return outcome;
}

} // namespace dljob::app
