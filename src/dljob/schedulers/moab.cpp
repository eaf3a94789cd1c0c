// Moab on Torque (msub / showq / canceljob), as on Calcul Québec's Hélios and Guillimin and Big
// Red II; the integration tests use the shims in tests/shims/ that translate onto Slurm.
//
// Two ids: msub prints Moab's id (after a blank line, sometimes "Moab.123"); the Torque id can
// differ. Both are stored: the Moab id is the scheduler id (canceljob and showq use it), the
// Torque id (showq's DRMJID attribute) is the secondary id, learned on the first poll.
//
// State table (showq --xml queue and State attribute -> dljob):
//   queue "active": Running, Starting, Canceling                         -> RUNNING
//   queue "eligible": Idle                                               -> PENDING
//   queue "blocked": UserHold, SystemHold, BatchHold, Deferred, NotQueued -> PENDING (the State
//     is the reason: a blocked job does not start by itself)
//   queue "completed" (showq -c): CompletionCode 0                       -> COMPLETED
//     State Removed or CompletionCode CNCLD(...) / 271                   -> CANCELLED
//     CompletionCode -11 (Torque's walltime kill)                        -> TIMEOUT
//     any other code                                                     -> FAILED
//   not listed (purged after the completed window)                       -> absent
//
// Job arrays (a sweep, docs/schedulers.md): Moab's own, `msub -t NAME[0-2]%2` (ENABLEJOBARRAYS in
// moab.cfg); the tasks are Moab.45[0] .. Moab.45[2] to showq and canceljob, Moab.45 the whole
// array. A pending job's dependency changes with `mjobctl -m depend=afterok:ID JOB`.
//
// Quirks: the text form of showq has no DRMJID and varies by version, so --xml is parsed with a
// lenient attribute scanner; completed jobs are asked for (showq -c) only when a job is missing
// from the first query.
//
// Rendering: the PBS dialect shared with Torque (schedulers/pbs.cpp, plan_pbs_dialect), plus
// `-l feature=` for the partition's features; `dljob shell` runs msub -I -x.
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/moab.hpp>
#include <dljob/schedulers/support.hpp>

#include <fmt/format.h>

#include <set>

