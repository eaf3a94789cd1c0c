#include <dljob/app/jobs/continuation.hpp>
#include <dljob/app/reports/logs.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>

namespace dljob::app {

std::filesystem::path job_log_path(const Job& job) {
    const std::filesystem::path dir(job.run_dir);
    if (auto earlier = dir / attempt_log_name(job.attempt); std::filesystem::exists(earlier)) {
        return earlier; // an attempt that was continued
    }
    if (std::filesystem::exists(dir / "job.log")) {
        return dir / "job.log";
    }
    std::filesystem::path newest;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const auto name = entry.path().filename().string();
        const bool output = name.ends_with(".out") || name.find(".o") != std::string::npos;
        if (output && entry.is_regular_file() && name != "job.sh" && name != "job.pbs" &&
            (newest.empty() ||
             entry.last_write_time() > std::filesystem::last_write_time(newest))) {
            newest = entry.path();
        }
    }
    return newest.empty() ? dir / "job.log" : newest;
}

namespace {

// Digits at `pos` as a rank (at most 9 of them); `pos` is left after them. No launcher writes a
// rank with a leading zero (srun pads with spaces), so "01" is not rank 1 but the job's own text.
std::optional<int> read_rank(std::string_view line, std::size_t& pos) {
    const std::size_t begin = pos;
    if (pos + 1 < line.size() && line[pos] == '0' && line[pos + 1] >= '0' && line[pos + 1] <= '9') {
        return std::nullopt;
    }
    int value = 0;
    while (pos < line.size() && pos - begin < 9 && line[pos] >= '0' && line[pos] <= '9') {
        value = value * 10 + (line[pos] - '0');
        ++pos;
    }
    if (pos == begin || (pos < line.size() && line[pos] >= '0' && line[pos] <= '9')) {
        return std::nullopt;
    }
    return value;
}

bool skip(std::string_view line, std::size_t& pos, std::string_view word) {
    if (line.substr(pos).starts_with(word)) {
        pos += word.size();
        return true;
    }
    return false;
}

struct Tag {
    int rank;
    std::size_t text; // where the line's own text starts
};

std::optional<Tag> read_tag(std::string_view line) {
    std::size_t pos = 0;
    if (skip(line, pos, "[")) {
        auto first = read_rank(line, pos);
        if (!first) {
            return std::nullopt;
        }
        if (skip(line, pos, "] ")) { // Hydra: [R] text
            return Tag{*first, pos};
        }
        if (!skip(line, pos, ",")) { // Open MPI: [JOB,R]<stdout>:text
            return std::nullopt;
        }
        const auto rank = read_rank(line, pos);
        if (!rank || !(skip(line, pos, "]<stdout>:") || skip(line, pos, "]<stderr>:"))) {
            return std::nullopt;
        }
        return Tag{*rank, pos};
    }
    while (pos < line.size() && line[pos] == ' ') { // srun --label pads to the widest rank
        ++pos;
    }
    auto rank = read_rank(line, pos);
    if (!rank || !skip(line, pos, ": ")) {
        return std::nullopt;
    }
    return Tag{*rank, pos};
}

// Passes the log through whole, or only one rank's lines without their tag; a line split
// between two reads of a followed log waits for its end.
class LogSink {
public:
    LogSink(std::ostream& out, std::optional<int> rank) : m_out(out), m_rank(rank) {}

    void write(std::string_view chunk) {
        if (!m_rank) {
            m_out << chunk << std::flush;
            return;
        }
        m_partial += chunk;
        std::size_t begin = 0;
        for (std::size_t end = m_partial.find('\n'); end != std::string::npos;
             end = m_partial.find('\n', begin)) {
            line(std::string_view(m_partial).substr(begin, end - begin));
            begin = end + 1;
        }
        m_partial.erase(0, begin);
        m_out << std::flush;
    }
    /// The last line, if the log does not end with a newline.
    void finish() {
        if (m_rank && !m_partial.empty()) {
            line(m_partial);
            m_partial.clear();
        }
        m_out << std::flush;
    }
    /// Whether --rank was asked of a log in which no line carries any rank's tag.
    [[nodiscard]] bool untagged() const { return m_rank && !m_tagged; }

private:
    void line(std::string_view text) {
        const auto tag = read_tag(text);
        m_tagged = m_tagged || tag.has_value();
        if (tag && tag->rank == *m_rank) {
            m_out << text.substr(tag->text) << '\n';
        }
    }

    std::ostream& m_out;
    std::optional<int> m_rank;
    std::string m_partial;
    bool m_tagged = false;
};

Result<void> finish(LogSink& sink, const std::string& id) {
    sink.finish();
    if (sink.untagged()) {
        return fail(
            ErrorCode::not_found,
            fmt::format("job {}'s output has no rank tags: no line says which rank wrote it", id),
            "the job ran one rank, or its launcher does not tag lines (aprun; an mpirun "
            "of unknown flavor: name it as mpi.flavor in the site profile); 'dljob logs " +
                id + "' prints all of it");
    }
    return {};
}

// Passes the file on from `offset` in pieces of at most 1 MiB, so a log of any size is never
// held whole. False when it cannot be opened.
bool stream_from(const std::filesystem::path& path, std::streamoff& offset, LogSink& sink) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return false;
    }
    in.seekg(offset);
    std::string chunk(std::size_t{1} << 20, '\0');
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
        const std::streamsize got = in.gcount();
        sink.write(std::string_view(chunk.data(), static_cast<std::size_t>(got)));
        offset += got;
    }
    return true;
}

} // namespace

std::optional<std::string_view> rank_line(std::string_view line, int rank) {
    const auto tag = read_tag(line);
    if (!tag || tag->rank != rank) {
        return std::nullopt;
    }
    return line.substr(tag->text);
}

Result<void> print_logs(JobContext& context, const std::string& id, const LogOptions& options,
                        std::ostream& out) {
    auto job = context.find_job(id);
    if (!job) {
        return fail(job.error());
    }
    LogSink sink(out, options.rank);
    std::streamoff offset = 0;
    StatusOptions status_options;
    status_options.min_interval_s = default_poll_interval();
    while (true) {
        const auto path = job_log_path(*job);
        // Only a regular file: opening a FIFO waits for a writer, /dev/zero never ends.
        if (const std::string kind = util::non_regular_kind(path); !kind.empty()) {
            return fail(ErrorCode::io, fmt::format("job {}'s log {} is {}, not a file: not read",
                                                   id, path.string(), kind));
        }
        const bool found = stream_from(path, offset, sink);
        if (!found && !options.follow) {
            return fail(
                ErrorCode::not_found,
                fmt::format("job {} has no output yet ({} does not exist)", id, path.string()),
                "the job may still be pending; 'dljob status' shows its state");
        }
        if (!options.follow) {
            return finish(sink, id);
        }
        std::vector<std::string> warnings;
        DLJOB_TRY(refresh_jobs(context, {*job}, status_options, warnings));
        auto fresh = context.find_job(id);
        if (!fresh) {
            return fail(fresh.error());
        }
        if (is_terminal(fresh->state) && fresh->phase == SubmitPhase::submitted) {
            if (offset > 0 || !found) {
                // One last read for what was written after the previous one.
                if (const auto last = job_log_path(*fresh); util::non_regular_kind(last).empty()) {
                    (void)stream_from(last, offset, sink);
                }
            }
            return finish(sink, id);
        }
        job = fresh;
        std::this_thread::sleep_for(std::chrono::seconds(1));
    }
}

} // namespace dljob::app
