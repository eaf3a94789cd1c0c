#include <dljob/app/jobs/sweep.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/schedulers/family.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

namespace dljob::app {
namespace {

Unexpected bad_sweep(std::size_t index, const std::string& sweep, const std::string& why) {
    return fail(ErrorCode::usage, fmt::format("--sweep {} ('{}'): {}", index + 1, sweep, why),
                "e.g. --sweep train.base_lr=0.1,0.01,0.001 or --sweep train.random_seed=1..5");
}

std::optional<long long> whole(std::string_view text) {
    long long value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
        return std::nullopt;
    }
    return value;
}

// The directives of a rendered script that every point shares: its `prefix` lines, without
// those naming the point's own run directory (its log), which the array's submit replaces.
std::vector<std::string> shared_directives(const std::string& script, std::string_view prefix,
                                           const std::string& run_dir) {
    std::vector<std::string> directives;
    const std::string start = std::string(prefix) + " ";
    for (const std::string_view line : util::split_lines(script)) {
        if (line.starts_with(start) && line.find(run_dir) == std::string_view::npos) {
            directives.emplace_back(line.substr(start.size()));
        }
    }
    return directives;
}

std::string submitted_ids(const SweepOutcome& outcome) {
    std::string done;
    for (const auto& p : outcome.points) {
        done += fmt::format("{}{}", done.empty() ? "" : " ", p.job.id);
    }
    return done;
}

void remove_rows(JobContext& context, const std::vector<RecordedSubmit>& recorded) {
    for (const auto& r : recorded) {
        (void)context.store().remove(r.recorded.job.id); // their directories go with them
    }
}

// The refusal of a sweep larger than the site's arrays, naming the profile's line.
std::optional<Error> over_array_size(const SiteProfile& site, std::size_t points) {
    const int most = site.behaviour.max_array_size;
    if (most <= 0 || points <= static_cast<std::size_t>(most)) {
        return std::nullopt;
    }
    const auto origin = site.origins.find("scheduler.max_array_size");
    return Error{
        ErrorCode::usage,
        fmt::format("sweep of {} points: site {} takes job arrays of at most {} tasks "
                    "(scheduler.max_array_size, {}); nothing submitted",
                    points, site.name, most,
                    origin == site.origins.end() ? std::string("its profile") : origin->second),
        "sweep fewer values, or split the sweep in several"};
}

// Every point recorded with its run directory, for one job array. Empty (nothing recorded)
// when the family has no arrays, or when the points cannot share one array script: they ask
// for different resources (a swept resources.* key); `why_not` then says so.
Result<std::vector<RecordedSubmit>>
record_points(JobContext& context, const SubmitOptions& options,
              const std::vector<std::vector<std::string>>& points, const std::string& sweep,
              int limit, std::vector<std::string>& directives, std::string& why_not) {
    std::vector<RecordedSubmit> recorded;
    for (std::size_t i = 0; i < points.size(); ++i) {
        SubmitOptions point = options;
        point.read.reset(); // each point reads the recipe with its own values
        point.overrides.insert(point.overrides.end(), points[i].begin(), points[i].end());
        point.sweep = sweep;
        point.sweep_point = points[i];
        auto one = record_recipe(context, point);
        if (!one) {
            remove_rows(context, recorded);
            Error error = one.error();
            error.message = fmt::format("sweep {} point {} of {}: {} (nothing submitted)", sweep,
                                        i + 1, points.size(), error.message);
            return fail(error);
        }
        const auto& family = schedulers::family_of(one->outcome.rendered.scheduler);
        if (const std::string refused = family.refusal(schedulers::JobFeature::sweep);
            i == 0 && !refused.empty()) {
            (void)context.store().remove(one->recorded.job.id);
            return fail(ErrorCode::config_invalid,
                        fmt::format("sweep {}: site {} cannot run sweeps: {} (nothing submitted)",
                                    sweep, one->site.name, refused));
        }
        if (i == 0) {
            if (family.array_options(ArraySpec{static_cast<int>(points.size()), limit}).empty()) {
                (void)context.store().remove(one->recorded.job.id);
                return std::vector<RecordedSubmit>{}; // sqsub, local: a job per point
            }
            if (auto refused = over_array_size(one->site, points.size())) {
                (void)context.store().remove(one->recorded.job.id);
                return fail(*refused);
            }
        }
        auto mine = shared_directives(one->outcome.rendered.script, family.directive_prefix(),
                                      one->recorded.job.run_dir);
        if (i == 0) {
            directives = std::move(mine);
        } else if (mine != directives ||
                   one->outcome.rendered.scheduler != recorded.front().outcome.rendered.scheduler) {
            remove_rows(context, recorded);
            (void)context.store().remove(one->recorded.job.id);
            why_not = fmt::format("point {} asks for other resources than point 1 (a swept "
                                  "resources key?), so each point is a job of its own, not one "
                                  "job array",
                                  i + 1);
            return std::vector<RecordedSubmit>{};
        }
        recorded.push_back(std::move(*one));
    }
    return recorded;
}

// The recorded points as one job array: its script written next to the first point's, one
// submission, each point's record given its task's id.
Result<SweepOutcome> submit_points(JobContext& context, std::vector<RecordedSubmit>& recorded,
                                   const std::vector<std::string>& directives,
                                   const std::string& sweep, int limit) {
    const auto& family = schedulers::family_of(recorded.front().outcome.rendered.scheduler);
    const ArraySpec array{static_cast<int>(recorded.size()), limit};
    const Job& first = recorded.front().recorded.job;
    const std::filesystem::path run_dir(first.run_dir);
    SubmitRequest request = submit_request(first);
    request.script_path = (run_dir / "array.sh").string();
    request.log_path = (run_dir / "array.log").string();
    request.walltime_s = 0;
    request.array = array;
    if (first.after != 0) {
        auto other = context.store().find(first.after);
        if (other && other->has_value()) {
            request.after = JobDependency{first.after, (*other)->scheduler_id, (*other)->run_dir,
                                          first.after_ok};
        }
    }
    schedulers::ArrayScriptFacts facts{sweep, directives, array, {}};
    for (const auto& r : recorded) {
        facts.scripts.push_back(r.recorded.job.script_path);
    }
    if (auto error = util::write_file_atomic(request.script_path,
                                             schedulers::array_script(family, facts), true);
        !error.empty()) {
        remove_rows(context, recorded);
        return fail(ErrorCode::io, fmt::format("sweep {}: cannot write {}: {}", sweep,
                                               request.script_path, error));
    }
    auto scheduler = context.scheduler(first.scheduler);
    auto submitted =
        scheduler ? (*scheduler)->submit(request) : Result<Submission>(fail(scheduler.error()));
    const std::int64_t now = util::unix_now();
    if (!submitted) {
        const Error& error = submitted.error();
        const std::string what = fmt::format("sweep {}: the job array of {} points: {}", sweep,
                                             recorded.size(), error.message);
        if (error.code == ErrorCode::scheduler_rejected) {
            remove_rows(context, recorded);
            return fail(error.code, what, error.hint);
        }
        // No answer: the array may exist. Every point is kept for reconciliation.
        for (auto& r : recorded) {
            (void)context.store().mark_submit_unknown(r.recorded.job.id, now);
            r.recorded.run_dir.keep();
        }
        return fail(error.code,
                    what + " (jobs recorded; their submission is checked when they start)",
                    "run 'dljob status' later: it never submits them twice");
    }
    if (request.after) {
        note_dependant(*request.after, submitted->scheduler_id,
                       recorded.front().outcome.rendered.notes);
    }
    // The array exists: every point's directory stays, whatever happens to the records.
    for (auto& r : recorded) {
        r.recorded.run_dir.keep();
    }
    SweepOutcome outcome;
    outcome.sweep = sweep;
    for (std::size_t i = 0; i < recorded.size(); ++i) {
        auto& r = recorded[i];
        const std::string task = family.array_task_id(submitted->scheduler_id, static_cast<int>(i));
        DLJOB_TRY(context.store().mark_submitted(r.recorded.job.id, task, "", now));
        r.outcome.job.scheduler_id = task;
        r.outcome.job.phase = SubmitPhase::submitted;
        outcome.points.push_back(std::move(r.outcome));
    }
    return outcome;
}

// A dry run's points as the job array a real submit would make of them (record_points and
// submit_points, without a row, a file or a scheduler call): the array's script and its one
// submit command. Nothing where the family has no arrays or the points ask for different
// resources (they would be jobs of their own; `why_not` says so).
Result<void> plan_dry_array(JobContext& context, SweepOutcome& outcome, int limit,
                            std::string& why_not) {
    const SubmitOutcome& first = outcome.points.front();
    const auto& family = schedulers::family_of(first.rendered.scheduler);
    const ArraySpec array{static_cast<int>(outcome.points.size()), limit};
    if (family.array_options(array).empty()) {
        return {};
    }
    if (auto refused = over_array_size(first.site, outcome.points.size())) {
        return fail(*refused);
    }
    schedulers::ArrayScriptFacts facts{outcome.sweep, {}, array, {}};
    for (std::size_t i = 0; i < outcome.points.size(); ++i) {
        const SubmitOutcome& point = outcome.points[i];
        auto mine =
            shared_directives(point.rendered.script, family.directive_prefix(), point.job.run_dir);
        if (i == 0) {
            facts.directives = std::move(mine);
        } else if (mine != facts.directives ||
                   point.rendered.scheduler != first.rendered.scheduler) {
            why_not = fmt::format("point {} asks for other resources than point 1 (a swept "
                                  "resources key?), so each point would be a job of its own, "
                                  "not one job array",
                                  i + 1);
            return {};
        }
        facts.scripts.push_back(point.job.script_path);
    }
    const std::filesystem::path run_dir(first.job.run_dir);
    SubmitRequest request = submit_request(first.job);
    request.script_path = (run_dir / "array.sh").string();
    request.log_path = (run_dir / "array.log").string();
    request.walltime_s = 0;
    request.array = array;
    auto scheduler = context.scheduler(first.job.scheduler);
    if (!scheduler) {
        return fail(scheduler.error());
    }
    outcome.array_script = schedulers::array_script(family, facts);
    outcome.array_command = (*scheduler)->submit_command_line(request);
    return {};
}

} // namespace

