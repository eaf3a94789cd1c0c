// SHARCNET sqsub / sqjobs / sqkill (monk, copper, mosaic, orca; retired 2017-18). The
// integration tests use the shims in tests/shims/ that translate onto Slurm.
//
// State table (sqjobs state letter -> dljob):
//   Q queued, *Q queued behind a dependency, H held                      -> PENDING
//   R running, Z / S / T suspended                                       -> RUNNING
//   D done, C complete (finished or dead: sqjobs has no exit code)       -> UNKNOWN "finished":
//     the job's exit_code file decides
//   K killed                                                             -> CANCELLED
//   not listed                                                           -> absent
//
// Quirks: there are no directives, so the rendered sqsub command (queue, -f, -n, -N, --gpp,
// --mpp, -r, -o) is what submits; sqsub's runtime (-r) is mandatory and a bare number means
// minutes; the id is best taken from --idfile, else "submitted as jobid N" (stdout and stderr
// are mixed); the job name (-j) carries the token; `sqjobs <id>` exits 1 once a job is done,
// so the user's whole list is read instead, and columns are never indexed blindly.
//
// Rendering (SqsubFamily below): the submit command carries the whole request, the script runs
// with --nompirun (it is not an MPI program). There is no interactive mode: `dljob shell` is
// refused with the closest thing, a job that holds the same resources.
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/sqsub.hpp>
#include <dljob/schedulers/support.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/shell.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <set>

