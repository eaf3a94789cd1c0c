#pragma once
// A scheduler family (slurm, pbs, moab, sqsub, local): everything dljob knows about it behind one
// interface, implemented in the family's own file (schedulers/<family>.cpp) next to its adapter,
// state table and parsers: its name, the launchers and site-profile settings it accepts, its
// directives and commands. The site loader, the renderer (render/job_script.cpp) and `dljob
// shell` (schedulers/interactive.cpp) ask the family; none switches over families. Adding a
// family is its file, its template (templates/<family>.sh.mustache), its line in the table
// (scheduler_table.cpp), a site profile that uses it, and tests.

#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/render_request.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/scheduler.hpp>
#include <dljob/domain/site_profile.hpp>
#include <dljob/schedulers/interactive.hpp>
#include <dljob/schedulers/launcher.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::schedulers {

/// What the renderer has resolved and validated for one job: the family's input.
struct JobFacts {
    const RenderRequest& request;
    const Partition& partition;
    const ResolvedResources& resources;
    std::string name;      // the scheduler-visible job name (already mapped)
    std::string account;   // validated; empty: none
    std::string script;    // absolute path of the job script
    std::string log;       // absolute path of job.log
    bool log_in_directive; // the log path may appear in a directive (render::is_directive_safe)
};

/// The family's answer for one job.
struct SubmitPlan {
    std::vector<std::string> directives; // the text after "#SBATCH " / "#PBS "
    /// The exact submit command, the script's path inside (RenderedJob::submit_argv).
    std::vector<std::string> submit_argv;
    /// The options that ask for the job's resources, without what only a batch job uses
    /// (output file, warning signal, requeue, mail): what `dljob shell` asks for
    /// (RenderedJob::resource_options).
    std::vector<std::string> resource_options;
    std::vector<std::string> notes;
    /// The job script runs on this machine (the local runner) and hands itself to submit_argv
    /// there: a Spark driver in client mode.
    bool submit_from_script = false;
};

/// Why a partition cannot run under its family: the key (under the partition, "launcher",
/// "scheduler_options.master"), what is wrong and what was expected.
struct PartitionProblem {
    std::string key;
    std::string message;
    std::string hint;
};

/// What a submission may ask beyond one job, which a family may not do.
enum class JobFeature {
    after, // `submit --after`: wait for another job
    sweep, // a sweep's points, as a job array or one job each
};

/// What `dljob doctor` checks of a family on this machine.
struct DoctorCommands {
    std::vector<std::string> programs; // every one submit, status and cancel use
    std::vector<std::string> version;  // argv printing the version; empty: none
    std::vector<std::string> query;    // argv that needs the scheduler itself to answer
    /// Words in the query's answer that mean the partition cannot take jobs although the
    /// scheduler answered (a stopped YARN queue), and what they mean; empty: none.
    std::string refusal_in_answer;
    std::string refusal_means;
};

class SchedulerFamily {
public:
    virtual ~SchedulerFamily() = default;

    /// The family's name: a site profile's `scheduler:`, the store's `scheduler` column.
    [[nodiscard]] virtual std::string_view name() const = 0;
    /// The launchers its jobs may use, the first the most usual (a partition's `launcher:`).
    [[nodiscard]] virtual std::vector<LauncherKind> launchers() const {
        return {LauncherKind::none, LauncherKind::mpirun};
    }
    /// The launcher that starts a job's ranks when the family starts them itself (Spark's
    /// driver); nullptr: the partition's launcher (schedulers::job_launcher).
    [[nodiscard]] virtual const Launcher* rank_launcher() const { return nullptr; }
    /// Why the family cannot do `feature`, as a sentence that says what to do instead; empty:
    /// it can. Asked before anything is rendered or written.
    [[nodiscard]] virtual std::string refusal(JobFeature /*feature*/) const { return {}; }
    /// Whether its jobs run on the machine dljob runs on (a partition may say `node: auto`, and
    /// `dljob shell` opens the session here).
    [[nodiscard]] virtual bool runs_on_this_machine() const { return false; }
    /// What the family needs of a partition beyond the launcher (a queue, its own
    /// `scheduler_options:`); nullopt when it can run there.
    [[nodiscard]] virtual std::optional<PartitionProblem>
    check_partition(const Partition& /*partition*/) const {
        return std::nullopt;
    }
    /// The template under templates/ without ".mustache" ("slurm.sh").
    [[nodiscard]] virtual std::string_view template_name() const = 0;
    /// The job script's file name in the run directory.
    [[nodiscard]] virtual std::string_view script_name() const { return "job.sh"; }
    /// A quoted shell expression that is the scheduler's id of the running job, in the batch
    /// script and in an interactive session alike.
    [[nodiscard]] virtual std::string_view job_id_expression() const = 0;
    /// A shell expression for the walltime in seconds as the job sees it.
    [[nodiscard]] virtual std::string walltime_expression(const Walltime& walltime) const;
    /// Whether the scheduler itself sends the site's warning signal before the walltime ends
    /// (else the script starts a timer).
    [[nodiscard]] virtual bool signals_before_walltime(const SchedulerBehaviour& behaviour) const;
    /// Whether the log path is a directive (else it is on the submit command line only).
    [[nodiscard]] virtual bool log_in_directives() const { return true; }
    /// Whether a checkpointed job submits its next attempt itself through `dljob continue-job`
    /// (false for local: its wrapper continues the job).
    [[nodiscard]] virtual bool job_continues_itself() const { return true; }
    /// The environment variable naming the file that lists the job's hosts, for an MPI
    /// launcher to place ranks on; empty: the launcher finds the hosts itself.
    [[nodiscard]] virtual std::string_view node_file_variable() const { return {}; }

