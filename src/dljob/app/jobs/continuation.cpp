#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/schedulers/family.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

namespace dljob::app {

std::string attempt_log_name(int attempt) {
    return fmt::format("job.attempt{}.log", attempt);
}

std::string progress_mark(const std::filesystem::path& run_dir) {
    namespace fs = std::filesystem;
    std::error_code error;
    fs::directory_iterator entries(run_dir / "checkpoints", error);
    if (error) {
        return {};
    }
    std::string newest_name;
    std::uintmax_t newest_size = 0;
    fs::file_time_type newest_time = fs::file_time_type::min();
    for (const auto& entry : entries) {
        const auto time = entry.last_write_time(error);
        if (error) {
            continue; // removed while we looked (a checkpoint rotated away)
        }
        // The newest by time; among equal times the greatest name (dltrain's iter_<8 digits>).
        if (newest_name.empty() || time > newest_time ||
            (time == newest_time && entry.path().filename().string() > newest_name)) {
            newest_time = time;
            newest_name = entry.path().filename().string();
            newest_size = entry.is_regular_file(error) ? entry.file_size(error) : 0;
        }
    }
    if (newest_name.empty()) {
        return {};
    }
    return fmt::format(
        "{} {} {}", newest_name, newest_size,
        std::chrono::duration_cast<std::chrono::nanoseconds>(newest_time.time_since_epoch())
            .count());
}

namespace {

// The size of metrics.jsonl now, -1 when there is none: where the ended attempt's lines end.
std::int64_t metrics_size(const std::filesystem::path& run_dir) {
    std::error_code error;
    const auto size = std::filesystem::file_size(run_dir / "metrics.jsonl", error);
    return error ? -1 : static_cast<std::int64_t>(size);
}

std::filesystem::path record_path(const std::filesystem::path& run_dir, const std::string& token) {
    return run_dir / ("continuation." + token);
}

ContinuationRecord parse_record(const std::string& text) {
    ContinuationRecord record;
    std::size_t begin = 0;
    while (begin < text.size()) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) {
            end = text.size();
        }
        const std::string line = text.substr(begin, end - begin);
        begin = end + 1;
        const auto equals = line.find('=');
        if (equals == std::string::npos) {
            continue;
        }
        const std::string key = line.substr(0, equals);
        const std::string value = line.substr(equals + 1);
        auto number = [&](auto& out) {
            std::from_chars(value.data(), value.data() + value.size(), out);
        };
        if (key == "exit_code") {
            number(record.exit_code);
        } else if (key == "timeout") {
            record.timeout = value == "1";
        } else if (key == "ended") {
            number(record.ended);
        } else if (key == "next_token") {
            record.next_token = value;
        } else if (key == "declined") {
            record.declined = value;
        } else if (key == "pid" || key == "id") {
            record.next_id = value; // the local wrapper's pid, a batch job's scheduler id
        } else if (key == "started") {
            number(record.started);
        } else if (key == "progress") {
            record.progress = value;
        } else if (key == "by") {
            record.by = value;
        } else if (key == "metrics_bytes") {
            number(record.metrics_bytes);
        }
    }
    return record;
}

// Creates the record only if there is none (O_EXCL, as the wrapper's `set -C`): false when
// another (the job itself, another dljob) decided first.
bool claim_record(const std::filesystem::path& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        return false;
    }
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return written;
}

Job next_attempt(const Job& ended, std::string token, std::string mark) {
    Job next;
    next.token = std::move(token);
    next.name = ended.name;
    next.site = ended.site;
    next.scheduler = ended.scheduler;
    next.run_dir = ended.run_dir;
    next.script_path = ended.script_path;
    next.recipe_path = ended.recipe_path;
    next.walltime_s = ended.walltime_s;
    next.attempt = ended.attempt + 1;
    next.continues = ended.id;
    next.max_continuations = ended.max_continuations;
    next.submit_argv = ended.submit_argv;
    next.progress_mark = std::move(mark);
    // Still the same point of its sweep: status folds it and `dljob sweep` finds it.
    next.sweep = ended.sweep;
    next.sweep_point = ended.sweep_point;
    return next;
}

