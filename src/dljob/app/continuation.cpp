#include <dljob/app/continuation.hpp>
#include <dljob/app/submit.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <chrono>
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
    const std::string mark = progress_mark(run_dir);
    if (mark == ended.progress_mark) {
        note = fmt::format("job {} checkpointed to be continued, but {} has no newer checkpoint "
                           "than when it started: not continued, as it makes no progress",
                           ended.id, (run_dir / "checkpoints").string());
        return std::nullopt;
    }
    // What said how this attempt ended must not be read as the next attempt's end before its
    // script starts (and removes them itself): the row keeps this attempt's outcome.
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

    Job next;
    next.token = util::random_hex(10);
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
    next.progress_mark = mark;
    auto submitted = record_and_submit(context, next);
    if (!submitted) {
        note = fmt::format("job {} checkpointed to be continued; submitting attempt {} failed: {}",
                           ended.id, next.attempt, submitted.error().message);
        return std::nullopt;
    }
    return *submitted;
}

} // namespace dljob::app
