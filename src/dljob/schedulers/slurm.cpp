// Slurm (sbatch / squeue / sacct / scancel), as on the Alliance clusters, Big Red 200 and the
// project's own test cluster (Slurm 22.05).
//
// State table (native -> dljob), from squeue(1) "JOB STATE CODES":
//   PENDING CONFIGURING REQUEUED REQUEUE_HOLD REQUEUE_FED RESV_DEL_HOLD   -> PENDING
//   RUNNING COMPLETING SUSPENDED STOPPED SIGNALING STAGE_OUT RESIZING     -> RUNNING
//   COMPLETED                                                             -> COMPLETED
//   FAILED NODE_FAIL BOOT_FAIL OUT_OF_MEMORY DEADLINE SPECIAL_EXIT
//   PREEMPTED REVOKED                                                     -> FAILED
//   CANCELLED ("CANCELLED by <uid>" in sacct)                             -> CANCELLED
//   TIMEOUT                                                               -> TIMEOUT
//   anything else                                                         -> UNKNOWN
// The native state and Reason (%r: Priority, Resources, Dependency, TimeLimit, ...) are kept.
//
// Quirks, and what this file does about them:
// - The token goes into --comment (%k), so the user's job name stays readable and a submit that
//   timed out is found again by `squeue --me -t all`.
// - squeue forgets a job MinJobAge after it ends (300 s by default), and `squeue -j` with an
//   unknown id fails the whole query ("Invalid job id specified", rc 1): so one
//   `squeue --me -t all` lists every job of the user, filtered here.
// - sacct needs slurmdbd ("Slurm accounting storage is disabled", rc 1 without it) and its
//   default window starts at midnight: it is asked only for jobs squeue no longer shows, with an
//   explicit --starttime, and its failure is not an error (the exit_code file still decides).
// - scancel prints nothing and returns 0 even for unknown ids.
// - Job arrays (a sweep, docs/schedulers.md): a task is "123_4" to squeue, sacct and scancel alike.
//   squeue folds the pending tasks into one line ("123_[1-3%2]") unless asked -r, so it is
//   always asked -r; sacct's JobIDRaw of a task is its own number, so its JobID is asked too.
// - A pending job's dependency can be changed (scontrol update JobId=D Dependency=...): a
//   continued job moves its dependants to its next attempt before it exits 75, which would
//   otherwise leave an afterok never satisfied (kill_invalid_depend then cancels them).
//
// Rendering (SlurmFamily below): #SBATCH directives; sbatch reads them, so the adapter submits
// `sbatch --parsable SCRIPT` and the rendered submit command (options repeated) is for people.
// `dljob shell` asks salloc for the same resources and lands in a shell with srun --pty.
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/slurm.hpp>
#include <dljob/schedulers/support.hpp>

#include <fmt/format.h>

#include <array>
#include <set>
#include <utility>