Result<std::vector<SweepAxis>> sweep_axes(const std::vector<SweepAxis>& recipe,
                                          const std::vector<std::string>& sweeps,
                                          std::size_t max_points) {
    std::vector<SweepAxis> axes = recipe;
    std::vector<std::string> given; // keys of the command line's own --sweep
    for (std::size_t i = 0; i < sweeps.size(); ++i) {
        const std::string& sweep = sweeps[i];
        const auto equals = sweep.find('=');
        if (equals == std::string::npos || equals == 0) {
            return bad_sweep(i, sweep, "expected KEY=V1,V2,... or KEY=A..B");
        }
        const std::string key = sweep.substr(0, equals);
        if (std::find(given.begin(), given.end(), key) != given.end()) {
            return bad_sweep(i, sweep, fmt::format("{} is swept twice", key));
        }
        given.push_back(key);
        const std::string spec = sweep.substr(equals + 1);
        SweepAxis axis{key, {}, fmt::format("--sweep {} ('{}')", i + 1, sweep)};
        if (const auto dots = spec.find(".."); dots != std::string::npos) {
            const auto from = whole(std::string_view(spec).substr(0, dots));
            const auto to = whole(std::string_view(spec).substr(dots + 2));
            if (!from || !to || *from > *to) {
                return bad_sweep(i, sweep, "a range is A..B with whole numbers A <= B");
            }
            // In unsigned arithmetic: -9e18..9e18 overflows a signed difference.
            if (static_cast<unsigned long long>(*to) - static_cast<unsigned long long>(*from) >=
                max_points) {
                return bad_sweep(i, sweep, fmt::format("more than {} values", max_points));
            }
            for (long long v = *from; v <= *to; ++v) {
                axis.values.push_back(std::to_string(v));
            }
        } else {
            std::size_t start = 0;
            while (true) {
                const auto comma = spec.find(',', start);
                axis.values.push_back(spec.substr(start, comma - start));
                if (axis.values.back().empty()) {
                    return bad_sweep(i, sweep, "an empty value");
                }
                if (comma == std::string::npos) {
                    break;
                }
                start = comma + 1;
            }
        }
        // The command line wins over the recipe's sweep: block, key by key, where the recipe
        // had the key (its order stays the recipe's); a key of its own comes after them.
        const auto same = std::find_if(axes.begin(), axes.end(),
                                       [&](const SweepAxis& a) { return a.key == key; });
        if (same != axes.end()) {
            *same = std::move(axis);
        } else {
            axes.push_back(std::move(axis));
        }
    }
    return axes;
}