    /// Directives, submit command and resource options for one job.
    [[nodiscard]] virtual SubmitPlan plan(const JobFacts& facts) const = 0;

    /// The submit options that make a job wait for `after`; empty: the family waits otherwise.
    [[nodiscard]] virtual std::vector<std::string>
    dependency_options(const JobDependency& after) const = 0;
    /// `submit_argv` with `options` (dependency_options) where the submit command takes them:
    /// before the script.
    virtual void add_submit_options(std::vector<std::string>& submit_argv,
                                    const std::vector<std::string>& options) const;

    /// Job arrays (a sweep is one array where the family has them, docs/schedulers.md). The
    /// options that make a submission an array of `array.size` tasks, indexes 0 .. size-1, at
    /// most `array.limit` running at once (0: no limit); empty: the family has no arrays, and a
    /// sweep is one job per point.
    [[nodiscard]] virtual std::vector<std::string> array_options(const ArraySpec& array) const;
    /// What starts a directive line in the family's scripts ("#SBATCH"); empty: none.
    [[nodiscard]] virtual std::string_view directive_prefix() const { return {}; }
    /// A quoted shell expression, inside an array task: its index.
    [[nodiscard]] virtual std::string_view array_index_expression() const { return {}; }
    /// A quoted shell expression, inside an array task: its id as array_task_id names it.
    [[nodiscard]] virtual std::string_view array_task_id_expression() const { return {}; }
    /// The scheduler's id of task `index` of the array that submit answered `array_id` for.
    [[nodiscard]] virtual std::string array_task_id(const std::string& array_id, int index) const;
    /// The array's own id from one task's (cancels the whole array); `task_id` itself when it
    /// names no array task.
    [[nodiscard]] virtual std::string array_of(const std::string& task_id) const;

    /// The command that makes the pending job `dependant` wait for `after` instead of what it
    /// waited for (a continued job's dependants move to its next attempt); empty: the family
    /// cannot change a pending job's dependency.
    [[nodiscard]] virtual std::vector<std::string>
    retarget_dependency(const std::string& dependant, const JobDependency& after) const;

    /// A command whose output the family's `interactive` needs (InteractiveRequest::
    /// probe_output), run with a short timeout before it; empty: none.
    [[nodiscard]] virtual std::vector<std::string> interactive_probe() const { return {}; }
    /// The command that opens an interactive session with the request's resources, or a
    /// refusal naming the closest thing.
    [[nodiscard]] virtual Result<InteractivePlan>
    interactive(const InteractiveRequest& request) const = 0;

    /// The programs `dljob doctor` looks for (a name on PATH, or a path) and the commands it
    /// runs for `user` on `partition`.
    [[nodiscard]] virtual DoctorCommands doctor_commands(const Partition& partition,
                                                         const std::string& user) const = 0;

    /// The adapter that submits, polls and cancels this family's jobs.
    [[nodiscard]] virtual std::unique_ptr<Scheduler>
    make_adapter(ProcessRunner& runner, const SchedulerOptions& options) const = 0;
};

/// A sweep's one job array (docs/schedulers.md): each task runs its point's own job script.
struct ArrayScriptFacts {
    std::string sweep;                   // the sweep id, for the script's comments and errors
    std::vector<std::string> directives; // the points' shared directives (text after the prefix)
    ArraySpec array;                     // size: the number of points
    std::vector<std::string> scripts;    // each point's job script (absolute), by task index
};

/// The array script of `family` (array_options must be non-empty): its directives and the
/// array's, then a body that picks the task's point by its index, sends the task's output to
/// that point's job.log and runs the point's script in its place (exec: the scheduler's
/// signals reach it), with DLJOB_ARRAY_TASK_ID naming the task for the point's record.
std::string array_script(const SchedulerFamily& family, const ArrayScriptFacts& facts);

/// Every family, in the order error messages list them (scheduler_table.cpp).
const std::vector<const SchedulerFamily*>& families();
/// The family named `name` ("torque" is the PBS family's other name); nullptr for none.
const SchedulerFamily* find_family(std::string_view name);
/// The family named `name`, which a loaded site profile has (check_site): an unknown name there
/// is a bug, and throws std::logic_error.
const SchedulerFamily& family_of(std::string_view name);

/// The PBS dialect (#PBS lines, qsub/msub options) that Torque and Moab share; `program` is
/// "qsub" or "msub".
SubmitPlan plan_pbs_dialect(const JobFacts& facts, const std::string& program);
/// `qsub -I [-x] -N <token> ...` / `msub -I -x ...` for the PBS dialect.
Result<std::vector<std::string>> pbs_dialect_interactive(const InteractiveRequest& request,
                                                         const std::string& program, bool with_x);
/// The PBS dialect's submit options after the walltime (qsub and msub alike): the log, the
/// dependency, the array, then the script.
void add_pbs_dialect_submit_tail(std::vector<std::string>& argv, const SubmitRequest& request,
                                 const SchedulerFamily& family);
/// The PBS dialect's -W depend=afterok:ID.
std::vector<std::string> pbs_dialect_dependency(const JobDependency& after);

} // namespace dljob::schedulers
