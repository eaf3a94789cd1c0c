#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/reports/plot.hpp>
#include <dljob/app/reports/status.hpp>
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

namespace {

// dltrain's records are a few hundred bytes. A longer line was not written by it, and is skipped
// without being held: a file of one endless line must not take the login node's memory. The
// limit is plot's, which reads the same file.
constexpr std::size_t max_metrics_line = PlotLimits::max_line_bytes;

// The next line of `in` into `line` (without its newline; empty for one over max_metrics_line),
// counting the bytes it took in `consumed`. False at the end of the file.
bool next_record(std::istream& in, std::string& line, std::int64_t& consumed) {
    line.clear();
    std::streambuf& buffer = *in.rdbuf();
    bool any = false;
    bool too_long = false;
    for (int c = buffer.sbumpc(); c != std::char_traits<char>::eof(); c = buffer.sbumpc()) {
        any = true;
        ++consumed;
        if (c == '\n') {
            break;
        }
        if (too_long) {
            continue;
        }
        if (line.size() == max_metrics_line) {
            too_long = true;
            line.clear();
            continue;
        }
        line.push_back(static_cast<char>(c));
    }
    return any;
}

} // namespace

std::optional<JobMetrics> read_metrics(const std::string& run_dir,
                                       std::optional<std::int64_t> limit) {
    const auto path = std::filesystem::path(run_dir) / "metrics.jsonl";
    // Only a regular file: opening a FIFO waits for a writer, a link to /dev/zero never ends.
    if (!util::non_regular_kind(path).empty()) {
        return std::nullopt;
    }
    std::ifstream in(path);
    if (!in) {
        return std::nullopt;
    }
    JobMetrics metrics;
    bool any = false;
    std::string line;
    std::int64_t consumed = 0;
    while (next_record(in, line, consumed)) {
        if (limit && consumed > *limit) {
            break;
        }
        if (line.empty()) {
            continue; // over max_metrics_line: not dltrain's, skipped whole
        }
        auto json = nlohmann::json::parse(line, nullptr, false);
        if (json.is_discarded() || !json.is_object()) {
            continue; // a line being written, or noise
        }
        // Each value read only when it has the type dltrain writes: a damaged line ("type": 5,
        // "iter": 1e300) is skipped key by key, not an exception or an out-of-range cast.
        auto text = [&](const char* key) -> std::string {
            auto it = json.find(key);
            return it != json.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        auto number = [&](const char* key) -> std::optional<double> {
            auto it = json.find(key);
            if (it == json.end() || !it->is_number()) {
                return std::nullopt;
            }
            return it->get<double>();
        };
        // Iterations: from 0 to what an int64 holds (dltrain's are ints), so that differences
        // of them cannot overflow either.
        auto count = [&](const char* key) -> std::optional<std::int64_t> {
            const auto value = number(key);
            if (!value || !(*value >= 0.0 && *value < 9.0e18)) {
                return std::nullopt;
            }
            return static_cast<std::int64_t>(*value);
        };
        const std::string type = text("type");
        if (type == "start") {
            // A new process (a continuation, appending to the same file): the previous one's
            // end ("checkpointed") is not this one's, and its speed counts from where it began.
            metrics.final_status.clear();
            metrics.start_iter = count("iter").value_or(0);
            // A count from a file: kept to what a launcher can start.
            metrics.ranks = static_cast<int>(std::clamp(number("ranks").value_or(1.0), 1.0, 1e6));
        }
        if (type == "train") {
            any = true;
            metrics.iter = count("iter").value_or(0);
            metrics.max_iter = count("max_iter").value_or(0);
            metrics.loss = number("loss");
            metrics.images_per_s = number("images_per_s");
            metrics.elapsed_s = number("elapsed_s");
        } else if (type == "test") {
            any = true;
            metrics.accuracy = number("accuracy");
        } else if (type == "final") {
            any = true;
            // The last train record is from the last display interval; where it ended is here.
            if (auto iter = count("iter")) {
                metrics.iter = *iter;
            }
            if (auto max_iter = count("max_iter")) {
                metrics.max_iter = *max_iter;
            }
            metrics.final_status = text("status");
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
    const bool cancel_claimed = record && record->by == "cancel";
    if (cancel_claimed) {
        record.reset();
    }
    const auto file = record ? std::optional<int>(record->exit_code) : exit_code_file(job.run_dir);
    if (!polled && !file) {
        return false; // no news: keep what the store has
    }
    if (!observed && !file && now - job.created_at < submit_grace_s) {
        return false; // too early to call a missing job UNKNOWN
    }
    SchedulerStatus status = job_status_from(job, observed, record, file);
    // `dljob cancel` claims the record before it signals the job: an end seen after the claim
    // is the cancel's, however the job exited on its signal (0 after a trap, 143, a checkpoint),
    // and however this status raced the cancel's own update.
    if (cancel_claimed && is_terminal(status.state)) {
        status.state = JobState::cancelled;
        status.reason = "cancelled with dljob cancel";
    }
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

} // namespace dljob::app
