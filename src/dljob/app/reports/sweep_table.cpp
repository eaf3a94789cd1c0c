#include <dljob/app/reports/sweep_table.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

namespace dljob::app {
namespace {

// The point's value of `key` ("" if the point does not set it).
std::string value_of(const std::vector<std::string>& point, const std::string& key) {
    for (const auto& assignment : point) {
        if (assignment.rfind(key + "=", 0) == 0) {
            return assignment.substr(key.size() + 1);
        }
    }
    return {};
}

} // namespace

Result<std::vector<SweepRow>> sweep_table(JobContext& context, const std::string& id,
                                          std::vector<std::string>& warnings) {
    if (id.empty()) { // every job that is no sweep's point has an empty sweep id
        return fail(ErrorCode::usage, "sweep '': expected a sweep id (sw-...)",
                    "submit --sweep KEY=V1,V2 prints the sweep id");
    }
    JobQuery query;
    auto listed = context.store().list(query);
    if (!listed) {
        return fail(listed.error());
    }
    StatusOptions status;
    for (const auto& job : *listed) {
        // One row per point: its first attempt's, followed to its latest (later attempts
        // carry the sweep too).
        if (job.sweep != id || job.continues != 0) {
            continue;
        }
        // The point's latest attempt: a continued point goes on in other rows.
        auto last = context.latest_attempt(job);
        const Job& latest = last ? *last : job;
        status.ids.push_back(std::to_string(latest.id));
    }
    if (status.ids.empty()) {
        return fail(ErrorCode::not_found, fmt::format("no sweep {} in the job store", id),
                    "dljob submit ... --sweep KEY=V1,V2 prints the sweep id");
    }
    auto views = job_status(context, status, warnings);
    if (!views) {
        return fail(views.error());
    }
    std::map<std::int64_t, std::vector<std::string>> values; // by the point's first row
    for (const auto& job : *listed) {
        if (job.sweep == id) {
            values[job.id] = job.sweep_point;
        }
    }
    std::vector<SweepRow> rows;
    for (auto& view : *views) {
        // The first attempt's row holds the values; a continuation names it through `continues`.
        std::int64_t first = view.job.id;
        for (int hops = 0; hops < 10000 && values.count(first) == 0; ++hops) {
            auto row = context.store().find(first);
            if (!row || !row->has_value() || (*row)->continues == 0) {
                break;
            }
            first = (*row)->continues;
        }
        rows.push_back(SweepRow{std::move(view), values[first]});
    }
    std::stable_sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) {
        const auto& ma = a.latest.metrics;
        const auto& mb = b.latest.metrics;
        const auto acc = [](const std::optional<JobMetrics>& m) {
            return m && m->accuracy ? *m->accuracy : -1.0;
        };
        const auto loss = [](const std::optional<JobMetrics>& m) {
            return m && m->loss ? *m->loss : std::numeric_limits<double>::infinity();
        };
        if (acc(ma) != acc(mb)) {
            return acc(ma) > acc(mb);
        }
        return loss(ma) < loss(mb);
    });
    return rows;
}

void print_sweep_table(std::ostream& out, const std::vector<SweepRow>& rows) {
    std::vector<std::string> keys;
    for (const auto& row : rows) {
        for (const auto& assignment : row.values) {
            const std::string key = assignment.substr(0, assignment.find('='));
            if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
                keys.push_back(key);
            }
        }
    }
    std::string header = fmt::format("{:<6} {:<22}", "ID", "STATE");
    for (const auto& key : keys) {
        header += fmt::format(" {:<18}", key);
    }
    out << header << fmt::format(" {:>10} {:>10} {:>10}\n", "ITER", "LOSS", "ACCURACY");
    for (const auto& row : rows) {
        const Job& job = row.latest.job;
        std::string line = fmt::format("{:<6} {:<22}", job.id, state_text(job).substr(0, 22));
        for (const auto& key : keys) {
            line += fmt::format(" {:<18}", value_of(row.values, key));
        }
        const auto& m = row.latest.metrics;
        line += fmt::format(" {:>10} {:>10} {:>10}\n", m ? std::to_string(m->iter) : "-",
                            m && m->loss ? fmt::format("{:.4f}", *m->loss) : "-",
                            m && m->accuracy ? fmt::format("{:.4f}", *m->accuracy) : "-");
        out << line;
    }
}

} // namespace dljob::app
