#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/plot.hpp>
#include <dljob/app/jobs/status.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <set>

namespace dljob::app {
namespace {

// A job the scheduler does not list yet right after submission (sacct/squeue lag) keeps its
// state for this long before it may become UNKNOWN.
constexpr std::int64_t submit_grace_s = 60;

std::string duration_text(std::int64_t seconds) {
    if (seconds < 0) {
        seconds = 0;
    }
    if (seconds >= 86400) {
        return fmt::format("{}d{:02}h", seconds / 86400, (seconds / 3600) % 24);
    }
    if (seconds >= 3600) {
        return fmt::format("{}h{:02}m", seconds / 3600, (seconds / 60) % 60);
    }
    if (seconds >= 60) {
        return fmt::format("{}m{:02}s", seconds / 60, seconds % 60);
    }
    return fmt::format("{}s", seconds);
}

std::optional<int> exit_code_file(const std::string& run_dir) {
    if (run_dir.empty()) {
        return std::nullopt;
    }
    auto text = util::read_file(std::filesystem::path(run_dir) / "exit_code");
    if (!text) {
        return std::nullopt;
    }
    int value = 0;
    std::string_view view(*text);
    while (!view.empty() && (view.back() == '\n' || view.back() == ' ')) {
        view.remove_suffix(1);
    }
    auto [ptr, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
    if (ec != std::errc() || ptr != view.data() + view.size()) {
        return std::nullopt;
    }
    return value;
}

// Schedulers that report no walltime kill (SHARCNET's sqjobs, the Torque wrappers' qstat) leave
// a job killed at its walltime looking FAILED: the script's epilogue still writes the code the
// program ended with, which depends on how it and its shells handled the scheduler's SIGTERM
// (143, 137, 255, ...). No job runs past its walltime unless the scheduler is ending it, so a
// non-zero exit after running at least the walltime (job_identity's start to the exit_code
// file's time) is the walltime, not a failure.
// When this job's script started (job_identity's started=, the compute node's clock), unless
// the file is older than the job's row: then it was left by an earlier job in the same run
// directory. A minute of tolerance for the clocks of the login and compute nodes.
std::optional<std::int64_t> script_started(const Job& job) {
    auto identity = util::read_file(std::filesystem::path(job.run_dir) / "job_identity");
    if (!identity) {
        return std::nullopt;
    }
    const auto at = identity->find("started=");
    if (at == std::string::npos) {
        return std::nullopt;
    }
    std::int64_t started = 0;
    const char* first = identity->data() + at + 8;
    const auto [ptr, ec] = std::from_chars(first, identity->data() + identity->size(), started);
    constexpr std::int64_t clock_skew_s = 60;
    if (ec != std::errc() || ptr == first || started < job.created_at - clock_skew_s) {
        return std::nullopt;
    }
    return started;
}

// When the script's epilogue wrote the exit code (the file's modification time).
std::optional<std::int64_t> script_ended(const Job& job) {
    std::error_code error;
    const auto written =
        std::filesystem::last_write_time(std::filesystem::path(job.run_dir) / "exit_code", error);
    if (error) {
        return std::nullopt;
    }
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::file_clock::to_sys(written).time_since_epoch())
        .count();
}

bool killed_at_walltime(const Job& job, int exit_code) {
    if (exit_code == 0 || job.walltime_s <= 0) {
        return false;
    }
    const auto started = script_started(job);
    const auto ended = script_ended(job);
    if (!started || !ended) {
        return false;
    }
    // Schedulers count the limit from their own start, a moment before the script's.
    constexpr std::int64_t slack_s = 2;
    return *ended - *started >= job.walltime_s - slack_s;
}

// What `dljob submit` writes into a run directory before the scheduler hears of the job: the
// script, the recipe's record, their temporary files while being written, and the log the local
// scheduler opens for the job's output just before starting it (empty: nothing ever ran).
bool only_submit_files(const std::filesystem::path& run_dir) {
    std::error_code error;
    std::filesystem::directory_iterator entries(run_dir, error);
    if (error) {
        return false;
    }
    for (const auto& entry : entries) {
        const std::string name = entry.path().filename().string();
        std::error_code size_error;
        const bool empty_log = (name == "job.log" || name == "local.log") &&
                               entry.file_size(size_error) == 0 && !size_error;
        const bool ours = name == "job.sh" || name == "job.pbs" || name == "recipe.yaml" ||
                          name == "chain.json" || empty_log ||
                          (name.front() == '.' && name.find(".tmp") != std::string::npos);
        if (!ours) {
            return false;
        }
    }
    return true;
}

// Submissions whose id was never recorded (the scheduler did not answer, or `dljob submit` was
// interrupted after the row was committed): find them by token and record them as submitted,
// here in `jobs` too so that the poll that follows reads their state at once. One that is
// nowhere once the grace period has passed never reached the scheduler: it ends FAILED and
// leaves the submitting phase (the table and --json then agree, and it is not looked for
// again); a run directory holding only what submit wrote before that is removed.
void reconcile_submits(JobContext& context, Scheduler& scheduler, std::vector<Job>& jobs,
                       std::int64_t now, std::vector<std::string>& warnings) {
    for (auto& job : jobs) {
        if (job.phase == SubmitPhase::submitted) {
            continue;
        }
        auto found = scheduler.find_by_token(job_ref(job));
        if (!found) {
            warnings.push_back(fmt::format("job {}: cannot check its submission: {}", job.id,
                                           found.error().message));
            continue;
        }
        if (found->has_value()) {
            auto marked = context.store().mark_submitted(job.id, (*found)->scheduler_id,
                                                         (*found)->secondary_id, now);
            if (!marked) {
                warnings.push_back(marked.error().message);
                continue;
            }
            job.phase = SubmitPhase::submitted;
            job.scheduler_id = (*found)->scheduler_id;
            job.secondary_id = (*found)->secondary_id;
        } else if (now - job.updated_at > submit_grace_s) {
            SchedulerStatus lost;
            lost.state = JobState::failed;
            lost.native_state = "not submitted";
            lost.reason = "the scheduler never received it; submit again";
            // State first: interrupted between the two, the next status finds the row still
            // submitting and comes here again.
            auto updated = context.store().update_state(job.id, lost, now);
            auto marked = updated ? context.store().mark_submitted(job.id, "", "", now)
                                  : Result<void>(fail(updated.error()));
            if (!marked) {
                warnings.push_back(marked.error().message);
                continue;
            }
            job.phase = SubmitPhase::submitted;
            job.state = JobState::failed;
            const std::filesystem::path run_dir(job.run_dir);
            if (!job.run_dir.empty() && job.attempt == 1 && only_submit_files(run_dir)) {
                std::error_code error;
                std::filesystem::remove_all(run_dir, error);
            }
        }
    }
}

} // namespace

std::int64_t default_poll_interval() {
    if (const char* text = std::getenv("DLJOB_POLL_INTERVAL")) { // NOLINT(concurrency-mt-unsafe)
        std::int64_t value = 0;
        const std::string_view view(text);
        auto [ptr, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
        if (ec == std::errc() && value >= 0) {
            return value;
        }
    }
    return 30;
}

std::optional<JobMetrics> read_metrics(const std::string& run_dir,
                                       std::optional<std::int64_t> limit) {
    std::ifstream in(std::filesystem::path(run_dir) / "metrics.jsonl");
    if (!in) {
        return std::nullopt;
    }
    JobMetrics metrics;
    bool any = false;
    std::string line;
    std::int64_t consumed = 0;
    while (std::getline(in, line)) {
        consumed += static_cast<std::int64_t>(line.size()) + 1;
        if (limit && consumed > *limit) {
            break;
        }
        auto json = nlohmann::json::parse(line, nullptr, false);
        if (json.is_discarded() || !json.is_object()) {
            continue; // a line being written, or noise
        }
        const std::string type = json.value("type", "");
        auto number = [&](const char* key) -> std::optional<double> {
            auto it = json.find(key);
            if (it == json.end() || !it->is_number()) {
                return std::nullopt;
            }
            return it->get<double>();
        };
        if (type == "start") {
            // A new process (a continuation, appending to the same file): the previous one's
            // end ("checkpointed") is not this one's, and its speed counts from where it began.
            metrics.final_status.clear();
            metrics.start_iter = static_cast<std::int64_t>(number("iter").value_or(0));
        }
        if (type == "train") {
            any = true;
            metrics.iter = static_cast<std::int64_t>(number("iter").value_or(0));
            metrics.max_iter = static_cast<std::int64_t>(number("max_iter").value_or(0));
            metrics.loss = number("loss");
            metrics.images_per_s = number("images_per_s");
            metrics.elapsed_s = number("elapsed_s");
        } else if (type == "test") {
            any = true;
            metrics.accuracy = number("accuracy");
        } else if (type == "final") {
            any = true;
            // The last train record is from the last display interval; where it ended is here.
            if (auto iter = number("iter")) {
                metrics.iter = static_cast<std::int64_t>(*iter);
            }
            if (auto max_iter = number("max_iter")) {
                metrics.max_iter = static_cast<std::int64_t>(*max_iter);
            }
            metrics.final_status = json.value("status", "");
            if (auto accuracy = number("test_accuracy")) {
                metrics.accuracy = accuracy;
            }
        }
    }
    return any ? std::optional<JobMetrics>(metrics) : std::nullopt;
}

namespace {

// A job's state from what the scheduler showed (`observed`), the exit code its script wrote
// (`file`) and, for an attempt the job continued itself, its continuation record.
SchedulerStatus job_status_from(const Job& job, const std::optional<SchedulerStatus>& observed,
                                const std::optional<ContinuationRecord>& record,
                                std::optional<int> file) {
    auto status = record ? SchedulerStatus{} : reconcile(observed, file);
    if (record) {
        status.state =
            record->exit_code == checkpointed_exit_code ? JobState::timeout : JobState::failed;
        status.native_state = record->timeout ? "walltime" : "exited";
        status.reason = "checkpointed before the walltime";
        status.exit_code = record->exit_code;
        status.finished_at = record->ended;
    }
    if (status.state == JobState::failed && file && killed_at_walltime(job, *file)) {
        status.state = JobState::timeout;
        status.reason = "killed at the walltime";
    }
    // The job's own times, so that one that ran between two looks (or overnight) shows how
    // long it ran, not when dljob noticed.
    if (status.state == JobState::running || is_terminal(status.state)) {
        // job_identity is the newest attempt's once the job continued itself.
        status.started_at =
            record && record->started > 0 ? record->started : script_started(job).value_or(0);
    }
    if (is_terminal(status.state) && file && !record) {
        status.finished_at = script_ended(job).value_or(0);
    }
    return status;
}

// Only the dljob process whose update ended the job (the store's compare-and-swap lets one
// through) may continue it; the store refuses a second continuation too. The next attempt is
// looked at in this refresh where that costs no scheduler query (`free`), or where the job
// started it itself (it may have ended too, long ago: one status shows the whole chain).
void continue_ended(JobContext& context, std::int64_t id, int exit_code, bool look_now,
                    std::vector<Job>& continued, std::vector<std::string>& warnings) {
    auto ended = context.store().find(id);
    if (!ended || !ended->has_value()) {
        return;
    }
    std::string note;
    auto next = continue_if_checkpointed(context, **ended, exit_code, note);
    if (next && look_now) {
        continued.push_back(*next);
    }
    if (!note.empty()) {
        warnings.push_back(note);
    }
}

// One job of a poll: its new state stored, its metrics read, and a checkpointed end
// continued. Returns whether the stored state changed.
Result<bool> refresh_job(JobContext& context, const Job& job,
                         const Result<std::map<std::string, SchedulerStatus>>& polled, bool free,
                         std::int64_t now, std::vector<Job>& continued,
                         std::vector<std::string>& warnings) {
    std::optional<SchedulerStatus> observed;
    if (polled) {
        auto it = polled->find(job.scheduler_id);
        if (it != polled->end()) {
            observed = it->second;
        }
    }
    // An attempt the job continued itself (the local wrapper, a batch job's epilogue) says how
    // it ended in its continuation record: the run directory's other files are the next
    // attempt's. A cancel's claim says nothing of the end.
    auto record = read_continuation_record(job.run_dir, job.token);
    if (record && record->by == "cancel") {
        record.reset();
    }
    const auto file = record ? std::optional<int>(record->exit_code) : exit_code_file(job.run_dir);
    if (!polled && !file) {
        return false; // no news: keep what the store has
    }
    if (!observed && !file && now - job.created_at < submit_grace_s) {
        return false; // too early to call a missing job UNKNOWN
    }
    const SchedulerStatus status = job_status_from(job, observed, record, file);
    auto updated = context.store().update_state(job.id, status, now);
    if (!updated) {
        return fail(updated.error());
    }
    const auto metrics_limit = record && record->metrics_bytes >= 0
                                   ? std::optional<std::int64_t>(record->metrics_bytes)
                                   : std::nullopt;
    if (auto metrics = read_metrics(job.run_dir, metrics_limit)) {
        (void)context.store().update_metrics(job.id, *metrics);
    }
    if (*updated && status.state == JobState::timeout && status.exit_code) {
        const bool job_started = record && !record->next_token.empty();
        continue_ended(context, job.id, *status.exit_code, free || job_started, continued,
                       warnings);
    }
    return *updated;
}

// The jobs of one site and family, polled in one scheduler query unless another dljob polled
// them recently.
Result<void> refresh_site(JobContext& context, const std::string& key, std::vector<Job>& site_jobs,
                          const StatusOptions& options, std::int64_t now,
                          std::vector<Job>& continued, std::vector<std::string>& warnings) {
    const std::string family = site_jobs.front().scheduler;
    const bool free = family == "local"; // no scheduler to be polite to
    if (!free && !options.force) {
        auto slot = context.store().claim_poll(key, now, options.min_interval_s);
        if (!slot) {
            return fail(slot.error());
        }
        if (!slot->granted) {
            return {}; // another dljob polled recently: show what it stored
        }
    }
    auto scheduler = context.scheduler(family);
    if (!scheduler) {
        warnings.push_back(scheduler.error().message);
        return {};
    }
    reconcile_submits(context, **scheduler, site_jobs, now, warnings);
    std::vector<JobRef> refs;
    for (const auto& job : site_jobs) {
        if (job.phase == SubmitPhase::submitted && !job.scheduler_id.empty()) {
            refs.push_back(job_ref(job));
        }
    }
    auto polled = (*scheduler)->poll(refs);
    bool changed = false;
    if (!polled) {
        warnings.push_back(fmt::format("{}: {}", key, polled.error().message));
    }
    for (const auto& job : site_jobs) {
        if (job.phase != SubmitPhase::submitted || job.scheduler_id.empty()) {
            continue;
        }
        auto updated = refresh_job(context, job, polled, free, now, continued, warnings);
        if (!updated) {
            return fail(updated.error());
        }
        changed = changed || *updated;
    }
    if (!free && !options.force) {
        (void)context.store().record_poll(key, changed, !polled, options.min_interval_s,
                                          options.max_interval_s);
    }
    return {};
}

} // namespace

Result<void> refresh_jobs(JobContext& context, const std::vector<Job>& jobs,
                          const StatusOptions& options, std::vector<std::string>& warnings) {
    const std::int64_t now = util::unix_now();
    // Next attempts recorded by this refresh: looked at in the same call, so a chain the job
    // continued by itself while nobody watched is followed to its current attempt at once.
    std::vector<Job> continued;
    std::map<std::string, std::vector<Job>> by_site;
    for (const auto& job : jobs) {
        if (!is_terminal(job.state) || job.phase != SubmitPhase::submitted) {
            by_site[job.site + "@" + job.scheduler].push_back(job);
        }
    }
    for (auto& [key, site_jobs] : by_site) {
        DLJOB_TRY(refresh_site(context, key, site_jobs, options, now, continued, warnings));
    }
    if (!continued.empty()) {
        // Recorded just now: their scheduler is asked at once, whatever the poll interval.
        StatusOptions now_options = options;
        now_options.force = true;
        return refresh_jobs(context, continued, now_options, warnings);
    }
    return {};
}

namespace {

// `submit --after`: a dependant that has not started says what it waits for, and one whose
// job ended otherwise than completed while it waited for an `ok` never runs: it is cancelled
// (Slurm keeps such a job pending as DependencyNeverSatisfied unless kill_invalid_depend is
// set; sqsub -w has no `ok` at all) and says why.
void explain_dependency(JobContext& context, Job& job, std::vector<std::string>& warnings) {
    // A cancelled one explains itself only if its script never started (the store gives a job
    // that never ran its end as start).
    if (job.after == 0 || job.attempt != 1 ||
        (job.state != JobState::pending &&
         (job.state != JobState::cancelled || script_started(job).has_value()))) {
        return;
    }
    const char* const condition = job.after_ok ? "afterok" : "afterany";
    auto other = context.store().find(job.after);
    const bool failed = other && other->has_value() && is_terminal((*other)->state) &&
                        (*other)->state != JobState::completed;
    if (!job.after_ok || !failed) {
        if (job.state == JobState::pending) {
            job.reason = fmt::format("waiting on job {} ({})", job.after, condition);
        }
        return;
    }
    std::string never = fmt::format("never runs: job {} it waited on ({}) ended {}", job.after,
                                    condition, to_string((*other)->state));
    // Checkpointed and continued: the chain may yet complete, but the scheduler judged the
    // dependency by the first attempt's exit 75 (docs/schedulers.md, Dependencies). Say which
    // job to wait for instead.
    if (auto next = context.store().continuation_of(job.after); next && next->has_value()) {
        auto last = context.latest_attempt(**next);
        const Job& latest = last ? *last : **next;
        never = fmt::format("never runs: job {} it waited on ({}) checkpointed (exit 75) and "
                            "goes on as job {}; submit it again with --after {}",
                            job.after, condition, latest.id, latest.id);
    }
    if (job.state == JobState::pending && job.phase == SubmitPhase::submitted) {
        if (auto scheduler = context.scheduler(job.scheduler)) {
            (void)(*scheduler)->cancel(job_ref(job));
        }
        SchedulerStatus status;
        status.state = JobState::cancelled;
        status.native_state = "dependency";
        status.reason = never;
        if (auto updated = context.store().update_state(job.id, status, util::unix_now());
            updated && *updated) {
            warnings.push_back(fmt::format("job {} {}; cancelled", job.id, never));
        }
        job.state = JobState::cancelled;
    }
    job.reason = never;
}

} // namespace

Result<std::vector<JobView>> job_status(JobContext& context, const StatusOptions& options,
                                        std::vector<std::string>& warnings) {
    std::vector<Job> jobs;
    if (!options.ids.empty()) {
        for (const auto& id : options.ids) {
            if (id.rfind("sw-", 0) == 0) {
                auto listed = context.store().list(JobQuery{});
                if (!listed) {
                    return fail(listed.error());
                }
                const auto before = jobs.size();
                for (auto& job : *listed) {
                    if (job.sweep == id) {
                        jobs.push_back(std::move(job));
                    }
                }
                if (jobs.size() == before) {
                    return fail(ErrorCode::not_found,
                                fmt::format("no sweep {} in the job store", id));
                }
                continue;
            }
            auto job = context.find_job(id);
            if (!job) {
                return fail(job.error());
            }
            jobs.push_back(*job);
        }
    }
    // Without ids: the store's jobs, listed again after the refresh, which may have recorded
    // next attempts (continuations).
    const auto list_store = [&]() -> Result<void> {
        JobQuery query;
        query.active_only = !options.all;
        auto listed = context.store().list(query);
        if (!listed) {
            return fail(listed.error());
        }
        jobs = std::move(*listed);
        return {};
    };
    if (options.ids.empty()) {
        DLJOB_TRY(list_store());
    }
    DLJOB_TRY(refresh_jobs(context, jobs, options, warnings));
    if (options.ids.empty()) {
        DLJOB_TRY(list_store());
    }
    auto metrics = context.store().all_metrics();
    if (!metrics) {
        return fail(metrics.error());
    }
    std::vector<JobView> views;
    views.reserve(jobs.size());
    for (const auto& job : jobs) {
        JobView view{job, std::nullopt};
        if (!is_terminal(job.state) || job.phase != SubmitPhase::submitted) {
            // Refreshed just now: read it again (finished jobs cannot have changed).
            auto fresh = context.store().find(job.id);
            if (!fresh || !fresh->has_value()) {
                continue;
            }
            view.job = **fresh;
        }
        if (auto it = metrics->find(job.id); it != metrics->end()) {
            view.metrics = it->second;
        }
        explain_dependency(context, view.job, warnings);
        views.push_back(std::move(view));
    }
    return views;
}

std::string state_text(const Job& job) {
    // An ended job shows how it ended in whatever phase its row is, as --json's state does.
    if (job.phase == SubmitPhase::submitting && !is_terminal(job.state)) {
        return "SUBMITTING";
    }
    if (job.phase == SubmitPhase::submit_unknown && !is_terminal(job.state)) {
        return "SUBMIT?";
    }
    std::string text = to_string(job.state);
    if (job.state == JobState::failed && job.exit_code) {
        return text + fmt::format(" (exit {})", *job.exit_code);
    }
    if (!job.reason.empty() && job.state != JobState::completed) {
        text += " (" + job.reason + ")";
    }
    return text;
}

std::string progress_text(const JobMetrics& m, JobState state) {
    std::string text;
    if (m.max_iter > 0) {
        text += fmt::format("iter {}/{}", m.iter, m.max_iter);
    }
    if (m.loss) {
        text += fmt::format(" loss {:.3f}", *m.loss);
    }
    if (m.accuracy) {
        text += fmt::format(" acc {:.4f}", *m.accuracy);
    }
    if (m.images_per_s) {
        text += fmt::format(" {:.0f} img/s", *m.images_per_s);
    }
    // From this process's own pace: a resumed one did not run the iterations before its start.
    if (m.elapsed_s && m.iter > m.start_iter && m.max_iter > m.iter && m.final_status.empty() &&
        !is_terminal(state)) {
        const double eta = *m.elapsed_s / static_cast<double>(m.iter - m.start_iter) *
                           static_cast<double>(m.max_iter - m.iter);
        text += " ETA " + duration_text(static_cast<std::int64_t>(eta));
    }
    // A running job's "final" line is an earlier attempt's, until this one writes its own.
    if (!m.final_status.empty() && is_terminal(state)) {
        text += " " + m.final_status;
    }
    return std::string(text.empty() || text.front() != ' ' ? text : text.substr(1));
}

namespace {

/// A column's text cut to its width, as squeue does: one long reason must not push every
/// column after it out of line. `dljob show` and `--json` give the whole text.
std::string fit(const std::string& text, std::size_t width) {
    return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

/// A continuation shows which attempt it is: "lenet#2".
std::string display_name(const Job& job) {
    return job.attempt > 1 ? fmt::format("{}#{}", job.name, job.attempt) : job.name;
}

} // namespace

namespace {

// The table, with `below(view)`'s line (if any) under each job's own row.
void print_table(std::ostream& out, const std::vector<JobView>& jobs, std::int64_t now,
                 bool fold_sweeps, const std::function<std::string(const JobView&)>& below) {
    if (jobs.empty()) {
        out << "no jobs (dljob status --all lists finished ones too)\n";
        return;
    }
    out << fmt::format("{:<6} {:<20} {:<10} {:<10} {:<28} {:<17} {}\n", "ID", "NAME", "SITE",
                       "SCHED-ID", "STATE", "ELAPSED/WALL", "PROGRESS");
    // Per sweep: how many points in each state, in the order states are listed. A continued
    // point is one point, in its latest listed attempt's state: an attempt that a listed one
    // continues is not counted, and a later attempt recorded without the sweep (by a dljob
    // before attempts kept it) belongs to its first attempt's.
    std::map<std::string, std::map<JobState, int>> sweeps;
    std::map<std::int64_t, std::string> sweep_of; // by job id, inherited along chains
    if (fold_sweeps) {
        std::set<std::int64_t> continued;
        std::map<std::int64_t, const Job*> by_id;
        for (const auto& view : jobs) {
            by_id[view.job.id] = &view.job;
            if (view.job.continues != 0) {
                continued.insert(view.job.continues);
            }
        }
        for (const auto& view : jobs) {
            const Job* first = &view.job;
            for (int hops = 0; hops < 10000 && first->sweep.empty() && first->continues != 0;
                 ++hops) {
                const auto before = by_id.find(first->continues);
                if (before == by_id.end()) {
                    break;
                }
                first = before->second;
            }
            if (first->sweep.empty()) {
                continue;
            }
            sweep_of[view.job.id] = first->sweep;
            if (continued.count(view.job.id) == 0) {
                ++sweeps[first->sweep][view.job.state];
            }
        }
    }
    for (const auto& view : jobs) {
        const Job& job = view.job;
        const auto in_sweep = sweep_of.find(job.id);
        if (auto it = in_sweep == sweep_of.end() ? sweeps.end() : sweeps.find(in_sweep->second);
            it != sweeps.end()) {
            if (it->second.empty()) {
                continue; // folded into the sweep's line already
            }
            int points = 0;
            std::string counts;
            for (const auto& [state, count] : it->second) {
                points += count;
                counts += fmt::format(" {} {}", count, to_string(state));
            }
            // Never cut: the counts are the line's point ("SWEEP 3: 2 RUNNING 1 CANCELLED" is
            // wider than the column), so a long one pushes only this line's last columns.
            out << fmt::format("{:<6} {:<20} {:<10} {:<10} {:<28} {:<17} {}\n", "-",
                               fit(job.name, 20), job.site.substr(0, 10), it->first,
                               fmt::format("SWEEP {}:{}", points, counts), "-",
                               fmt::format("dljob sweep {}", it->first));
            it->second.clear();
            continue;
        }
        std::string elapsed = "-";
        if (job.started_at > 0) {
            const std::int64_t end = job.finished_at > 0 ? job.finished_at : now;
            elapsed = duration_text(end - job.started_at);
        }
        const std::string wall = job.walltime_s > 0 ? duration_text(job.walltime_s) : "-";
        elapsed += "/";
        elapsed += wall;
        out << fmt::format("{:<6} {:<20} {:<10} {:<10} {:<28} {:<17} {}\n", job.id,
                           fit(display_name(job), 20), job.site.substr(0, 10),
                           job.scheduler_id.empty() ? "-" : job.scheduler_id.substr(0, 10),
                           fit(state_text(job), 28), elapsed,
                           view.metrics ? progress_text(*view.metrics, job.state) : "");
        if (below) {
            if (const std::string line = below(view); !line.empty()) {
                out << line << '\n';
            }
        }
    }
}

} // namespace

void print_status_table(std::ostream& out, const std::vector<JobView>& jobs, std::int64_t now,
                        bool fold_sweeps) {
    print_table(out, jobs, now, fold_sweeps, {});
}

std::string loss_sparkline(const Job& job, std::size_t width) {
    if (job.run_dir.empty()) {
        return {};
    }
    // The frame repeats every few seconds: a malformed line would warn on every one, and the
    // progress column already says what the training last wrote. `dljob plot` reports them.
    std::vector<std::string> ignored;
    auto curves = read_run_curves(job.run_dir, ignored);
    if (!curves) {
        return {};
    }
    const bool training = !curves->train_loss.empty();
    const auto& curve = training ? curves->train_loss : curves->test_loss;
    if (curve.empty()) {
        return {};
    }
    return fmt::format("{:<6} {} {} loss, iter {}..{}, last {:.4g}", "", sparkline(curve, width),
                       training ? "training" : "test", curve.front().iter, curve.back().iter,
                       curve.back().value);
}

void print_watch_frame(std::ostream& out, const std::vector<JobView>& jobs, std::int64_t now,
                       bool fold_sweeps, std::size_t width) {
    print_table(out, jobs, now, fold_sweeps,
                [width](const JobView& view) { return loss_sparkline(view.job, width); });
}

void print_status_json(std::ostream& out, const std::vector<JobView>& jobs) {
    // JSON Lines: one object per job and line, written as it goes (with thousands of jobs, one
    // big array cost more than reading them from the store), read line by line by scripts.
    for (const auto& view : jobs) {
        const Job& job = view.job;
        nlohmann::json entry{
            {"id", job.id},
            {"name", job.name},
            {"site", job.site},
            {"scheduler", job.scheduler},
            {"scheduler_id", job.scheduler_id},
            {"secondary_id", job.secondary_id},
            {"token", job.token},
            {"phase", to_string(job.phase)},
            {"state", to_string(job.state)},
            {"native_state", job.native_state},
            {"reason", job.reason},
            {"exit_code", job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json()},
            {"run_dir", job.run_dir},
            {"walltime_s", job.walltime_s},
            {"created_at", job.created_at},
            {"started_at", job.started_at},
            {"finished_at", job.finished_at},
            {"attempt", job.attempt},
            {"continues", job.continues == 0 ? nlohmann::json() : nlohmann::json(job.continues)},
            {"after", job.after == 0 ? nlohmann::json() : nlohmann::json(job.after)},
            {"sweep", job.sweep},
            {"sweep_point", job.sweep_point},
        };
        if (view.metrics) {
            const auto& m = *view.metrics;
            auto optional = [](const std::optional<double>& v) {
                return v ? nlohmann::json(*v) : nlohmann::json();
            };
            entry["metrics"] = {{"iter", m.iter},
                                {"max_iter", m.max_iter},
                                {"loss", optional(m.loss)},
                                {"accuracy", optional(m.accuracy)},
                                {"images_per_s", optional(m.images_per_s)},
                                {"final_status", m.final_status}};
        }
        out << entry.dump() << '\n';
    }
}

} // namespace dljob::app
