// PBS/Torque (qsub / qstat -f / qdel), as on Big Red II (Torque 4 + Moab, Cray ALPS), and
// Slurm's Torque wrappers (slurm-wlm-torque), which the integration tests run against.
//
// State table (job_state letter -> dljob):
//   Q queued, H held, W waiting for its start time, T being moved         -> PENDING
//   R running, E exiting (stage-out), S suspended                         -> RUNNING
//   C completed, any outcome; Torque's exit_status decides:
//       0 -> COMPLETED; -11 (walltime) -> TIMEOUT; 271 (256+TERM, qdel) -> CANCELLED;
//       other negative or > 0 -> FAILED (exit_code = exit_status, or 128+signal above 256);
//       no exit_status (the Slurm wrappers never print one)  -> UNKNOWN with reason
//       "finished", so the job's exit_code file decides
//   anything else (U from the wrappers)                                   -> UNKNOWN
//
// Quirks:
// - Torque truncates job names to 15 characters: the token goes into -N as "dlj-<10 hex>".
// - Ids are "179.server" on Torque and bare "5" on the wrappers; qstat's columns truncate them,
//   so records are matched on the numeric part.
// - `qstat -f ID...` prints the known jobs and exits 153 when any id is unknown (purged after
//   keep_completed): the records printed are used whatever the exit status.
// - `qstat -x` (XML) is Torque-only (the wrappers reject it), so the text form is parsed.
// - qdel of an unknown or finished job fails; that is reported.
#include <dljob/render/job_script.hpp>
#include <dljob/schedulers/pbs.hpp>
#include <dljob/schedulers/support.hpp>

#include <fmt/format.h>

#include <set>

