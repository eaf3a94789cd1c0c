#pragma once
// `dljob submit RECIPE --sweep train.base_lr=0.1,0.01 --sweep train.random_seed=1..3`: the
// cartesian product of the values, each point its own run directory, script and record
// (`--set` overrides validated like the recipe's own values) under one sweep id, all submitted
// as ONE job array where the scheduler has them (docs/schedulers.md, Sweeps as job arrays),
// else one job each; `dljob sweep ID` is the table of every point's values and final metrics,
// best first.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/domain/recipe.hpp>
#include <dljob/domain/result.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace dljob::app {

/// The keys a sweep varies: the recipe's `sweep:` block (Recipe::sweep), then each --sweep
/// (`KEY=V1,V2,...` or `KEY=A..B`, whole numbers, A <= B, both included). A --sweep of a key
/// the recipe sweeps replaces its values in the recipe's place; other keys follow the recipe's.
/// Usage errors name the argument ("--sweep 2 ('...'): ...").
Result<std::vector<SweepAxis>> sweep_axes(const std::vector<SweepAxis>& recipe,
                                          const std::vector<std::string>& sweeps,
                                          std::size_t max_points = max_sweep_points);

/// Points of the sweep, each the `KEY=VALUE` assignments of one job, the first axis varying
/// slowest; at most `max_points` points (the error names the axis that passed it).
Result<std::vector<std::vector<std::string>>>
sweep_product(const std::vector<SweepAxis>& axes, std::size_t max_points = max_sweep_points);
/// The same for --sweep arguments alone.
Result<std::vector<std::vector<std::string>>>
sweep_points(const std::vector<std::string>& sweeps, std::size_t max_points = max_sweep_points);

/// The sweep `dljob submit` makes of its options: the `sweep:` block of `recipe` (as read with
/// the --set overrides: options.read) merged with `sweeps`. Empty: one job. A --set of a swept
/// key is a usage error (the point's value would replace it).
Result<std::vector<SweepAxis>> submit_sweep_axes(const Recipe& recipe, const SubmitOptions& options,
                                                 const std::vector<std::string>& sweeps);

struct SweepOutcome {
    std::string sweep; // the id `dljob sweep` and `status` take
    std::vector<SubmitOutcome> points;
    /// A dry run whose points would be one job array: the array's script (array.sh, next to
    /// the first point's) and the one command that would submit it.
    std::string array_script;
    std::vector<std::string> array_command;
};

/// Submits every point of `axes` with `options` (its overrides first, the point's after).
/// Where the site's family has job arrays, every point is recorded and then the points are one
/// array (`limit` > 0: its concurrency limit, Slurm's %N), each point's record holding its
/// task's id; a refused array records nothing, and a sweep larger than the site's
/// scheduler.max_array_size is refused first. Elsewhere (sqsub, local, points that ask for
/// different resources) each point is a job of its own and `limit` > 0 makes point i wait
/// (afterany) for point i - limit. A dry run renders every point, and the array's script and
/// submit command where the points would be one, and records, writes and submits nothing. A point
/// that fails to submit stops the sweep; those submitted stay (their ids are in the error's
/// message).
Result<SweepOutcome> submit_sweep(JobContext& context, const SubmitOptions& options,
                                  const std::vector<SweepAxis>& axes, int limit);

} // namespace dljob::app