namespace dljob::schedulers {

// Defined at the end of this file; listed in scheduler_table.cpp.
const SchedulerFamily& slurm_family();
namespace {

constexpr std::string_view comment_prefix = "dljob:";

JobState slurm_state(std::string_view native) {
    static constexpr std::array<std::pair<std::string_view, JobState>, 24> table{{
        {"PENDING", JobState::pending},     {"CONFIGURING", JobState::pending},
        {"REQUEUED", JobState::pending},    {"REQUEUE_HOLD", JobState::pending},
        {"REQUEUE_FED", JobState::pending}, {"RESV_DEL_HOLD", JobState::pending},
        {"RUNNING", JobState::running},     {"COMPLETING", JobState::running},
        {"SUSPENDED", JobState::running},   {"STOPPED", JobState::running},
        {"SIGNALING", JobState::running},   {"STAGE_OUT", JobState::running},
        {"RESIZING", JobState::running},    {"COMPLETED", JobState::completed},
        {"FAILED", JobState::failed},       {"NODE_FAIL", JobState::failed},
        {"BOOT_FAIL", JobState::failed},    {"OUT_OF_MEMORY", JobState::failed},
        {"DEADLINE", JobState::failed},     {"SPECIAL_EXIT", JobState::failed},
        {"PREEMPTED", JobState::failed},    {"REVOKED", JobState::failed},
        {"CANCELLED", JobState::cancelled}, {"TIMEOUT", JobState::timeout},
    }};
    for (const auto& [name, state] : table) {
        if (name == native) {
            return state;
        }
    }
    return JobState::unknown;
}

// "3:0" -> 3; "0:15" (killed by signal 15) -> 128+15, as a shell would report it.
std::optional<int> parse_exit_code(std::string_view text) {
    const auto parts = split(trim(text), ':');
    if (parts.size() != 2) {
        return parse_int(text);
    }
    auto code = parse_int(parts[0]);
    auto signal = parse_int(parts[1]);
    if (!code || !signal) {
        return std::nullopt;
    }
    return *signal != 0 && *code == 0 ? 128 + *signal : *code;
}

/// The user's jobs that squeue still lists (all states): id, state, reason and comment.
Result<std::vector<SlurmRow>> list_queue(ProcessRunner& runner, const SchedulerOptions& options) {
    auto listed = run_command(
        runner, {"squeue", "-h", "--me", "-r", "-t", "all", "-o", "%i|%T|%r|%k"}, options);
    if (!listed) {
        return fail(listed.error());
    }
    if (listed->exit_code != 0) {
        return fail(command_error("squeue", *listed));
    }
    return parse_squeue(listed->out);
}

} // namespace

std::optional<std::string> parse_sbatch_id(std::string_view output) {
    for (auto line : split_lines(output)) {
        line = trim(line);
        constexpr std::string_view submitted = "Submitted batch job ";
        if (auto pos = line.find(submitted); pos != std::string_view::npos) {
            auto rest = split_whitespace(line.substr(pos + submitted.size()));
            if (!rest.empty() && all_digits(rest[0])) {
                return std::string(rest[0]);
            }
        }
        auto first = split(line, ';');
        if (!first.empty() && all_digits(first[0])) {
            return std::string(first[0]);
        }
    }
    return std::nullopt;
}

std::vector<SlurmRow> parse_squeue(std::string_view output) {
    std::vector<SlurmRow> rows;
    for (auto line : split_lines(output)) {
        auto fields = split(trim(line), '|');
        if (fields.size() < 2 || trim(fields[0]).empty()) {
            continue;
        }
        SlurmRow row;
        row.id = std::string(trim(fields[0]));
        row.state = std::string(trim(fields[1]));
        if (fields.size() > 2) {
            row.reason = std::string(trim(fields[2]));
        }
        if (fields.size() > 3) {
            row.comment = std::string(trim(fields[3]));
        }
        if (all_digits(split(row.id, '_')[0]) && !row.state.empty()) {
            rows.push_back(std::move(row));
        }
    }
    return rows;
}

std::vector<SlurmRow> parse_sacct(std::string_view output) {
    std::vector<SlurmRow> rows;
    for (auto line : split_lines(output)) {
        auto fields = split(trim(line), '|');
        if (fields.size() < 3 || !all_digits(trim(fields[0]))) {
            continue; // header, steps (42.batch) and noise
        }
        SlurmRow row;
        row.id = std::string(trim(fields[0]));
        auto state_words = split_whitespace(fields[1]);
        row.state = state_words.empty() ? "" : std::string(state_words[0]);
        row.exit_code = parse_exit_code(fields[2]);
        if (fields.size() > 3) {
            row.reason = std::string(trim(fields[3]));
        }
        // An array task: its JobID (123_4) is how dljob knows it, its JobIDRaw its own number.
        if (fields.size() > 4) {
            const auto id = trim(fields[4]);
            const auto parts = split(id, '_');
            if (parts.size() == 2 && all_digits(parts[0]) && all_digits(parts[1])) {
                row.id = std::string(id);
            }
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

SchedulerStatus map_slurm_state(const SlurmRow& row) {
    SchedulerStatus status;
    status.state = slurm_state(row.state);
    status.native_state = row.state;
    status.reason = row.reason == "None" ? "" : row.reason;
    status.exit_code = row.exit_code;
    return status;
}

std::vector<std::string> SlurmScheduler::submit_command_line(const SubmitRequest& request) const {
    std::vector<std::string> argv{"sbatch", "--parsable",
                                  fmt::format("--comment={}{}", comment_prefix, request.token)};
    if (!request.name.empty()) {
        argv.push_back("--job-name=" + request.name);
    }
    if (request.walltime_s > 0) {
        // Slurm counts whole minutes and rounds up.
        argv.push_back(fmt::format("--time={}", (request.walltime_s + 59) / 60));
    }
    if (!request.run_dir.empty()) {
        argv.push_back("--chdir=" + request.run_dir);
    }
    if (!request.log_path.empty()) {
        argv.push_back("--output=" + request.log_path);
    }
    if (request.after) {
        const auto wait = slurm_family().dependency_options(*request.after);
        argv.insert(argv.end(), wait.begin(), wait.end());
    }
    if (request.array) {
        const auto array = slurm_family().array_options(*request.array);
        argv.insert(argv.end(), array.begin(), array.end());
    }
    argv.push_back(request.script_path);
    return argv;
}

Result<Submission> SlurmScheduler::submit(const SubmitRequest& request) {
    return submit_command(m_runner, submit_command_line(request), m_options, request.run_dir,
                          [](const ProcessResult& result) { return parse_sbatch_id(result.out); });
}

Result<std::map<std::string, SchedulerStatus>>
SlurmScheduler::poll(const std::vector<JobRef>& jobs) {
    std::map<std::string, SchedulerStatus> found;
    if (jobs.empty()) {
        return found;
    }
    auto queue = list_queue(m_runner, m_options);
    if (!queue) {
        return fail(queue.error());
    }
    std::set<std::string> wanted;
    for (const auto& job : jobs) {
        wanted.insert(job.scheduler_id);
    }
    for (const auto& row : *queue) {
        if (wanted.count(row.id) > 0) {
            found[row.id] = map_slurm_state(row);
        }
    }
    std::string missing;
    for (const auto& id : wanted) {
        if (found.count(id) == 0) {
            missing += (missing.empty() ? "" : ",") + id;
        }
    }
    if (!missing.empty()) {
        auto accounted =
            run_command(m_runner,
                        {"sacct", "-X", "-P", "-n", "-o", "JobIDRaw,State,ExitCode,Reason,JobID",
                         "--starttime=now-7days", "-j", missing},
                        m_options);
        // Without slurmdbd sacct fails; the jobs then stay missing and the exit_code file
        // (or UNKNOWN) decides. That is not an error of the poll.
        if (accounted && accounted->exit_code == 0) {
            for (const auto& row : parse_sacct(accounted->out)) {
                if (wanted.count(row.id) > 0) {
                    found[row.id] = map_slurm_state(row);
                }
            }
        }
    }
    return found;
}

Result<std::optional<Submission>> SlurmScheduler::find_by_token(const JobRef& job) {
    auto queue = list_queue(m_runner, m_options);
    if (!queue) {
        return fail(queue.error());
    }
    const std::string comment = std::string(comment_prefix) + job.token;
    for (const auto& row : *queue) {
        if (row.comment == comment) {
            return std::optional<Submission>{Submission{row.id, ""}};
        }
    }
    return identity_submission(job);
}

Result<void> SlurmScheduler::cancel(const JobRef& job) {
    auto result = run_command(m_runner, {"scancel", job.scheduler_id}, m_options);
    if (!result) {
        return fail(result.error());
    }
    if (result->exit_code != 0) {
        return fail(command_error("scancel", *result));
    }
    return {};
}

namespace {

std::string gpu_request(const Partition& partition, int gpus) {
    const std::string typed = partition.gpu_type_in_request
                                  ? fmt::format("{}:{}", partition.node.gpu_model, gpus)
                                  : std::to_string(gpus);
    return partition.gpu_directive == GpuDirective::gres ? fmt::format("--gres=gpu:{}", typed)
                                                         : fmt::format("--gpus-per-node={}", typed);
}

std::string joined(const std::vector<std::string>& words, std::string_view separator) {
    std::string out;
    for (const auto& word : words) {
        out += (out.empty() ? "" : std::string(separator)) + word;
    }
    return out;
}

// The options that ask for resources, in directive order.
std::vector<std::string> resource_options(const JobFacts& facts) {
    const Partition& partition = facts.partition;
    const ResolvedResources& res = facts.resources;
    std::vector<std::string> options{"--job-name=" + facts.name};
    if (!facts.account.empty()) {
        options.push_back("--account=" + facts.account);
    }
    if (!partition.queue.empty()) {
        options.push_back("--partition=" + partition.queue);
    }
    options.push_back(fmt::format("--nodes={}", res.nodes));
    options.push_back(fmt::format("--ntasks-per-node={}", res.tasks_per_node));
    options.push_back(fmt::format("--cpus-per-task={}", res.cores_per_node / res.tasks_per_node));
    if (res.gpus_per_node > 0) {
        options.push_back(gpu_request(partition, res.gpus_per_node));
    }
    if (res.memory.mib() > 0) {
        options.push_back("--mem=" + res.memory.text());
    }
    options.push_back("--time=" + res.walltime.days_hms());
    if (!partition.features.empty()) {
        options.push_back("--constraint=" + joined(partition.features, "&"));
    }
    return options;
}

std::vector<std::string> mail_options(const MailSpec& mail) {
    if (mail.address.empty()) {
        return {};
    }
    std::vector<std::string> types;
    for (const auto& [on, type] : {std::pair{mail.on_begin, "BEGIN"}, std::pair{mail.on_end, "END"},
                                   std::pair{mail.on_fail, "FAIL"}}) {
        if (on) {
            types.emplace_back(type);
        }
    }
    return {"--mail-user=" + mail.address,
            "--mail-type=" + (types.empty() ? std::string("NONE") : joined(types, ","))};
}

class SlurmFamily final : public SchedulerFamily {
public:
    [[nodiscard]] std::string_view name() const override { return "slurm"; }
    [[nodiscard]] std::vector<LauncherKind> launchers() const override {
        return {LauncherKind::srun, LauncherKind::mpirun, LauncherKind::none};
    }
    [[nodiscard]] std::string_view template_name() const override { return "slurm.sh"; }
    [[nodiscard]] std::string_view job_id_expression() const override {
        return R"("${SLURM_JOB_ID:-}")";
    }
    [[nodiscard]] bool signals_before_walltime(const SchedulerBehaviour& behaviour) const override {
        return behaviour.warning_signal != "none";
    }

    [[nodiscard]] SubmitPlan plan(const JobFacts& facts) const override {
        const SchedulerBehaviour& behaviour = facts.request.site.behaviour;
        SubmitPlan plan;
        const std::vector<std::string> resources = resource_options(facts);
        // Batch-only options after the resources, in the order the directives had them.
        std::vector<std::string> batch;
        if (facts.log_in_directive) {
            batch.push_back("--output=" + facts.log);
        }
        batch.push_back("--open-mode=append");
        if (behaviour.warning_signal != "none") {
            batch.push_back(
                fmt::format("--signal=B:{}@{}", behaviour.warning_signal, behaviour.grace_seconds));
        }
        // dljob resubmits after exit 75; Slurm must not requeue on its own.
        batch.push_back("--no-requeue");
        const auto mail = mail_options(facts.request.recipe.mail);
        batch.insert(batch.end(), mail.begin(), mail.end());
        plan.directives = resources;
        plan.directives.insert(plan.directives.end(), batch.begin(), batch.end());
        plan.directives.insert(plan.directives.end(), facts.partition.extra_directives.begin(),
                               facts.partition.extra_directives.end());
        plan.submit_argv = {"sbatch", "--parsable"};
        for (const auto& option : resources) {
            plan.submit_argv.push_back(option);
            plan.resource_options.push_back(option);
        }
        if (!facts.log_in_directive) {
            plan.submit_argv.push_back("--output=" + facts.log);
        }
        for (const auto& option : batch) {
            plan.submit_argv.push_back(option);
        }
        for (const auto& extra : facts.partition.extra_directives) {
            append_split(plan.submit_argv, extra);
            append_split(plan.resource_options, extra);
        }
        plan.submit_argv.push_back(facts.script);
        return plan;
    }

    [[nodiscard]] std::vector<std::string>
    dependency_options(const JobDependency& after) const override {
        return {fmt::format("--dependency={}:{}", after.ok ? "afterok" : "afterany",
                            after.scheduler_id)};
    }

    [[nodiscard]] std::vector<std::string> array_options(const ArraySpec& array) const override {
        return {array.limit > 0 ? fmt::format("--array=0-{}%{}", array.size - 1, array.limit)
                                : fmt::format("--array=0-{}", array.size - 1)};
    }
    [[nodiscard]] std::string_view directive_prefix() const override { return "#SBATCH"; }
    [[nodiscard]] std::string_view array_index_expression() const override {
        return R"("${SLURM_ARRAY_TASK_ID:-}")";
    }
    // SLURM_JOB_ID is the task's own number, which a pending task does not have yet: the
    // JOBID_TASK form is what squeue -r, sacct and scancel all take.
    [[nodiscard]] std::string_view array_task_id_expression() const override {
        return R"("${SLURM_ARRAY_JOB_ID:-}_${SLURM_ARRAY_TASK_ID:-}")";
    }
    [[nodiscard]] std::string array_task_id(const std::string& array_id, int index) const override {
        return fmt::format("{}_{}", array_id, index);
    }
    [[nodiscard]] std::string array_of(const std::string& task_id) const override {
        return task_id.substr(0, task_id.find('_'));
    }
    [[nodiscard]] std::vector<std::string>
    retarget_dependency(const std::string& dependant, const JobDependency& after) const override {
        return {
            "scontrol", "update", "JobId=" + dependant,
            fmt::format("Dependency={}:{}", after.ok ? "afterok" : "afterany", after.scheduler_id)};
    }

    [[nodiscard]] Result<InteractivePlan>
    interactive(const InteractiveRequest& request) const override {
        InteractivePlan plan;
        plan.argv = {"salloc"};
        const auto& options = request.rendered.resource_options;
        plan.argv.insert(plan.argv.end(), options.begin(), options.end());
        plan.argv.push_back("--comment=dljob:" + request.token);
        // --overlap: the shell's step shares the allocation, so `srun` typed in the shell starts
        // at once instead of waiting for the shell's own CPUs and GPUs (Slurm >= 20.11).
        plan.argv.insert(plan.argv.end(), {"srun", "--overlap", "--pty", "--nodes=1", "--ntasks=1",
                                           "/bin/bash", "--rcfile", request.rc_path, "-i"});
        return plan;
    }

    [[nodiscard]] DoctorCommands doctor_commands(const Partition& /*partition*/,
                                                 const std::string& user) const override {
        return {{"sbatch", "squeue", "sacct", "scancel"},
                {"sbatch", "--version"},
                {"squeue", "-h", "-o", "%i", "-u", user},
                {},
                {}};
    }
    [[nodiscard]] std::unique_ptr<Scheduler>
    make_adapter(ProcessRunner& runner, const SchedulerOptions& options) const override {
        return std::make_unique<SlurmScheduler>(runner, options);
    }
};

} // namespace

const SchedulerFamily& slurm_family() {
    static const SlurmFamily family;
    return family;
}

} // namespace dljob::schedulers