// The next attempt the job started itself: recorded, with its id when the record has it
// (else the next `dljob status` finds it by its token).
std::optional<Job> adopt(JobContext& context, const Job& ended, const ContinuationRecord& record,
                         std::string& note) {
    // The mark when the job decided: the next attempt may have checkpointed since.
    Job next =
        next_attempt(ended, record.next_token,
                     record.progress.empty() ? progress_mark(ended.run_dir) : record.progress);
    next.created_at = util::unix_now();
    auto created = context.store().create(next);
    if (!created) {
        note = fmt::format("job {} continued itself as attempt {} (token {}), which cannot be "
                           "recorded: {}",
                           ended.id, next.attempt, record.next_token, created.error().message);
        return std::nullopt;
    }
    if (!record.next_id.empty()) {
        if (context.store()
                .mark_submitted(created->id, record.next_id, "", created->created_at)
                .has_value()) {
            created->phase = SubmitPhase::submitted;
            created->scheduler_id = record.next_id;
        }
    }
    return *created;
}

} // namespace

std::optional<ContinuationRecord> read_continuation_record(const std::filesystem::path& run_dir,
                                                           const std::string& token) {
    if (token.empty()) {
        return std::nullopt;
    }
    auto text = util::read_file(record_path(run_dir, token));
    if (!text) {
        return std::nullopt;
    }
    return parse_record(*text);
}

std::optional<Job> started_continuation(JobContext& context, const Job& ended, std::string& note) {
    if (auto next = context.store().continuation_of(ended.id); next && next->has_value()) {
        return *next;
    }
    auto record = read_continuation_record(ended.run_dir, ended.token);
    // A job script that has claimed its record is submitting the next attempt: its id comes in
    // a moment (the submit command's own timeout bounds it), and cancel needs it.
    for (int waited = 0; record && record->by == "job" && !record->next_token.empty() &&
                         record->next_id.empty() && waited < 60;
         ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        record = read_continuation_record(ended.run_dir, ended.token);
    }
    if (!record || record->next_token.empty()) {
        return std::nullopt;
    }
    return adopt(context, ended, *record, note);
}

namespace {

// Decided already, by the job itself (the local wrapper) or by another dljob: the attempt it
// named is adopted, or the note says why there is none.
std::optional<Job> adopt_or_explain(JobContext& context, const Job& ended,
                                    const ContinuationRecord& record, std::string& note) {
    const std::filesystem::path run_dir(ended.run_dir);
    if (!record.next_token.empty()) {
        return adopt(context, ended, record, note);
    }
    if (record.declined == "no progress") {
        note = fmt::format("job {} checkpointed to be continued, but {} has no newer "
                           "checkpoint than when it started: not continued, as it makes no "
                           "progress (decided by the job)",
                           ended.id, (run_dir / "checkpoints").string());
    } else if (record.declined == "limit") {
        note = fmt::format("job {} checkpointed to be continued, but it was submitted {} "
                           "times already (checkpoint.max_continuations: {}); submit the "
                           "recipe again to go on from a new run directory",
                           ended.id, ended.attempt, ended.max_continuations);
    } else {
        note = fmt::format("job {} checkpointed to be continued, but was not ({})", ended.id,
                           record.declined.empty() ? "no decision recorded" : record.declined);
    }
    return std::nullopt;
}

} // namespace