Result<std::vector<std::vector<std::string>>> sweep_product(const std::vector<SweepAxis>& axes,
                                                            std::size_t max_points) {
    std::vector<std::vector<std::string>> points{{}};
    for (const auto& axis : axes) {
        if (points.size() * axis.values.size() > max_points) {
            return fail(ErrorCode::usage,
                        fmt::format("{}: {} points, more than the {} a sweep may have", axis.origin,
                                    points.size() * axis.values.size(), max_points),
                        "sweep fewer values, or split the sweep in several");
        }
        std::vector<std::vector<std::string>> next;
        for (const auto& point : points) {
            for (const auto& value : axis.values) {
                auto extended = point;
                extended.push_back(fmt::format("{}={}", axis.key, value));
                next.push_back(std::move(extended));
            }
        }
        points = std::move(next);
    }
    return points;
}

Result<std::vector<std::vector<std::string>>> sweep_points(const std::vector<std::string>& sweeps,
                                                           std::size_t max_points) {
    auto axes = sweep_axes({}, sweeps, max_points);
    if (!axes) {
        return fail(axes.error());
    }
    return sweep_product(*axes, max_points);
}

Result<std::vector<SweepAxis>> submit_sweep_axes(const Recipe& recipe, const SubmitOptions& options,
                                                 const std::vector<std::string>& sweeps) {
    // The recipe's own sweep: block, as read with the command line's --set (which may change
    // it: --set sweep= submits the recipe once, unswept).
    auto axes = sweep_axes(recipe.sweep, sweeps);
    if (!axes) {
        return fail(axes.error());
    }
    // A point's value is applied after --set and would silently replace it.
    for (std::size_t i = 0; i < options.overrides.size(); ++i) {
        const std::string key = options.overrides[i].substr(0, options.overrides[i].find('='));
        for (const auto& axis : *axes) {
            if (axis.key == key) {
                return fail(
                    ErrorCode::usage,
                    fmt::format("--set {}: {} is swept ({}), so every point would "
                                "replace this value",
                                i + 1, key, axis.origin),
                    fmt::format("drop the --set, or give the values with --sweep {}=...", key));
            }
        }
    }
    return axes;
}