namespace dljob::schedulers {

// Defined at the end of this file; listed in scheduler_table.cpp.
const SchedulerFamily& sqsub_family();
namespace {

bool is_state_token(std::string_view token) {
    static constexpr std::array<std::string_view, 10> states{"Q", "*Q", "R", "Z", "S",
                                                             "T", "H",  "D", "K", "C"};
    for (auto state : states) {
        if (token == state) {
            return true;
        }
    }
    return false;
}

} // namespace

std::optional<std::string> parse_sqsub_id(std::string_view output) {
    for (auto line : split_lines(output)) {
        constexpr std::string_view marker = "as jobid";
        if (auto pos = line.find(marker); pos != std::string_view::npos) {
            auto rest = split_whitespace(line.substr(pos + marker.size()));
            if (!rest.empty() && all_digits(rest[0])) {
                return std::string(rest[0]);
            }
        }
        if (auto pos = line.find("Job <"); pos != std::string_view::npos) {
            const auto end = line.find('>', pos);
            if (end != std::string_view::npos && all_digits(line.substr(pos + 5, end - pos - 5))) {
                return std::string(line.substr(pos + 5, end - pos - 5));
            }
        }
    }
    return std::nullopt;
}

std::map<std::string, std::string> parse_sqjobs(std::string_view output) {
    std::map<std::string, std::string> jobs;
    for (auto line : split_lines(output)) {
        auto fields = split_whitespace(line);
        if (fields.size() < 2 || !all_digits(fields[0])) {
            continue; // headers, separators and the cluster summary lines
        }
        for (std::size_t i = 1; i < fields.size(); ++i) {
            if (is_state_token(fields[i])) {
                jobs[std::string(fields[0])] = std::string(fields[i]);
                break;
            }
        }
    }
    return jobs;
}

SchedulerStatus map_sqsub_state(std::string_view letter) {
    SchedulerStatus status;
    status.native_state = std::string(letter);
    if (letter == "Q" || letter == "*Q" || letter == "H") {
        status.state = JobState::pending;
        if (letter == "*Q") {
            status.reason = "dependency";
        }
    } else if (letter == "R" || letter == "Z" || letter == "S" || letter == "T") {
        status.state = JobState::running;
    } else if (letter == "K") {
        status.state = JobState::cancelled;
    } else {
        status.state = JobState::unknown;
        status.reason = "finished";
    }
    return status;
}

namespace {

std::vector<std::string> sqsub_argv(const SubmitRequest& request, std::filesystem::path& idfile) {
    idfile = std::filesystem::path(request.run_dir) / "sqsub.id";
    const std::string name = token_job_name(request.token);
    if (request.submit_argv.empty() || request.submit_argv.front() != "sqsub") {
        // No rendered command (a hand-made request): the least sqsub takes. Runtime is
        // mandatory; minutes, rounded up.
        const auto minutes = request.walltime_s > 0 ? (request.walltime_s + 59) / 60 : 60;
        return {"sqsub",
                "-r",
                fmt::format("{}m", minutes),
                "-j",
                name,
                "-o",
                (std::filesystem::path(request.run_dir) / "job.log").string(),
                "--idfile=" + idfile.string(),
                request.script_path};
    }
    // The rendered command carries the whole request (-q -f -n -N --gpp --mpp -r -o ...). Only
    // the job name changes, to the one that carries the token, and the id file is the one named
    // there. Options end at the first word that is not one: the command sqsub runs.
    static const std::set<std::string_view> with_value{"-q", "-f", "-n", "-N", "-r",    "-j",
                                                       "-o", "-e", "-i", "-w", "--gpp", "--mpp"};
    std::vector<std::string> argv{request.submit_argv.front()};
    bool named = false;
    bool has_idfile = false;
    std::size_t i = 1;
    for (; i < request.submit_argv.size(); ++i) {
        const std::string& word = request.submit_argv[i];
        if (word.empty() || word.front() != '-') {
            break;
        }
        argv.push_back(word);
        if (word.rfind("--idfile=", 0) == 0) {
            idfile = word.substr(std::string_view("--idfile=").size());
            has_idfile = true;
        } else if (with_value.count(word) != 0 && i + 1 < request.submit_argv.size()) {
            ++i;
            argv.push_back(word == "-j" ? name : request.submit_argv[i]);
            named = named || word == "-j";
        }
    }
    if (!named) {
        argv.insert(argv.end(), {"-j", name});
    }
    if (!has_idfile) {
        argv.push_back("--idfile=" + idfile.string());
    }
    if (request.after) {
        const auto wait = sqsub_family().dependency_options(*request.after);
        argv.insert(argv.end(), wait.begin(), wait.end());
    }
    argv.insert(argv.end(), request.submit_argv.begin() + static_cast<std::ptrdiff_t>(i),
                request.submit_argv.end());
    return argv;
}

} // namespace

Result<Submission> SqsubScheduler::submit(const SubmitRequest& request) {
    std::filesystem::path idfile;
    std::vector<std::string> argv = sqsub_argv(request, idfile);
    std::error_code ec;
    std::filesystem::remove(idfile, ec);
    return submit_command(m_runner, std::move(argv), m_options, request.run_dir,
                          [&idfile](const ProcessResult& result) -> std::optional<std::string> {
                              if (auto text = util::read_file(idfile)) {
                                  if (auto trimmed = trim(*text); all_digits(trimmed)) {
                                      return std::string(trimmed);
                                  }
                              }
                              return parse_sqsub_id(result.out + "\n" + result.err);
                          });
}

Result<std::map<std::string, SchedulerStatus>>
SqsubScheduler::poll(const std::vector<JobRef>& jobs) {
    std::map<std::string, SchedulerStatus> found;
    if (jobs.empty()) {
        return found;
    }
    auto result = run_command(m_runner, {"sqjobs", "-a", "-u", current_user(m_options)}, m_options);
    if (!result) {
        return fail(result.error());
    }
    auto listed = parse_sqjobs(result->out);
    if (result->exit_code != 0 && listed.empty() && !trim(result->err).empty()) {
        return fail(command_error("sqjobs", *result));
    }
    for (const auto& job : jobs) {
        auto it = listed.find(job.scheduler_id);
        if (it != listed.end()) {
            found[job.scheduler_id] = map_sqsub_state(it->second);
        }
    }
    return found;
}

Result<std::optional<Submission>> SqsubScheduler::find_by_token(const JobRef& job) {
    // sqjobs' default listing has no job name; the long form does ("command:" and the name
    // line vary), so look for the token's job name anywhere in a record.
    auto result =
        run_command(m_runner, {"sqjobs", "-l", "-a", "-u", current_user(m_options)}, m_options);
    if (!result) {
        return fail(result.error());
    }
    const std::string name = token_job_name(job.token);
    std::string current_id;
    for (auto line : split_lines(result->out)) {
        auto fields = split_whitespace(line);
        if (fields.size() >= 2 && fields[0] == "jobid:" && all_digits(fields[1])) {
            current_id = std::string(fields[1]);
        }
        if (!current_id.empty() && line.find(name) != std::string_view::npos) {
            return std::optional<Submission>{Submission{current_id, ""}};
        }
    }
    return identity_submission(job);
}

Result<void> SqsubScheduler::cancel(const JobRef& job) {
    auto result = run_command(m_runner, {"sqkill", job.scheduler_id}, m_options);
    if (!result) {
        return fail(result.error());
    }
    if (result->exit_code != 0) {
        return fail(command_error("sqkill", *result));
    }
    return {};
}

namespace {

// -q -f -n -N --gpp --mpp -r -j: the options that ask for the job's resources.
std::vector<std::string> queue_options(const JobFacts& facts, SubmitPlan& plan) {
    const Partition& partition = facts.partition;
    const ResolvedResources& res = facts.resources;
    MemorySize memory = res.memory;
    if (memory.mib() == 0) {
        // sqsub requires --mpp; take the share of the node that goes with the cores.
        memory = MemorySize::from_mib(std::max<std::int64_t>(
            1024, partition.node.memory.mib() * res.cores_per_node / partition.node.cores));
        plan.notes.push_back(fmt::format("sqsub needs memory: using {} ({} of {} cores' share)",
                                         memory.with_units("g", "m"), res.cores_per_node,
                                         partition.node.cores));
    }
    std::vector<std::string> options{"-q", partition.queue};
    // Several ranks are an MPI job of that many processes (the script still runs once, with
    // --nompirun, and starts them itself through the partition's mpi launcher).
    const int ranks = res.nodes * res.tasks_per_node;
    if (ranks > 1) {
        options.insert(options.end(), {"-f", "mpi", "-n", std::to_string(ranks)});
    } else {
        if (!partition.sqsub_flag.empty()) {
            options.insert(options.end(), {"-f", partition.sqsub_flag});
        }
        options.insert(options.end(), {"-n", std::to_string(res.cores_per_node)});
    }
    if (res.nodes > 1) {
        options.insert(options.end(), {"-N", std::to_string(res.nodes)});
    }
    if (res.gpus_per_node > 0) {
        options.push_back(fmt::format("--gpp={}", res.gpus_per_node));
    }
    options.push_back("--mpp=" + memory.with_units("g", "m"));
    options.insert(options.end(),
                   {"-r", fmt::format("{}m", res.walltime.minutes_ceil()), "-j", facts.name});
    return options;
}

class SqsubFamily final : public SchedulerFamily {
public:
    [[nodiscard]] std::string_view name() const override { return "sqsub"; }
    [[nodiscard]] std::optional<PartitionProblem>
    check_partition(const Partition& partition) const override {
        if (partition.queue.empty()) {
            return PartitionProblem{"queue", "sqsub needs a queue (-q), e.g. gpu, threaded, mpi",
                                    ""};
        }
        return std::nullopt;
    }
    [[nodiscard]] std::string_view template_name() const override { return "sqsub.sh"; }
    // SHARCNET's sqsub ran jobs under Torque (PBS_JOBID) or LSF (LSB_JOBID); the shims the
    // tests use run them under Slurm.
    [[nodiscard]] std::string_view job_id_expression() const override {
        return R"("${PBS_JOBID:-${LSB_JOBID:-${SLURM_JOB_ID:-}}}")";
    }
    [[nodiscard]] bool log_in_directives() const override { return false; }

