#include <dljob/app/reports/show.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <ctime>
#include <filesystem>
#include <ostream>

namespace dljob::app {
namespace {

std::string time_text(std::int64_t t) {
    if (t <= 0) {
        return "-";
    }
    std::tm tm{};
    const std::time_t time = t;
    ::gmtime_r(&time, &tm);
    std::array<char, 32> buffer{};
    std::strftime(buffer.data(), buffer.size(), "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buffer.data();
}

} // namespace

namespace {

// Run-directory files are read as anything else from outside: regular files of a bounded size
// only (a FIFO would wait for a writer, a link to /dev/zero never ends).
constexpr std::size_t max_recipe_bytes = std::size_t{1} << 20;
constexpr std::size_t max_script_bytes = std::size_t{4} << 20;

void show_file(std::ostream& out, const char* what, const std::filesystem::path& path,
               std::size_t max_bytes) {
    const auto read = util::read_regular_file(path, max_bytes);
    switch (read.status) {
    case util::BoundedRead::Status::ok:
        out << "\n" << what << " (" << path.string() << "):\n" << read.content;
        return;
    case util::BoundedRead::Status::missing:
        return;
    case util::BoundedRead::Status::not_regular:
        out << fmt::format("\n{} ({}): not shown: {}, not a file\n", what, path.string(),
                           read.what);
        return;
    case util::BoundedRead::Status::too_large:
        out << fmt::format("\n{} ({}): not shown: {} bytes, more than {}\n", what, path.string(),
                           read.size, max_bytes);
        return;
    case util::BoundedRead::Status::unreadable:
        out << fmt::format("\n{} ({}): not shown: {}\n", what, path.string(), read.what);
        return;
    }
}

} // namespace

Result<void> show_job(JobContext& context, const std::string& id, std::ostream& out) {
    auto job = context.find_job(id);
    if (!job) {
        return fail(job.error());
    }
    out << fmt::format("job {}: {}\n", job->id, job->name);
    out << fmt::format("  state:      {}\n", state_text(*job));
    out << fmt::format("  native:     {}\n", job->native_state.empty() ? "-" : job->native_state);
    out << fmt::format("  site:       {} ({})\n", job->site, job->scheduler);
    if (job->attempt > 1 || job->max_continuations > 0) {
        out << fmt::format("  attempt:    {} of at most {}{}\n", job->attempt,
                           job->max_continuations + 1,
                           job->continues != 0 ? fmt::format(" (continues job {})", job->continues)
                                               : std::string());
    }
    if (auto next = context.store().continuation_of(job->id); next && next->has_value()) {
        out << fmt::format("  continued:  by job {} (attempt {})\n", (*next)->id, (*next)->attempt);
    }
    out << fmt::format("  scheduler:  {}{}\n", job->scheduler_id.empty() ? "-" : job->scheduler_id,
                       job->secondary_id.empty() ? "" : " / " + job->secondary_id);
    out << fmt::format("  token:      {}\n", job->token);
    out << fmt::format("  run dir:    {}\n", job->run_dir);
    out << fmt::format("  recipe:     {}\n", job->recipe_path);
    out << fmt::format("  submitted:  {}\n", time_text(job->created_at));
    out << fmt::format("  started:    {}\n", time_text(job->started_at));
    out << fmt::format("  finished:   {}\n", time_text(job->finished_at));
    if (auto metrics = context.store().metrics(job->id); metrics && metrics->has_value()) {
        out << fmt::format("  progress:   {}\n", progress_text(**metrics, job->state));
    }
    auto events = context.store().events(job->id);
    if (!events) {
        return fail(events.error());
    }
    out << "\nevents:\n";
    for (const auto& event : *events) {
        out << fmt::format("  {}  {:<10} {}{}\n", time_text(event.at), to_string(event.state),
                           event.native_state,
                           event.reason.empty() ? "" : " (" + event.reason + ")");
    }
    const std::filesystem::path dir(job->run_dir);
    show_file(out, "recipe", dir / "recipe.yaml", max_recipe_bytes);
    show_file(out, "job script", job->script_path, max_script_bytes);
    return {};
}

} // namespace dljob::app