std::optional<Job> continue_if_checkpointed(JobContext& context, const Job& ended, int exit_code,
                                            std::string& note) {
    // Only a TIMEOUT: a job cancelled while it checkpointed (scancel sends TERM, dltrain saves
    // and exits 75) ends CANCELLED and stays so.
    if (exit_code != checkpointed_exit_code || ended.state != JobState::timeout ||
        ended.max_continuations <= 0) {
        return std::nullopt;
    }
    if (ended.attempt > ended.max_continuations) {
        note = fmt::format("job {} checkpointed to be continued, but it was submitted {} times "
                           "already (checkpoint.max_continuations: {}); submit the recipe again "
                           "to go on from a new run directory",
                           ended.id, ended.attempt, ended.max_continuations);
        return std::nullopt;
    }
    // Before touching its run directory: files there may already be the next attempt's.
    if (auto next = context.store().continuation_of(ended.id); next && next->has_value()) {
        note = fmt::format("job {} is already continued by job {}", ended.id, (*next)->id);
        return std::nullopt;
    }
    const std::filesystem::path run_dir(ended.run_dir);
    const auto decided = [&](const ContinuationRecord& record) {
        return adopt_or_explain(context, ended, record, note);
    };
    if (auto record = read_continuation_record(run_dir, ended.token)) {
        return decided(*record);
    }
    const std::string mark = progress_mark(run_dir);
    if (mark == ended.progress_mark) {
        note = fmt::format("job {} checkpointed to be continued, but {} has no newer checkpoint "
                           "than when it started: not continued, as it makes no progress",
                           ended.id, (run_dir / "checkpoints").string());
        return std::nullopt;
    }
    // What said how this attempt ended must not be read as the next attempt's end before its
    // script starts (and removes them itself): the row keeps this attempt's outcome.
    // Claimed before anything changes: a job deciding at the same instant, or another dljob,
    // then finds the decision made and starts nothing.
    const std::string token = util::random_hex(10);
    if (!claim_record(record_path(run_dir, ended.token),
                      fmt::format("exit_code={}\nattempt={}\nnext_token={}\nprogress={}\n"
                                  "metrics_bytes={}\nby=dljob\n",
                                  exit_code, ended.attempt, token, mark, metrics_size(run_dir)))) {
        const int error = errno;
        if (auto record = read_continuation_record(run_dir, ended.token)) {
            return decided(*record);
        }
        note =
            fmt::format("job {} checkpointed to be continued, but {} cannot be created: {}",
                        ended.id, record_path(run_dir, ended.token).string(), std::strerror(error));
        return std::nullopt;
    }
    for (const char* name : {"exit_code", "job_identity"}) {
        std::error_code error;
        std::filesystem::remove(run_dir / name, error);
        if (error) {
            note = fmt::format("job {} checkpointed to be continued, but {} cannot be removed: {}",
                               ended.id, (run_dir / name).string(), error.message());
            return std::nullopt;
        }
    }
    // Torque, Moab and sqsub overwrite the output file of a job submitted again: each attempt's
    // log is kept under its own name (`dljob logs` of that attempt shows it), on every family.
    std::error_code moved;
    std::filesystem::rename(run_dir / "job.log", run_dir / attempt_log_name(ended.attempt), moved);

    Job next = next_attempt(ended, token, mark);
    auto submitted = record_and_submit(context, next);
    if (!submitted) {
        note = fmt::format("job {} checkpointed to be continued; submitting attempt {} failed: {}",
                           ended.id, next.attempt, submitted.error().message);
        return std::nullopt;
    }
    // Dependants that a scheduler still holds (one that cancels them on an unsatisfiable
    // dependency already has) wait for the attempt that goes on instead.
    retarget_dependants(context.runner(), next.scheduler, run_dir, submitted->scheduler_id, note);
    return *submitted;
}

namespace {

constexpr std::string_view chain_file = "chain.json";

// The job as chain.json describes it: what submit_request() needs for its next attempt.
std::optional<Job> read_chain_file(const std::filesystem::path& run_dir, std::string& note) {
    auto text = util::read_file(run_dir / chain_file);
    if (!text) {
        note = fmt::format("{} cannot be read: the job cannot continue itself",
                           (run_dir / chain_file).string());
        return std::nullopt;
    }
    const auto json = nlohmann::json::parse(*text, nullptr, false);
    if (json.is_discarded() || !json.is_object()) {
        note = fmt::format("{} is not a JSON object: the job cannot continue itself",
                           (run_dir / chain_file).string());
        return std::nullopt;
    }
    try {
        Job job;
        job.name = json.at("name").get<std::string>();
        job.site = json.at("site").get<std::string>();
        job.scheduler = json.at("scheduler").get<std::string>();
        job.script_path = json.at("script_path").get<std::string>();
        job.walltime_s = json.at("walltime_s").get<std::int64_t>();
        job.max_continuations = json.at("max_continuations").get<int>();
        job.submit_argv = json.at("submit_argv").get<std::vector<std::string>>();
        job.run_dir = run_dir.string();
        return job;
    } catch (const nlohmann::json::exception& error) {
        note = fmt::format("{}: {}: the job cannot continue itself",
                           (run_dir / chain_file).string(), error.what());
        return std::nullopt;
    }
}

// Replaces the record (temporary file, then rename: a reader sees the old or the new whole).
bool rewrite_record(const std::filesystem::path& path, const std::string& text) {
    return util::write_file_atomic(path, text).empty();
}

} // namespace

Result<void> write_chain_file(const Job& job) {
    const nlohmann::json json{
        {"name", job.name},
        {"site", job.site},
        {"scheduler", job.scheduler},
        {"script_path", job.script_path},
        {"walltime_s", job.walltime_s},
        {"max_continuations", job.max_continuations},
        {"submit_argv", job.submit_argv},
    };
    const auto path = std::filesystem::path(job.run_dir) / chain_file;
    if (auto error = util::write_file_atomic(path, json.dump(2) + "\n"); !error.empty()) {
        return fail(ErrorCode::io, fmt::format("cannot write {}: {}", path.string(), error));
    }
    return {};
}

