#pragma once
// `dljob submit RECIPE --sweep train.base_lr=0.1,0.01 --sweep train.random_seed=1..3`: the
// cartesian product of the values, each point submitted as its own job (its own run directory
// and record, `--set` overrides validated like the recipe's own values) under one sweep id;
// `dljob sweep ID` is the table of every point's values and final metrics, best first.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/jobs/status.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/domain/result.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace dljob::app {

/// Points of the sweep, each the `KEY=VALUE` assignments of one job, the first --sweep varying
/// slowest. A --sweep is `KEY=V1,V2,...` or `KEY=A..B` (whole numbers, A <= B, both included).
/// Usage errors name the argument ("--sweep 2: ..."); at most `max_points` points.
Result<std::vector<std::vector<std::string>>> sweep_points(const std::vector<std::string>& sweeps,
                                                           std::size_t max_points = 1000);

struct SweepOutcome {
    std::string sweep; // the id `dljob sweep` and `status` take
    std::vector<SubmitOutcome> points;
};

/// Submits every point of `sweeps` with `options` (its overrides first, the point's after).
/// `limit` > 0: at most that many points run at once, each point after the one `limit` before it
/// has ended (afterany), so it holds on every scheduler, local too. A dry run renders every
/// point and submits nothing. A point that fails to submit stops the sweep; those submitted
/// stay (their ids are in the error's message).
Result<SweepOutcome> submit_sweep(JobContext& context, const SubmitOptions& options,
                                  const std::vector<std::string>& sweeps, int limit);

struct SweepRow {
    JobView latest;                  // the point's latest attempt (a continued chain's last)
    std::vector<std::string> values; // KEY=VALUE per swept key
};

/// The points of sweep `id`, refreshed like `dljob status`, best first: highest final test
/// accuracy, then lowest loss, then those without metrics.
Result<std::vector<SweepRow>> sweep_table(JobContext& context, const std::string& id,
                                          std::vector<std::string>& warnings);

void print_sweep_table(std::ostream& out, const std::vector<SweepRow>& rows);

} // namespace dljob::app