namespace dljob::schedulers {

// Defined at the end of this file; listed in scheduler_table.cpp.
const SchedulerFamily& moab_family();
namespace {

// Attributes of one XML start tag: name="value" pairs, entities left as they are.
std::map<std::string, std::string> xml_attributes(std::string_view tag) {
    std::map<std::string, std::string> attributes;
    std::size_t i = 0;
    while (i < tag.size()) {
        const auto eq = tag.find("=\"", i);
        if (eq == std::string_view::npos) {
            break;
        }
        auto name_start = tag.rfind(' ', eq);
        name_start = name_start == std::string_view::npos ? 0 : name_start + 1;
        const auto end = tag.find('"', eq + 2);
        if (end == std::string_view::npos) {
            break;
        }
        attributes[std::string(tag.substr(name_start, eq - name_start))] =
            std::string(tag.substr(eq + 2, end - eq - 2));
        i = end + 1;
    }
    return attributes;
}

} // namespace

std::optional<std::string> parse_msub_id(std::string_view output) {
    if (auto pos = output.find("JobID=\""); pos != std::string_view::npos) {
        const auto end = output.find('"', pos + 7);
        if (end != std::string_view::npos) {
            return std::string(output.substr(pos + 7, end - pos - 7));
        }
    }
    for (auto line : split_lines(output)) {
        line = trim(line);
        // ^((\w+\.)*\d+)$ (Rocoto's rule)
        if (line.empty() || split_whitespace(line).size() != 1) {
            continue;
        }
        const auto last_dot = line.rfind('.');
        const auto number = last_dot == std::string_view::npos ? line : line.substr(last_dot + 1);
        if (all_digits(number)) {
            return std::string(line);
        }
    }
    return std::nullopt;
}

std::vector<MoabJob> parse_showq_xml(std::string_view output) {
    std::vector<MoabJob> jobs;
    std::string queue;
    std::size_t i = 0;
    while (i < output.size()) {
        const auto open = output.find('<', i);
        if (open == std::string_view::npos) {
            break;
        }
        const auto close = output.find('>', open);
        if (close == std::string_view::npos) {
            break;
        }
        const auto tag = output.substr(open + 1, close - open - 1);
        if (tag.substr(0, 6) == "queue ") {
            auto attributes = xml_attributes(tag);
            queue = attributes["option"];
        } else if (tag.substr(0, 4) == "job ") {
            jobs.push_back(MoabJob{queue, xml_attributes(tag)});
        }
        i = close + 1;
    }
    return jobs;
}

SchedulerStatus map_moab_state(const MoabJob& job) {
    SchedulerStatus status;
    auto get = [&](const char* key) {
        auto it = job.attributes.find(key);
        return it == job.attributes.end() ? std::string() : it->second;
    };
    const std::string state = get("State");
    status.native_state = state;
    status.secondary_id = get("DRMJID");
    if (job.queue == "active") {
        status.state = JobState::running;
    } else if (job.queue == "eligible") {
        status.state = JobState::pending;
    } else if (job.queue == "blocked") {
        status.state = JobState::pending;
        status.reason = state;
    } else if (job.queue == "completed") {
        const std::string code = get("CompletionCode");
        auto value = parse_int(code);
        if (state == "Removed" || code.rfind("CNCLD", 0) == 0 || (value && *value == 271)) {
            status.state = JobState::cancelled;
        } else if (value && *value == 0) {
            status.state = JobState::completed;
            status.exit_code = 0;
        } else if (value && *value == -11) {
            status.state = JobState::timeout;
            status.reason = "walltime exceeded";
        } else if (value) {
            status.state = JobState::failed;
            status.exit_code = *value > 256 ? 128 + (*value - 256) : *value;
        } else {
            status.state = JobState::unknown;
            status.reason = "finished";
        }
        if (!code.empty()) {
            status.native_state = fmt::format("{} ({})", state, code);
        }
    } else {
        status.state = JobState::unknown;
    }
    return status;
}

std::vector<std::string> MoabScheduler::submit_command_line(const SubmitRequest& request) const {
    std::vector<std::string> argv{"msub", "-N", token_job_name(request.token)};
    if (!request.run_dir.empty()) {
        // Moab's default working directory is $HOME, not the submit directory.
        argv.insert(argv.end(), {"-d", request.run_dir});
    }
    if (request.walltime_s > 0) {
        argv.insert(argv.end(), {"-l", fmt::format("walltime={}", request.walltime_s)});
    }
    add_pbs_dialect_submit_tail(argv, request, moab_family());
    return argv;
}

Result<Submission> MoabScheduler::submit(const SubmitRequest& request) {
    return submit_command(m_runner, submit_command_line(request), m_options, request.run_dir,
                          [](const ProcessResult& result) { return parse_msub_id(result.out); });
}

Result<std::vector<MoabJob>> MoabScheduler::showq(bool completed) {
    std::vector<std::string> argv{"showq", "--xml", "-u", current_user(m_options)};
    if (completed) {
        argv.insert(argv.begin() + 1, "-c");
    }
    auto result = run_command(m_runner, std::move(argv), m_options);
    if (!result) {
        return fail(result.error());
    }
    if (result->exit_code != 0) {
        return fail(command_error("showq", *result));
    }
    return parse_showq_xml(result->out);
}

Result<std::map<std::string, SchedulerStatus>>
MoabScheduler::poll(const std::vector<JobRef>& jobs) {
    std::map<std::string, SchedulerStatus> found;
    if (jobs.empty()) {
        return found;
    }
    std::set<std::string> wanted;
    for (const auto& job : jobs) {
        wanted.insert(job.scheduler_id);
    }
    for (bool completed : {false, true}) {
        auto listed = showq(completed);
        if (!listed) {
            return fail(listed.error());
        }
        for (const auto& job : *listed) {
            auto it = job.attributes.find("JobID");
            if (it != job.attributes.end() && wanted.count(it->second) > 0 &&
                found.count(it->second) == 0) {
                found[it->second] = map_moab_state(job);
            }
        }
        if (found.size() == wanted.size()) {
            break;
        }
    }
    return found;
}

Result<std::optional<Submission>> MoabScheduler::find_by_token(const JobRef& job) {
    const std::string name = token_job_name(job.token);
    for (bool completed : {false, true}) {
        auto listed = showq(completed);
        if (!listed) {
            return fail(listed.error());
        }
        for (const auto& listed_job : *listed) {
            const auto& attributes = listed_job.attributes;
            auto it = attributes.find("JobName");
            if (it != attributes.end() && it->second == name) {
                auto drm = attributes.find("DRMJID");
                return std::optional<Submission>{
                    Submission{attributes.count("JobID") > 0 ? attributes.at("JobID") : "",
                               drm == attributes.end() ? "" : drm->second}};
            }
        }
    }
    return identity_submission(job);
}

Result<void> MoabScheduler::cancel(const JobRef& job) {
    auto result = run_command(m_runner, {"canceljob", job.scheduler_id}, m_options);
    if (!result) {
        return fail(result.error());
    }
    if (result->exit_code != 0 || result->out.find("ERROR") != std::string::npos) {
        return fail(command_error("canceljob", *result));
    }
    return {};
}

namespace {

class MoabFamily final : public SchedulerFamily {
public:
    [[nodiscard]] std::string_view node_file_variable() const override { return "PBS_NODEFILE"; }
    [[nodiscard]] std::string_view name() const override { return "moab"; }
    // aprun: Moab over Torque on a Cray.
    [[nodiscard]] std::vector<LauncherKind> launchers() const override {
        return {LauncherKind::aprun, LauncherKind::mpirun, LauncherKind::none};
    }
    [[nodiscard]] std::string_view template_name() const override { return "moab.sh"; }
    [[nodiscard]] std::string_view script_name() const override { return "job.pbs"; }
    // Moab sets MOAB_JOBID, its Torque PBS_JOBID; on the Slurm shims only SLURM_JOB_ID is set.
    [[nodiscard]] std::string_view job_id_expression() const override {
        return R"("${MOAB_JOBID:-${PBS_JOBID:-${SLURM_JOB_ID:-}}}")";
    }
    [[nodiscard]] std::string walltime_expression(const Walltime& walltime) const override {
        return fmt::format("\"${{PBS_WALLTIME:-{}}}\"", walltime.seconds());
    }
    [[nodiscard]] SubmitPlan plan(const JobFacts& facts) const override {
        return plan_pbs_dialect(facts, "msub");
    }
    [[nodiscard]] std::vector<std::string>
    dependency_options(const JobDependency& after) const override {
        return pbs_dialect_dependency(after);
    }
    // Moab's own arrays (not Torque's): msub -t NAME[0-2]%2; task 4 of Moab.45 is Moab.45[4].
    [[nodiscard]] std::vector<std::string> array_options(const ArraySpec& array) const override {
        return {"-t", array.limit > 0 ? fmt::format("dljob[0-{}]%{}", array.size - 1, array.limit)
                                      : fmt::format("dljob[0-{}]", array.size - 1)};
    }
    [[nodiscard]] std::string_view directive_prefix() const override { return "#PBS"; }
    [[nodiscard]] std::string_view array_index_expression() const override {
        return R"("${MOAB_JOBARRAYINDEX:-${PBS_ARRAYID:-${SLURM_ARRAY_TASK_ID:-}}}")";
    }
    [[nodiscard]] std::string_view array_task_id_expression() const override {
        return R"("${MOAB_JOBID:-Moab.${SLURM_ARRAY_JOB_ID:-}[${SLURM_ARRAY_TASK_ID:-}]}")";
    }
    [[nodiscard]] std::string array_task_id(const std::string& array_id, int index) const override {
        return fmt::format("{}[{}]", array_id, index);
    }
    [[nodiscard]] std::string array_of(const std::string& task_id) const override {
        return task_id.substr(0, task_id.find('['));
    }
    [[nodiscard]] std::vector<std::string>
    retarget_dependency(const std::string& dependant, const JobDependency& after) const override {
        return {"mjobctl", "-m", pbs_dialect_dependency(after).at(1), dependant};
    }
    [[nodiscard]] Result<InteractivePlan>
    interactive(const InteractiveRequest& request) const override {
        auto argv = pbs_dialect_interactive(request, "msub", true);
        if (!argv) {
            return fail(argv.error());
        }
        InteractivePlan plan;
        plan.argv = std::move(*argv);
        return plan;
    }
    [[nodiscard]] DoctorCommands doctor_commands(const Partition& /*partition*/,
                                                 const std::string& user) const override {
        return {{"msub", "showq", "checkjob", "canceljob"},
                {"showq", "--version"},
                {"showq", "-u", user},
                {},
                {}};
    }
    [[nodiscard]] std::unique_ptr<Scheduler>
    make_adapter(ProcessRunner& runner, const SchedulerOptions& options) const override {
        return std::make_unique<MoabScheduler>(runner, options);
    }
};

} // namespace

const SchedulerFamily& moab_family() {
    static const MoabFamily family;
    return family;
}

} // namespace dljob::schedulers