Result<void> record_dependant(const std::filesystem::path& after_run_dir,
                              const std::string& scheduler_id, bool ok) {
    const auto path = after_run_dir / "dependants";
    const std::string line = fmt::format("{} {}\n", scheduler_id, ok ? "afterok" : "afterany");
    // One short write with O_APPEND: two submits naming the same job never interleave.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        const int error = errno;
        if (fd >= 0) {
            ::close(fd);
        }
        return fail(ErrorCode::io,
                    fmt::format("cannot append to {}: {}", path.string(), std::strerror(error)));
    }
    ::close(fd);
    return {};
}

void retarget_dependants(ProcessRunner& runner, const std::string& scheduler,
                         const std::filesystem::path& run_dir, const std::string& next_id,
                         std::string& note) {
    const auto* family = schedulers::find_family(scheduler);
    if (family == nullptr) {
        return;
    }
    // One short line per `submit --after`: a megabyte is tens of thousands of dependants.
    const auto read = util::read_regular_file(run_dir / "dependants", std::size_t{1} << 20);
    if (read.status == util::BoundedRead::Status::missing) {
        return;
    }
    if (read.status != util::BoundedRead::Status::ok) {
        note += fmt::format("{}{} cannot be read, so its jobs still wait on this attempt",
                            note.empty() ? "" : "; ", (run_dir / "dependants").string());
        return;
    }
    for (const std::string_view line : util::split_lines(read.content)) {
        const auto words = util::split_whitespace(line);
        if (words.size() != 2) {
            continue;
        }
        const std::string dependant(words[0]);
        const auto argv = family->retarget_dependency(
            dependant, JobDependency{0, next_id, run_dir.string(), words[1] == "afterok"});
        if (argv.empty()) {
            return; // the family cannot: docs/schedulers.md says what the dependant does then
        }
        ProcessRequest request;
        request.argv = argv;
        request.timeout = std::chrono::seconds(30);
        auto result = runner.run(request);
        if (!result || result->exit_code != 0) {
            // Started or ended already (Slurm: "Job is no longer pending execution"), cancelled,
            // or forgotten: waiting no longer concerns it. Said, not fatal.
            note += fmt::format("{}job {} still waits on this attempt ({})",
                                note.empty() ? "" : "; ", dependant,
                                result ? std::string(util::trim(result->err + result->out))
                                       : result.error().message);
        }
    }
}