Result<SweepOutcome> submit_sweep(JobContext& context, const SubmitOptions& options,
                                  const std::vector<SweepAxis>& axes, int limit) {
    auto points = sweep_product(axes);
    if (!points) {
        return fail(points.error());
    }
    if (limit < 0) {
        return fail(ErrorCode::usage,
                    fmt::format("--sweep-limit {}: expected 0 (no limit) or more", limit));
    }
    SweepOutcome outcome;
    outcome.sweep = fmt::format("sw-{}", util::random_hex(6));
    std::string note; // why the points are not one job array
    if (!options.dry_run && points->size() > 1) {
        std::vector<std::string> directives;
        auto recorded =
            record_points(context, options, *points, outcome.sweep, limit, directives, note);
        if (!recorded) {
            return fail(recorded.error());
        }
        if (!recorded->empty()) {
            return submit_points(context, *recorded, directives, outcome.sweep, limit);
        }
    }
    for (std::size_t i = 0; i < points->size(); ++i) {
        SubmitOptions point = options;
        point.read.reset(); // each point reads the recipe with its own values
        point.overrides.insert(point.overrides.end(), (*points)[i].begin(), (*points)[i].end());
        point.sweep = outcome.sweep;
        point.sweep_point = (*points)[i];
        // Where there are no arrays, the concurrency limit as dependencies: point i starts once
        // point i - limit has ended, so at most `limit` run at once (on a laptop's `local` too).
        if (limit > 0 && i >= static_cast<std::size_t>(limit) && !options.dry_run) {
            point.after = fmt::format("{}:any", outcome.points[i - limit].job.id);
        }
        auto submitted = submit_recipe(context, point);
        if (!submitted) {
            Error error = submitted.error();
            const std::string done = submitted_ids(outcome);
            error.message = fmt::format("sweep {} point {} of {}: {}{}", outcome.sweep, i + 1,
                                        points->size(), error.message,
                                        done.empty() ? std::string()
                                                     : fmt::format(" (submitted: jobs {})", done));
            return fail(error);
        }
        if (i == 0 && !note.empty()) {
            submitted->rendered.notes.push_back(note);
        }
        outcome.points.push_back(std::move(*submitted));
    }
    if (options.dry_run && outcome.points.size() > 1) {
        std::string why_not;
        DLJOB_TRY(plan_dry_array(context, outcome, limit, why_not));
        if (!why_not.empty()) {
            outcome.points.front().rendered.notes.push_back(why_not);
        }
    }
    return outcome;
}

} // namespace dljob::app
