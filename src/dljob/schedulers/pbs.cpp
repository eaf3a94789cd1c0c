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
// - Job arrays (a sweep, docs/schedulers.md): `qsub -t 0-2%2` answers "123[].server"; task 4 is
//   "123[4].server" to qstat and qdel, "123[].server" the whole array. The Slurm wrappers pass
//   -t on as --array and answer "123", but their qstat lists a task by its own Slurm number and
//   their qdel kills a job by the number its id starts with (the whole array): the test suite's
//   tests/shims/qstat and qdel take the Torque forms onto Slurm's 123_4 first.
// - qalter -W depend= changes a pending job's dependency (a continued job moves its dependants
//   to its next attempt); the Slurm wrappers' qalter has no -W (the shim translates it).
//
// Rendering: the PBS dialect (#PBS lines; the options repeated on the qsub/msub command line
// with a single -l, CLI flags win, and the Slurm wrappers take one
// -l) is shared with Moab (plan_pbs_dialect below). `dljob shell`: qsub -I -x, except under
// Slurm's Torque wrapper, which has no -x (schedulers/interactive.hpp).
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/pbs.hpp>
#include <dljob/schedulers/support.hpp>
#include <dljob/util/shell.hpp>

#include <fmt/format.h>

#include <set>

namespace dljob::schedulers {

// Defined at the end of this file; listed in scheduler_table.cpp.
const SchedulerFamily& pbs_family();

std::optional<std::string> parse_qsub_id(std::string_view output) {
    for (auto line : split_lines(output)) {
        line = trim(line);
        if (line.empty()) {
            continue;
        }
        // ^\d+(\[\])?(\.[A-Za-z0-9-]+)*$ (Rocoto's rule, and an array's [])
        const auto dot = line.find('.');
        auto number = line.substr(0, dot);
        // A job array: "123[].server" (Torque's answer to qsub -t).
        if (number.size() > 2 && number.substr(number.size() - 2) == "[]") {
            number.remove_suffix(2);
        }
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

std::vector<std::string> PbsScheduler::submit_command_line(const SubmitRequest& request) const {
    std::vector<std::string> argv{"qsub", "-N", token_job_name(request.token)};
    if (request.walltime_s > 0) {
        const auto w = request.walltime_s;
        argv.push_back("-l");
        argv.push_back(fmt::format("walltime={:02}:{:02}:{:02}", w / 3600, (w / 60) % 60, w % 60));
    }
    add_pbs_dialect_submit_tail(argv, request, pbs_family());
    return argv;
}

Result<Submission> PbsScheduler::submit(const SubmitRequest& request) {
    return submit_command(m_runner, submit_command_line(request), m_options, request.run_dir,
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

namespace {

std::string mail_events(const MailSpec& mail) {
    std::string events;
    if (mail.on_begin) {
        events += "b";
    }
    if (mail.on_end) {
        events += "e";
    }
    if (mail.on_fail) {
        events += "a";
    }
    return events.empty() || mail.address.empty() ? std::string("n") : events;
}

std::string node_request(const Partition& partition, const ResolvedResources& res) {
    if (partition.forbids_ppn) {
        return fmt::format("nodes={}:gpus={}", res.nodes, res.gpus_per_node);
    }
    if (partition.launcher == LauncherKind::aprun) {
        // Cray nodes are allocated whole; the GPU comes with the node (XK7: one K20).
        return fmt::format("nodes={}:ppn={}", res.nodes, partition.node.cores);
    }
    if (res.gpus_per_node > 0) {
        return fmt::format("nodes={}:ppn={}:gpus={}", res.nodes, res.cores_per_node,
                           res.gpus_per_node);
    }
    return fmt::format("nodes={}:ppn={}", res.nodes, res.cores_per_node);
}

// qsub/msub options (each followed by a value) that only make sense for a batch script.
bool batch_only_flag(std::string_view flag) {
    return flag == "-j" || flag == "-o" || flag == "-r" || flag == "-m" || flag == "-M";
}

std::vector<std::pair<std::string, std::string>> dialect_options(const JobFacts& facts, bool moab) {
    const Partition& partition = facts.partition;
    const ResolvedResources& res = facts.resources;
    std::string resources =
        fmt::format("{},walltime={}", node_request(partition, res), res.walltime.hms());
    // Cray: memory is informational (aprun -m decides); Hélios: memory follows the GPUs.
    if (res.memory.mib() > 0 && partition.launcher != LauncherKind::aprun &&
        !partition.forbids_ppn) {
        resources += ",mem=" + res.memory.with_units("gb", "mb");
    }
    std::vector<std::pair<std::string, std::string>> options{{"-N", facts.name}};
    if (!facts.account.empty()) {
        options.emplace_back("-A", facts.account);
    }
    if (!partition.queue.empty()) {
        options.emplace_back("-q", partition.queue);
    }
    options.emplace_back("-l", resources);
    if (moab && !partition.features.empty()) {
        std::string joined;
        for (const auto& f : partition.features) {
            joined += (joined.empty() ? "" : ":") + f;
        }
        options.emplace_back("-l", "feature=" + joined);
    }
    options.emplace_back("-j", "oe");
    options.emplace_back("-o", facts.log);
    options.emplace_back("-r", "n");
    const MailSpec& mail = facts.request.recipe.mail;
    options.emplace_back("-m", mail_events(mail));
    if (!mail.address.empty()) {
        options.emplace_back("-M", mail.address);
    }
    return options;
}

class PbsFamily final : public SchedulerFamily {
public:
    [[nodiscard]] std::string_view node_file_variable() const override { return "PBS_NODEFILE"; }
    [[nodiscard]] std::string_view name() const override { return "pbs"; }
    // aprun: Big Red II's Cray runs PBS/Torque, and compute work goes through ALPS.
    [[nodiscard]] std::vector<LauncherKind> launchers() const override {
        return {LauncherKind::aprun, LauncherKind::mpirun, LauncherKind::none};
    }
    [[nodiscard]] std::string_view template_name() const override { return "pbs.sh"; }
    [[nodiscard]] std::string_view script_name() const override { return "job.pbs"; }
    // Slurm's Torque wrappers set SLURM_JOB_ID only.
    [[nodiscard]] std::string_view job_id_expression() const override {
        return R"("${PBS_JOBID:-${SLURM_JOB_ID:-}}")";
    }
    [[nodiscard]] std::string walltime_expression(const Walltime& walltime) const override {
        return fmt::format("\"${{PBS_WALLTIME:-{}}}\"", walltime.seconds());
    }
    [[nodiscard]] SubmitPlan plan(const JobFacts& facts) const override {
        return plan_pbs_dialect(facts, "qsub");
    }
    [[nodiscard]] std::vector<std::string>
    dependency_options(const JobDependency& after) const override {
        return pbs_dialect_dependency(after);
    }
    [[nodiscard]] std::vector<std::string> array_options(const ArraySpec& array) const override {
        return {"-t", array.limit > 0 ? fmt::format("0-{}%{}", array.size - 1, array.limit)
                                      : fmt::format("0-{}", array.size - 1)};
    }
    [[nodiscard]] std::string_view directive_prefix() const override { return "#PBS"; }
    // Slurm's Torque wrappers set the SLURM_ARRAY_* variables only.
    [[nodiscard]] std::string_view array_index_expression() const override {
        return R"("${PBS_ARRAYID:-${SLURM_ARRAY_TASK_ID:-}}")";
    }
    [[nodiscard]] std::string_view array_task_id_expression() const override {
        return R"("${PBS_JOBID:-${SLURM_ARRAY_JOB_ID:-}[${SLURM_ARRAY_TASK_ID:-}]}")";
    }
    [[nodiscard]] std::string array_task_id(const std::string& array_id, int index) const override {
        return pbs_array_task_id(array_id, index);
    }
    [[nodiscard]] std::string array_of(const std::string& task_id) const override {
        return pbs_array_of(task_id);
    }
    [[nodiscard]] std::vector<std::string>
    retarget_dependency(const std::string& dependant, const JobDependency& after) const override {
        return {"qalter", "-W", pbs_dialect_dependency(after).at(1), dependant};
    }
    // Tells Slurm's Torque wrapper, which has no -x, from a real Torque qsub: only the wrapper
    // knows --sbatchline, and with it prints the salloc line without allocating anything.
    [[nodiscard]] std::vector<std::string> interactive_probe() const override {
        return {"qsub", "--sbatchline", "-I"};
    }
    [[nodiscard]] Result<InteractivePlan>
    interactive(const InteractiveRequest& request) const override {
        const bool slurm_wrapper = request.probe_output.find("salloc") != std::string::npos;
        auto argv = pbs_dialect_interactive(request, "qsub", !slurm_wrapper);
        if (!argv) {
            return fail(argv.error());
        }
        InteractivePlan plan;
        plan.argv = std::move(*argv);
        return plan;
    }
    [[nodiscard]] DoctorCommands doctor_commands(const Partition& /*partition*/,
                                                 const std::string& /*user*/) const override {
        return {{"qsub", "qstat", "qdel"}, {"qstat", "--version"}, {"qstat"}, {}, {}};
    }
    [[nodiscard]] std::unique_ptr<Scheduler>
    make_adapter(ProcessRunner& runner, const SchedulerOptions& options) const override {
        return std::make_unique<PbsScheduler>(runner, options);
    }
};

} // namespace

SubmitPlan plan_pbs_dialect(const JobFacts& facts, const std::string& program) {
    const auto options = dialect_options(facts, program == "msub");
    SubmitPlan plan;
    plan.submit_argv = {program};
    for (const auto& [flag, value] : options) {
        if (flag != "-o" || facts.log_in_directive) {
            plan.directives.push_back(fmt::format("{} {}", flag, value));
        }
        plan.submit_argv.insert(plan.submit_argv.end(), {flag, value});
        if (flag != "-N" && !batch_only_flag(flag)) {
            plan.resource_options.insert(plan.resource_options.end(), {flag, value});
        }
    }
    for (const auto& extra : facts.partition.extra_directives) {
        plan.directives.push_back(extra);
        append_split(plan.submit_argv, extra);
        append_split(plan.resource_options, extra);
    }
    plan.submit_argv.push_back(facts.script);
    return plan;
}

Result<std::vector<std::string>> pbs_dialect_interactive(const InteractiveRequest& request,
                                                         const std::string& program, bool with_x) {
    if (!util::is_directive_safe(request.session_path)) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("the session script path {} has characters qsub/msub -I cannot "
                                "carry",
                                request.session_path),
                    "set DLJOB_RUNS_DIR to a path of A-Z a-z 0-9 . _ / + , : = @ % -");
    }
    std::vector<std::string> argv{program, "-I"};
    if (with_x) {
        argv.emplace_back("-x");
    }
    argv.insert(argv.end(), {"-N", token_job_name(request.token)});
    const auto& options = request.rendered.resource_options;
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back(request.session_path);
    return argv;
}

void add_pbs_dialect_submit_tail(std::vector<std::string>& argv, const SubmitRequest& request,
                                 const SchedulerFamily& family) {
    if (!request.log_path.empty()) {
        // The Torque wrappers pass their own -o/-e to sbatch, overriding #PBS -o: only the
        // command line reliably names the log.
        argv.insert(argv.end(), {"-j", "oe", "-o", request.log_path});
    }
    if (request.after) {
        const auto wait = pbs_dialect_dependency(*request.after);
        argv.insert(argv.end(), wait.begin(), wait.end());
    }
    if (request.array) {
        const auto array = family.array_options(*request.array);
        argv.insert(argv.end(), array.begin(), array.end());
    }
    argv.push_back(request.script_path);
}

std::vector<std::string> pbs_dialect_dependency(const JobDependency& after) {
    // Torque's qsub, PBS Pro's and Moab's msub all take the PBS form.
    return {"-W",
            fmt::format("depend={}:{}", after.ok ? "afterok" : "afterany", after.scheduler_id)};
}

std::string pbs_array_task_id(const std::string& array_id, int index) {
    // Torque answers "123[].server" for an array, the Slurm wrappers a bare "123".
    if (const auto empty = array_id.find("[]"); empty != std::string::npos) {
        return fmt::format("{}[{}]{}", array_id.substr(0, empty), index,
                           array_id.substr(empty + 2));
    }
    const auto dot = array_id.find('.');
    return fmt::format("{}[{}]{}", array_id.substr(0, dot), index,
                       dot == std::string::npos ? std::string() : array_id.substr(dot));
}

std::string pbs_array_of(const std::string& task_id) {
    const auto open = task_id.find('[');
    const auto close = task_id.find(']', open);
    if (open == std::string::npos || close == std::string::npos || close == open + 1) {
        return task_id;
    }
    return task_id.substr(0, open + 1) + task_id.substr(close);
}

const SchedulerFamily& pbs_family() {
    static const PbsFamily family;
    return family;
}

} // namespace dljob::schedulers