namespace dljob::schedulers {

std::optional<std::string> parse_qsub_id(std::string_view output) {
    for (auto line : split_lines(output)) {
        line = trim(line);
        if (line.empty()) {
            continue;
        }
        // ^\d+(\.[A-Za-z0-9-]+)*$ (Rocoto's rule)
        const auto dot = line.find('.');
        const auto number = line.substr(0, dot);
        if (!all_digits(number)) {
            continue;
        }
        if (dot != std::string_view::npos && split_whitespace(line).size() != 1) {
            continue;
        }
        if (dot == std::string_view::npos && line != number) {
            continue;
        }
        return std::string(line);
    }
    return std::nullopt;
}

std::string pbs_numeric_id(std::string_view id) {
    id = trim(id);
    return std::string(id.substr(0, id.find('.')));
}

std::vector<PbsRecord> parse_qstat_f(std::string_view output) {
    std::vector<PbsRecord> records;
    std::string last_key;
    for (auto raw : split_lines(output)) {
        const auto line = trim(raw);
        if (line.empty()) {
            continue;
        }
        constexpr std::string_view header = "Job Id:";
        if (line.substr(0, header.size()) == header) {
            records.push_back(PbsRecord{std::string(trim(line.substr(header.size()))), {}});
            last_key.clear();
            continue;
        }
        if (records.empty()) {
            continue;
        }
        const auto eq = line.find(" = ");
        if (eq != std::string_view::npos) {
            last_key = std::string(trim(line.substr(0, eq)));
            records.back().attributes[last_key] = std::string(trim(line.substr(eq + 3)));
        } else if (!last_key.empty()) {
            records.back().attributes[last_key] += std::string(line); // wrapped value
        }
    }
    return records;
}

SchedulerStatus map_pbs_state(const PbsRecord& record) {
    SchedulerStatus status;
    const auto state_it = record.attributes.find("job_state");
    const std::string letter = state_it == record.attributes.end() ? "" : state_it->second;
    status.native_state = letter;
    if (letter == "Q" || letter == "H" || letter == "W" || letter == "T") {
        status.state = JobState::pending;
        if (letter == "H") {
            status.reason = "held";
        }
    } else if (letter == "R" || letter == "E" || letter == "S") {
        status.state = JobState::running;
    } else if (letter == "C") {
        const auto exit_it = record.attributes.find("exit_status");
        std::optional<int> code;
        if (exit_it != record.attributes.end()) {
            code = parse_int(exit_it->second);
        }
        if (!code) {
            status.state = JobState::unknown;
            status.reason = "finished";
        } else if (*code == 0) {
            status.state = JobState::completed;
            status.exit_code = 0;
        } else if (*code == -11) {
            status.state = JobState::timeout;
            status.reason = "walltime exceeded";
        } else if (*code == 271) {
            status.state = JobState::cancelled;
            status.exit_code = 128 + 15;
        } else {
            status.state = JobState::failed;
            status.exit_code = *code > 256 ? 128 + (*code - 256) : *code;
        }
        status.native_state = exit_it == record.attributes.end()
                                  ? "C"
                                  : fmt::format("C (exit_status {})", exit_it->second);
    } else {
        status.state = JobState::unknown;
    }
    return status;
}

Result<Submission> PbsScheduler::submit(const SubmitRequest& request) {
    std::vector<std::string> argv{"qsub", "-N", token_job_name(request.token)};
    if (request.walltime_s > 0) {
        const auto w = request.walltime_s;
        argv.push_back("-l");
        argv.push_back(fmt::format("walltime={:02}:{:02}:{:02}", w / 3600, (w / 60) % 60, w % 60));
    }
    if (!request.log_path.empty()) {
        // The Torque wrappers pass their own -o/-e to sbatch, overriding #PBS -o: only the
        // command line reliably names the log.
        argv.insert(argv.end(), {"-j", "oe", "-o", request.log_path});
    }
    if (request.after) {
        const auto wait = render::dependency_options(SchedulerKind::pbs, *request.after);
        argv.insert(argv.end(), wait.begin(), wait.end());
    }
    argv.push_back(request.script_path);
    return submit_command(m_runner, std::move(argv), m_options, request.run_dir,
                          [](const ProcessResult& result) { return parse_qsub_id(result.out); });
}

Result<std::vector<PbsRecord>> PbsScheduler::qstat(const std::vector<std::string>& ids) {
    std::vector<std::string> argv{"qstat", "-f"};
    argv.insert(argv.end(), ids.begin(), ids.end());
    auto result = run_command(m_runner, std::move(argv), m_options);
    if (!result) {
        return fail(result.error());
    }
    auto records = parse_qstat_f(result->out);
    // 153: some id is unknown (finished and purged); the others are still printed.
    if (result->exit_code != 0 && result->exit_code != 153 && records.empty()) {
        return fail(command_error("qstat", *result));
    }
    return records;
}

Result<std::map<std::string, SchedulerStatus>> PbsScheduler::poll(const std::vector<JobRef>& jobs) {
    std::map<std::string, SchedulerStatus> found;
    if (jobs.empty()) {
        return found;
    }
    std::vector<std::string> ids;
    std::map<std::string, std::string> by_number;
    for (const auto& job : jobs) {
        ids.push_back(job.scheduler_id);
        by_number[pbs_numeric_id(job.scheduler_id)] = job.scheduler_id;
    }
    auto records = qstat(ids);
    if (!records) {
        return fail(records.error());
    }
    for (const auto& record : *records) {
        auto it = by_number.find(pbs_numeric_id(record.id));
        if (it != by_number.end()) {
            found[it->second] = map_pbs_state(record);
        }
    }
    return found;
}

Result<std::optional<Submission>> PbsScheduler::find_by_token(const JobRef& job) {
    auto records = qstat({});
    if (!records) {
        return fail(records.error());
    }
    const std::string name = token_job_name(job.token);
    for (const auto& record : *records) {
        auto it = record.attributes.find("Job_Name");
        if (it != record.attributes.end() && it->second == name) {
            return std::optional<Submission>{Submission{record.id, ""}};
        }
    }
    return identity_submission(job);
}

Result<void> PbsScheduler::cancel(const JobRef& job) {
    auto result = run_command(m_runner, {"qdel", job.scheduler_id}, m_options);
    if (!result) {
        return fail(result.error());
    }
    if (result->exit_code != 0) {
        return fail(command_error("qdel", *result));
    }
    return {};
}

} // namespace dljob::schedulers