    [[nodiscard]] SubmitPlan plan(const JobFacts& facts) const override {
        SubmitPlan plan;
        plan.resource_options = queue_options(facts, plan);
        // The log and the id file belong to the batch job only.
        plan.submit_argv = {"sqsub"};
        plan.submit_argv.insert(plan.submit_argv.end(), plan.resource_options.begin(),
                                plan.resource_options.end());
        plan.submit_argv.insert(
            plan.submit_argv.end(),
            {"-o", facts.log, "--idfile=" + (facts.request.run_dir / "jobid").string()});
        std::vector<std::string> tail;
        if (facts.request.recipe.mail.on_end && !facts.request.recipe.mail.address.empty()) {
            tail.emplace_back("--mail-end");
        }
        tail.insert(tail.end(), facts.partition.extra_directives.begin(),
                    facts.partition.extra_directives.end());
        plan.submit_argv.insert(plan.submit_argv.end(), tail.begin(), tail.end());
        plan.resource_options.insert(plan.resource_options.end(), tail.begin(), tail.end());
        // The command is a script, not an MPI program: without --nompirun sqsub wraps it in
        // mpirun.
        plan.submit_argv.insert(plan.submit_argv.end(), {"--nompirun", "/bin/bash", facts.script});
        return plan;
    }

