#pragma once
// `dljob sweep ID`: a sweep's points as `dljob status` sees them, best first.

#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/domain/result.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace dljob::app {

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
