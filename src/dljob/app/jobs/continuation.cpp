#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <system_error>

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
        } else if (key == "pid") {
            record.next_id = value;
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
    return next;
}

// The next attempt the job started itself: recorded, with its id when the record has it
// (else the next `dljob status` finds it by its token).
std::optional<Job> adopt(JobContext& context, const Job& ended, const ContinuationRecord& record,
                         std::string& note) {
    Job next = next_attempt(ended, record.next_token, progress_mark(ended.run_dir));
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
        return **next;
    }
    auto record = read_continuation_record(ended.run_dir, ended.token);
    if (!record || record->next_token.empty()) {
        return std::nullopt;
    }
    return adopt(context, ended, *record, note);
}

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
    // Decided already, by the job itself (the local wrapper) or by another dljob.
    auto decided = [&](const ContinuationRecord& record) -> std::optional<Job> {
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
                      fmt::format("exit_code={}\nnext_token={}\nby=dljob\n", exit_code, token))) {
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
    return *submitted;
}

} // namespace dljob::app