    [[nodiscard]] std::vector<std::string>
    dependency_options(const JobDependency& after) const override {
        // sqsub -w waits for the job to end, however it ends; for `ok` dljob status cancels
        // a dependant whose job failed before it could start.
        return {"-w", after.scheduler_id};
    }

    // Options go before --nompirun and the command.
    void add_submit_options(std::vector<std::string>& submit_argv,
                            const std::vector<std::string>& options) const override {
        const auto at = std::find(submit_argv.begin(), submit_argv.end(), "--nompirun");
        submit_argv.insert(at, options.begin(), options.end());
    }

    [[nodiscard]] Result<InteractivePlan>
    interactive(const InteractiveRequest& request) const override {
        InteractivePlan plan;
        plan.refusal = fmt::format("site {} (partition {}) submits with SHARCNET's sqsub, which "
                                   "has no interactive mode; nothing was allocated",
                                   request.site->name, request.partition->name);
        // Keep the resource options, hold the allocation with a detached screen (what SHARCNET
        // users did); the run directory is not created, so the output goes nowhere.
        std::vector<std::string> argv{"sqsub"};
        const auto& options = request.rendered.resource_options;
        argv.insert(argv.end(), options.begin(), options.end());
        const auto name = std::find(argv.begin(), argv.end(), "-j");
        argv.insert(name == argv.end() ? argv.end() : name + 2, {"-o", "/dev/null"});
        argv.insert(argv.end(), {"--nompirun", "screen", "-D", "-m"});
        plan.alternative =
            fmt::format("the closest thing is a job that holds the same resources: '{}', then "
                        "ssh to the node sqjobs shows and 'screen -r'; or run the recipe as a "
                        "batch job with 'dljob submit RECIPE --site {}'",
                        util::command_line(argv), request.site->name);
        return plan;
    }

    [[nodiscard]] DoctorCommands doctor_commands(const Partition& /*partition*/,
                                                 const std::string& /*user*/) const override {
        return {{"sqsub", "sqjobs", "sqkill"}, {}, {"sqjobs"}, {}, {}};
    }
    [[nodiscard]] std::unique_ptr<Scheduler>
    make_adapter(ProcessRunner& runner, const SchedulerOptions& options) const override {
        return std::make_unique<SqsubScheduler>(runner, options);
    }
};

} // namespace

const SchedulerFamily& sqsub_family() {
    static const SqsubFamily family;
    return family;
}

} // namespace dljob::schedulers