namespace {

// The record a job-side attempt claims: how it ended, and either the next attempt's token or
// why there is none (status's bounds: max_continuations, progress since the attempt started).
std::string job_side_record(const JobSideAttempt& attempt, const Job& chain,
                            std::string& next_token, std::string& note) {
    // Where the chain stood when this attempt started: the mark its predecessor's decision
    // recorded; none before the first attempt (its run directory was new).
    std::string start_mark;
    if (!attempt.previous_token.empty()) {
        if (auto previous = read_continuation_record(attempt.run_dir, attempt.previous_token)) {
            start_mark = previous->progress;
        }
    }
    const std::string mark = progress_mark(attempt.run_dir);
    std::string record =
        fmt::format("exit_code={}\ntimeout=0\nended={}\nstarted={}\nattempt={}\nmetrics_bytes={}\n",
                    attempt.exit_code, util::unix_now(), attempt.started, attempt.attempt,
                    metrics_size(attempt.run_dir));
    if (attempt.attempt > chain.max_continuations) {
        record += "declined=limit\n";
        note = fmt::format("not continued: attempt {} reached checkpoint.max_continuations ({})",
                           attempt.attempt, chain.max_continuations);
    } else if (mark == start_mark) {
        record += "declined=no progress\n";
        note = fmt::format("not continued: {} has no newer checkpoint than when this attempt "
                           "started (no progress)",
                           (attempt.run_dir / "checkpoints").string());
    } else {
        next_token = util::random_hex(10);
        record += fmt::format("next_token={}\nprogress={}\n", next_token, mark);
    }
    return record + "by=job\n";
}

// Submits the attempt this one claimed (record at `path`) through the family's own adapter.
// True when it exists or may exist.
bool submit_claimed(JobContext& context, const JobSideAttempt& attempt, const Job& chain,
                    const std::filesystem::path& path, const std::string& record,
                    const std::string& next_token, std::string& note) {
    // As status does for a continuation: nothing of this attempt's end where the next one's
    // will be read (its end is in the record now), and this attempt's log under its own name
    // (Torque, Moab and sqsub overwrite the output file of a job submitted again). The running
    // job's output still reaches it: the scheduler holds the file open.
    std::error_code moved;
    for (const char* name : {"exit_code", "job_identity"}) {
        std::filesystem::remove(attempt.run_dir / name, moved);
    }
    std::filesystem::rename(attempt.run_dir / "job.log",
                            attempt.run_dir / attempt_log_name(attempt.attempt), moved);
    Job next = chain;
    next.token = next_token;
    next.attempt = attempt.attempt + 1;
    auto scheduler = context.scheduler(next.scheduler);
    auto submitted = scheduler ? (*scheduler)->submit(submit_request(next))
                               : Result<Submission>(fail(scheduler.error()));
    if (!submitted) {
        if (submitted.error().code != ErrorCode::scheduler_rejected) {
            // It may have reached the scheduler: the next `dljob status` looks for it by token.
            note = fmt::format("submitting attempt {} (token {}) gave no answer: {}", next.attempt,
                               next_token, submitted.error().message);
            return true;
        }
        // Refused here (a site may forbid submitting from compute nodes, a queue limit may
        // have filled): no job exists, so the claim is given back and the next `dljob status`
        // decides and submits from the login node. One that recorded the token meanwhile holds
        // the store's only continuation of this attempt, so there is never a second.
        note = fmt::format("submitting attempt {} failed: {}; the next dljob status submits it",
                           next.attempt, submitted.error().message);
        std::filesystem::remove(path, moved);
        std::filesystem::rename(attempt.run_dir / attempt_log_name(attempt.attempt),
                                attempt.run_dir / "job.log", moved);
        return false;
    }
    if (!rewrite_record(path, record + fmt::format("id={}\n", submitted->scheduler_id))) {
        note = fmt::format("attempt {} is job {}, but {} cannot be rewritten (the next dljob "
                           "status finds it by its token)",
                           next.attempt, submitted->scheduler_id, path.string());
    } else {
        note =
            fmt::format("continued as attempt {}: job {}", next.attempt, submitted->scheduler_id);
    }
    // Before this attempt exits 75: a dependant still waiting on it must wait for the chain.
    std::string moved_note;
    retarget_dependants(context.runner(), next.scheduler, attempt.run_dir, submitted->scheduler_id,
                        moved_note);
    if (!moved_note.empty()) {
        note += "; " + moved_note;
    }
    return true;
}

} // namespace

bool continue_from_job(JobContext& context, const JobSideAttempt& attempt, std::string& note) {
    const auto path = record_path(attempt.run_dir, attempt.token);
    // Whoever decided first (a status that saw the end early, a cancel) decides for everyone.
    const auto decided_elsewhere = [&] {
        auto record = read_continuation_record(attempt.run_dir, attempt.token);
        if (!record) {
            return false;
        }
        note = !record->next_token.empty()
                   ? fmt::format("already continued (by {}) as {}", record->by, record->next_token)
                   : fmt::format("not continued: {}",
                                 record->declined.empty() ? "decided elsewhere" : record->declined);
        return !record->next_token.empty();
    };
    if (attempt.exit_code != checkpointed_exit_code || attempt.token.empty()) {
        return decided_elsewhere();
    }
    auto chain = read_chain_file(attempt.run_dir, note);
    if (!chain) {
        // Nothing claimed: the next `dljob status`, which has the job's row, decides instead.
        return decided_elsewhere();
    }
    std::string next_token;
    const std::string record = job_side_record(attempt, *chain, next_token, note);
    if (!claim_record(path, record)) {
        return decided_elsewhere();
    }
    if (next_token.empty()) {
        return false;
    }
    return submit_claimed(context, attempt, *chain, path, record, next_token, note);
}

bool cancel_claimed(const std::filesystem::path& run_dir, const std::string& token) {
    if (token.empty() || run_dir.empty()) {
        return false;
    }
    const auto record = read_continuation_record(run_dir, token);
    return record && record->by == "cancel";
}

bool claim_cancelled(const Job& job) {
    if (job.token.empty() || job.run_dir.empty()) {
        return false;
    }
    return claim_record(record_path(job.run_dir, job.token),
                        fmt::format("declined={}\nby=cancel\n", declined_cancelled));
}

} // namespace dljob::app
