// What `dljob status` prints: the table, the watch frame with its loss sparklines, JSON Lines,
// and the state and progress texts submit --wait shows too.

#include <dljob/app/reports/plot.hpp>
#include <dljob/app/reports/status.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <ostream>
#include <set>

namespace dljob::app {
namespace {

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

// Longer than any job runs: an ETA past it comes from a damaged line.
constexpr double k_century_s = 100.0 * 365.25 * 86400.0;

} // namespace

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
        if (m.ranks > 1) {
            text += fmt::format(" ({} ranks, {:.0f} each)", m.ranks,
                                *m.images_per_s / static_cast<double>(m.ranks));
        }
    } else if (m.ranks > 1) {
        text += fmt::format(" ({} ranks)", m.ranks);
    }
    // From this process's own pace: a resumed one did not run the iterations before its start.
    if (m.elapsed_s && m.iter > m.start_iter && m.max_iter > m.iter && m.final_status.empty() &&
        !is_terminal(state)) {
        const double eta = *m.elapsed_s / static_cast<double>(m.iter - m.start_iter) *
                           static_cast<double>(m.max_iter - m.iter);
        // A damaged line's elapsed_s (negative, 1e300) gives no ETA rather than a cast past
        // int64 or a negative duration; a century is beyond any job's.
        if (eta >= 0.0 && eta < k_century_s) {
            text += " ETA " + duration_text(static_cast<std::int64_t>(eta));
        }
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
// Per sweep: how many points in each state, in the order states are listed. A continued point
// is one point, in its latest listed attempt's state: an attempt that a listed one continues is
// not counted, and a later attempt recorded without the sweep (by a dljob before attempts kept
// it) belongs to its first attempt's.
struct SweepCounts {
    std::map<std::string, std::map<JobState, int>> states;
    std::map<std::int64_t, std::string> sweep_of; // by job id, inherited along chains
};

SweepCounts count_sweep_points(const std::vector<JobView>& jobs) {
    SweepCounts counts;
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
        for (int hops = 0; hops < 10000 && first->sweep.empty() && first->continues != 0; ++hops) {
            const auto before = by_id.find(first->continues);
            if (before == by_id.end()) {
                break;
            }
            first = before->second;
        }
        if (first->sweep.empty()) {
            continue;
        }
        counts.sweep_of[view.job.id] = first->sweep;
        if (continued.count(view.job.id) == 0) {
            ++counts.states[first->sweep][view.job.state];
        }
    }
    return counts;
}

void print_table(std::ostream& out, const std::vector<JobView>& jobs, std::int64_t now,
                 bool fold_sweeps, const std::function<std::string(const JobView&)>& below) {
    if (jobs.empty()) {
        out << "no jobs (dljob status --all lists finished ones too)\n";
        return;
    }
    out << fmt::format("{:<6} {:<20} {:<10} {:<10} {:<28} {:<17} {}\n", "ID", "NAME", "SITE",
                       "SCHED-ID", "STATE", "ELAPSED/WALL", "PROGRESS");
    SweepCounts sweeps;
    if (fold_sweeps) {
        sweeps = count_sweep_points(jobs);
    }
    for (const auto& view : jobs) {
        const Job& job = view.job;
        const auto in_sweep = sweeps.sweep_of.find(job.id);
        if (auto it = in_sweep == sweeps.sweep_of.end() ? sweeps.states.end()
                                                        : sweeps.states.find(in_sweep->second);
            it != sweeps.states.end()) {
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
                                {"ranks", m.ranks},
                                {"final_status", m.final_status}};
        }
        out << entry.dump() << '\n';
    }
}

} // namespace dljob::app
