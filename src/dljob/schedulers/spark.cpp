// Spark on YARN (CaffeOnSpark's users: the seed's MapR cluster, Spark 1.5.2 on YARN): a job is a
// Spark application in cluster mode whose driver (spark_driver.py, installed as
// share/dljob/spark/dljob_spark_driver.py) runs the job script's batch side in the YARN
// application master and starts its ranks as one Spark task each, in executors of their own;
// the ranks meet through dltrain's Gloo communicator (DLTRAIN_RANK, DLTRAIN_WORLD_SIZE,
// DLTRAIN_RENDEZVOUS), not MPI, which executors do not have. Tested against the shims in
// tests/shims/ (neither Spark nor YARN is packaged in Debian); it has not run on a real cluster.
//
// A standalone master (spark://) cannot run a Python driver in cluster mode, so there the driver
// runs in client mode on this machine: the local runner (local.cpp) runs the job script, which
// hands itself to spark-submit (spark.sh.mustache); such a job's id is the runner's pid, and its
// status, logs and cancel are the local runner's. The rest of this comment is YARN's.
//
// State table (yarn application -list -appStates ALL: State, Final-State -> dljob):
//   NEW, NEW_SAVING, SUBMITTED, ACCEPTED (any)                          -> PENDING
//   RUNNING (UNDEFINED)                                                 -> RUNNING
//   FINISHED SUCCEEDED                                                  -> COMPLETED
//   FINISHED KILLED, KILLED (any)                                       -> CANCELLED
//   FINISHED FAILED / UNDEFINED / ENDED, FAILED (any)                   -> FAILED
//   not listed (the ResourceManager's retention, a restart)             -> absent
// The job's own exit_code file still decides between COMPLETED and FAILED (reconcile), and a
// training that checkpointed before its walltime exits 75 through the driver.
//
// Quirks: spark-submit logs to stderr, and Spark 1.x logs only the sequence number on
// "Submitting application 7", so the id is Hadoop's "Submitted application application_..."
// line; YARN has no walltime, so the script keeps its own (signals_before_walltime: false);
// spark-submit waits for the application to end unless spark.yarn.submit.waitAppCompletion is
// false, and killing it does not kill the application: cancel is `yarn application -kill`;
// `spark.scheduler.minRegisteredResourcesWaitingTime` (the seed's fix) is no Spark property and
// a bare number there is milliseconds, so conf lines are checked against a table.
//
// Rendering (SparkFamily below): one executor per rank with all of a node's useful cores
// (spark.task.cpus the same, so one task per executor); every executor awaited, by barrier
// execution mode from Spark 2.4, else by the minRegisteredResources settings with dynamic
// allocation off; no retries behind dljob's back (one AM attempt, one task attempt).
#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/launcher.hpp>
#include <dljob/schedulers/spark.hpp>
#include <dljob/schedulers/support.hpp>
#include <dljob/util/files.hpp>
#include <dljob/util/shell.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <regex>

namespace dljob::schedulers {

// Defined at the end of this file; listed in scheduler_table.cpp.
const SchedulerFamily& spark_family();

std::optional<std::string> parse_spark_submit_id(std::string_view output) {
    static const std::regex id{R"(application_[0-9]+_[0-9]+)"};
    for (const auto line : split_lines(output)) {
        // "Submitted application ID" (Hadoop's YarnClientImpl, every Spark version) or, from
        // Spark 2, "Submitting application ID to ResourceManager"; never the report lines.
        if (line.find("ubmitted application") == std::string_view::npos &&
            line.find("ubmitting application") == std::string_view::npos) {
            continue;
        }
        std::match_results<std::string_view::const_iterator> match;
        if (std::regex_search(line.begin(), line.end(), match, id)) {
            return match.str();
        }
    }
    return std::nullopt;
}

std::vector<YarnApplication> parse_yarn_list(std::string_view output) {
    std::vector<YarnApplication> applications;
    for (const auto line : split_lines(output)) {
        const auto fields = split(line, '\t');
        // Id, Name, Type, User, Queue, State, Final-State, Progress, Tracking-URL
        if (fields.size() < 7 || trim(fields[0]).rfind("application_", 0) != 0) {
            continue; // the "Total number of applications" line and the header
        }
        applications.push_back(YarnApplication{std::string(trim(fields[0])),
                                               std::string(trim(fields[1])),
                                               std::string(trim(fields[5])),
                                               std::string(trim(fields[6])),
                                               {}});
    }
    return applications;
}

std::optional<YarnApplication> parse_yarn_status(std::string_view output) {
    YarnApplication application;
    bool in_diagnostics = false;
    for (const auto line : split_lines(output)) {
        const auto colon = line.find(" : ");
        const std::string_view key =
            colon == std::string_view::npos ? "" : trim(line.substr(0, colon));
        const std::string_view value =
            colon == std::string_view::npos ? "" : trim(line.substr(colon + 3));
        static constexpr std::array<std::string_view, 5> keys{
            "Application-Id", "Application-Name", "State", "Final-State", "Diagnostics"};
        const bool known = std::find(keys.begin(), keys.end(), key) != keys.end();
        if (!known && colon != std::string_view::npos && key.find(' ') == std::string_view::npos) {
            in_diagnostics = false; // the next key ends Diagnostics' lines
        }
        if (key == "Application-Id") {
            application.id = value;
        } else if (key == "Application-Name") {
            application.name = value;
        } else if (key == "State") {
            application.state = value;
        } else if (key == "Final-State") {
            application.final_state = value;
        } else if (key == "Diagnostics") {
            application.diagnostics = value;
            in_diagnostics = true;
        } else if (in_diagnostics && colon == std::string_view::npos && !trim(line).empty()) {
            application.diagnostics += fmt::format("\n{}", trim(line)); // a stack trace
        }
    }
    if (application.state.empty()) {
        return std::nullopt;
    }
    return application;
}

SchedulerStatus map_yarn_state(const YarnApplication& application) {
    SchedulerStatus status;
    const std::string& state = application.state;
    const std::string& final_state = application.final_state;
    status.native_state = final_state.empty() ? state : state + "/" + final_state;
    if (state == "NEW" || state == "NEW_SAVING" || state == "SUBMITTED" || state == "ACCEPTED") {
        status.state = JobState::pending;
    } else if (state == "RUNNING") {
        status.state = JobState::running;
    } else if (state == "KILLED" || (state == "FINISHED" && final_state == "KILLED")) {
        status.state = JobState::cancelled;
    } else if (state == "FINISHED" && final_state == "SUCCEEDED") {
        status.state = JobState::completed;
    } else if (state == "FINISHED" || state == "FAILED") {
        // Spark's own client counts a FINISHED application without SUCCEEDED as failed.
        status.state = JobState::failed;
        status.reason = application.diagnostics.substr(0, application.diagnostics.find('\n'));
    } else {
        status.state = JobState::unknown;
        status.reason = "YARN state " + state;
    }
    return status;
}

namespace {

// The spark-submit program of a rendered command: what the adapter runs.
std::vector<std::string> with_token_name(std::vector<std::string> argv, const std::string& token) {
    const auto name = std::find(argv.begin(), argv.end(), "--name");
    if (name != argv.end() && name + 1 != argv.end()) {
        *(name + 1) = token_job_name(token); // find_by_token looks for it in YARN's list
    }
    return argv;
}

} // namespace

std::vector<std::string> SparkScheduler::submit_command_line(const SubmitRequest& request) const {
    return with_token_name(request.submit_argv, request.token);
}

namespace {

// YARN's ids are application_<ms>_<n>; a standalone master's job is the local runner's pid.
bool on_yarn(const std::string& scheduler_id) {
    return scheduler_id.rfind("application_", 0) == 0;
}

bool standalone_request(const SubmitRequest& request) {
    const auto master =
        std::find(request.submit_argv.begin(), request.submit_argv.end(), "--master");
    return master != request.submit_argv.end() && master + 1 != request.submit_argv.end() &&
           (master + 1)->rfind("spark://", 0) == 0;
}

// A job never recorded as submitted has no id to tell: its script says (spark.sh.mustache's
// client-mode section sets DLJOB_SPARK_CLIENT_MODE=1 near its top).
bool standalone_script(const JobRef& job) {
    const auto script = util::read_file(std::filesystem::path(job.run_dir) / "job.sh");
    return script && script->find("\nDLJOB_SPARK_CLIENT_MODE=1\n") != std::string::npos;
}

} // namespace

Result<Submission> SparkScheduler::submit(const SubmitRequest& request) {
    if (request.submit_argv.empty()) {
        return fail(ErrorCode::config_invalid,
                    "a Spark job is submitted with its rendered spark-submit command, and this "
                    "request has none");
    }
    if (standalone_request(request)) {
        return m_client_mode.submit(request);
    }
    return submit_command(m_runner, submit_command_line(request), m_options, request.run_dir,
                          [](const ProcessResult& result) {
                              return parse_spark_submit_id(result.err + "\n" + result.out);
                          });
}

Result<std::vector<YarnApplication>> SparkScheduler::list_applications() {
    auto result =
        run_command(m_runner, {"yarn", "application", "-list", "-appStates", "ALL"}, m_options);
    if (!result) {
        return fail(result.error());
    }
    if (result->exit_code != 0) {
        return fail(command_error("yarn", *result));
    }
    return parse_yarn_list(result->out);
}

Result<std::map<std::string, SchedulerStatus>>
SparkScheduler::poll(const std::vector<JobRef>& jobs) {
    std::vector<JobRef> yarn;
    std::vector<JobRef> client_mode;
    for (const auto& job : jobs) {
        (on_yarn(job.scheduler_id) ? yarn : client_mode).push_back(job);
    }
    std::map<std::string, SchedulerStatus> found;
    if (!client_mode.empty()) {
        auto polled = m_client_mode.poll(client_mode);
        if (!polled) {
            return fail(polled.error());
        }
        found = std::move(*polled);
    }
    if (yarn.empty()) {
        return found;
    }
    auto listed = list_applications();
    if (!listed) {
        return fail(listed.error());
    }
    for (const auto& application : *listed) {
        for (const auto& job : yarn) {
            if (job.scheduler_id == application.id) {
                found[job.scheduler_id] = map_yarn_state(application);
            }
        }
    }
    return found;
}

Result<std::optional<Submission>> SparkScheduler::find_by_token(const JobRef& job) {
    if (standalone_script(job)) {
        return m_client_mode.find_by_token(job);
    }
    auto listed = list_applications();
    if (!listed) {
        return fail(listed.error());
    }
    const std::string name = token_job_name(job.token);
    for (const auto& application : *listed) {
        if (application.name == name) {
            return std::optional<Submission>{Submission{application.id, ""}};
        }
    }
    return identity_submission(job);
}

Result<void> SparkScheduler::cancel(const JobRef& job) {
    if (!on_yarn(job.scheduler_id)) {
        // The driver's group: spark-submit stops the application as it ends, and with it the
        // executors, whose ranks take their parent's end as SIGTERM (DLTRAIN_DIE_WITH_PARENT).
        return m_client_mode.cancel(job);
    }
    auto result =
        run_command(m_runner, {"yarn", "application", "-kill", job.scheduler_id}, m_options);
    if (!result) {
        return fail(result.error());
    }
    // An application that has already ended says so and exits 0; an unknown one exits 255.
    if (result->exit_code != 0) {
        return fail(command_error("yarn", *result));
    }
    return {};
}

namespace {

// What a partition's `scheduler_options:` say, checked (SparkFamily::check_partition).
struct SparkSettings {
    std::string master;
    std::string deploy_mode; // empty: the master's (cluster on YARN, client on a standalone)
    std::string spark_submit = "spark-submit";
    std::string archive; // dljob's release tarball, shipped to every executor; empty: none
    int major = 0;
    int minor = 0;
    std::string executor_memory; // empty: from the node's memory
    std::vector<std::string> conf;
};

// Properties whose bare number is milliseconds (Spark's getTimeAsMs): a unit is required.
constexpr std::array<std::string_view, 6> time_properties{
    "spark.scheduler.maxRegisteredResourcesWaitingTime",
    "spark.network.timeout",
    "spark.executor.heartbeatInterval",
    "spark.barrier.sync.timeout",
    "spark.locality.wait",
    "spark.yarn.am.waitTime"};
// What the family sets itself (the rank geometry and the no-retry rules): a conf line may not.
constexpr std::array<std::string_view, 9> rendered_properties{
    "spark.executor.instances",
    "spark.executor.cores",
    "spark.task.cpus",
    "spark.dynamicAllocation.enabled",
    "spark.task.maxFailures",
    "spark.yarn.maxAppAttempts",
    "spark.stage.maxConsecutiveAttempts",
    "spark.yarn.submit.waitAppCompletion",
    "spark.scheduler.minRegisteredResourcesRatio"};

std::optional<PartitionProblem> check_conf(const std::string& line) {
    const auto equals = line.find('=');
    const std::string key = line.substr(0, equals);
    const std::string where = "scheduler_options.conf";
    if (equals == std::string::npos || key.rfind("spark.", 0) != 0) {
        return PartitionProblem{where, fmt::format("'{}' is not a spark.NAME=VALUE line", line),
                                ""};
    }
    const std::string value = line.substr(equals + 1);
    if (key == "spark.scheduler.minRegisteredResourcesWaitingTime") {
        return PartitionProblem{
            where, fmt::format("{} is no Spark property (Spark ignores it silently)", key),
            "the property is spark.scheduler.maxRegisteredResourcesWaitingTime, with a unit "
            "(300s): dljob sets the wait for every executor itself"};
    }
    if (std::find(rendered_properties.begin(), rendered_properties.end(), key) !=
        rendered_properties.end()) {
        return PartitionProblem{where,
                                fmt::format("{} is set by dljob from the job's ranks and "
                                            "threads; leave it out",
                                            key),
                                ""};
    }
    static const std::regex with_unit{R"([0-9]+(ms|s|m|min|h|d))"};
    if (std::find(time_properties.begin(), time_properties.end(), key) != time_properties.end() &&
        !std::regex_match(value, with_unit)) {
        return PartitionProblem{where,
                                fmt::format("{}={}: a bare number is milliseconds to Spark; "
                                            "expected a number with its unit (300s, 5min)",
                                            key, value),
                                ""};
    }
    return std::nullopt;
}

std::optional<PartitionProblem> read_version(const std::string& text, SparkSettings& settings) {
    static const std::regex version{R"(([1-9])\.([0-9]{1,2})(\.[0-9]{1,3})?)"};
    std::smatch match;
    if (!std::regex_match(text, match, version)) {
        return PartitionProblem{"scheduler_options.version",
                                fmt::format("'{}' is not a Spark version; expected one like "
                                            "1.5.2 or 3.5",
                                            text),
                                "spark-submit --version prints it"};
    }
    settings.major = std::stoi(match[1].str());
    settings.minor = std::stoi(match[2].str());
    return std::nullopt;
}

// One value of an option (a scalar), or the problem.
std::optional<PartitionProblem> single(const std::string& key,
                                       const std::vector<std::string>& values, std::string& to) {
    if (values.size() != 1) {
        return PartitionProblem{"scheduler_options." + key, "expected one value, not a list", ""};
    }
    to = values.front();
    return std::nullopt;
}

std::optional<PartitionProblem> read_option(const std::string& key,
                                            const std::vector<std::string>& values,
                                            SparkSettings& settings) {
    std::string value;
    if (key == "conf") {
        for (const auto& line : values) {
            if (auto problem = check_conf(line)) {
                return problem;
            }
        }
        settings.conf = values;
        return std::nullopt;
    }
    if (auto problem = single(key, values, value)) {
        return problem;
    }
    const std::string where = "scheduler_options." + key;
    if (key == "master") {
        static const std::regex master{R"(yarn|spark://[A-Za-z0-9.-]+:[0-9]{1,5})"};
        if (!std::regex_match(value, master)) {
            return PartitionProblem{
                where, fmt::format("'{}': expected yarn or spark://HOST:PORT", value), ""};
        }
        settings.master = value;
    } else if (key == "deploy_mode") {
        if (value != "cluster" && value != "client") {
            return PartitionProblem{where, "expected cluster or client", ""};
        }
        settings.deploy_mode = value;
    } else if (key == "version") {
        return read_version(value, settings);
    } else if (key == "spark_submit") {
        settings.spark_submit = value;
    } else if (key == "archive") {
        static const std::regex tarball{
            R"([^#,\s]+/dljob-[0-9]+\.[0-9]+\.[0-9]+-linux-x86_64\.tar\.gz)"};
        if (!std::regex_match(value, tarball)) {
            return PartitionProblem{
                where, fmt::format("'{}' is not the path of a dljob release tarball", value),
                "expected e.g. maprfs:///apps/dljob-0.1.0-linux-x86_64.tar.gz, the tarball as "
                "scripts/make-release.sh names it (its one top folder has the same name)"};
        }
        settings.archive = value;
    } else if (key == "executor_memory") {
        if (!std::regex_match(value, std::regex{R"([1-9][0-9]{0,6}[mMgG])"})) {
            return PartitionProblem{where, "expected a size like 26g or 4096m", ""};
        }
        settings.executor_memory = value;
    } else {
        return PartitionProblem{where, "not a Spark setting dljob knows",
                                "expected master, deploy_mode, version, spark_submit, archive, "
                                "executor_memory or conf"};
    }
    return std::nullopt;
}

std::variant<SparkSettings, PartitionProblem> spark_settings(const Partition& partition) {
    SparkSettings settings;
    for (const auto& [key, values] : partition.scheduler_options) {
        if (auto problem = read_option(key, values, settings)) {
            return *problem;
        }
    }
    for (const char* required : {"master", "version"}) {
        if (partition.scheduler_options.count(required) == 0) {
            return PartitionProblem{fmt::format("scheduler_options.{}", required),
                                    "missing; a Spark partition needs its master and version",
                                    "e.g. scheduler_options: {master: yarn, version: 1.5.2}"};
        }
    }
    const bool yarn = settings.master == "yarn";
    if (settings.deploy_mode.empty()) {
        settings.deploy_mode = yarn ? "cluster" : "client";
    }
    if (yarn && settings.deploy_mode != "cluster") {
        return PartitionProblem{"scheduler_options.deploy_mode",
                                "a client-mode driver on YARN ends with the login session, and "
                                "YARN can run it in its application master instead",
                                "deploy_mode: cluster"};
    }
    if (!yarn && settings.deploy_mode != "client") {
        // Spark 1 to 3 refuse it: "Cluster deploy mode is currently not supported for python
        // applications on standalone clusters".
        return PartitionProblem{"scheduler_options.deploy_mode",
                                "a standalone master cannot run a Python driver (dljob's) in "
                                "cluster mode; dljob runs it in client mode on this machine, "
                                "as it runs a local job, until the job ends",
                                "deploy_mode: client, or leave it out"};
    }
    if (!yarn && !settings.archive.empty()) {
        return PartitionProblem{"scheduler_options.archive",
                                "a standalone master does not ship archives to its executors "
                                "(--archives is YARN's): dltrain must be at the same path on "
                                "every worker",
                                "leave archive out, and install the release where every worker "
                                "sees it"};
    }
    return settings;
}

// YARN places executors itself: the ranks spread over the partition's nodes, this many a node.
int executors_per_node(const Partition& partition, int ranks) {
    const int nodes = std::max(1, partition.max_nodes);
    return (ranks + nodes - 1) / nodes;
}

// The seed's rule: executors x cores a little under the cluster's vcores (25 x 2 on 60 was
// its fastest), one executor per rank with every useful core of its share of a node, one core
// a node left to the NodeManager and the application master.
int executor_cores(const Partition& partition, int ranks) {
    return std::max(1, (partition.node.cores - 1) / executors_per_node(partition, ranks));
}

// YARN adds max(384 MiB, 10 %) to each executor; what is left of the rank's share of a node.
std::string executor_memory(const Partition& partition, int ranks) {
    const std::int64_t share = partition.node.memory.mib() / executors_per_node(partition, ranks);
    return fmt::format("{}m", std::max<std::int64_t>(512, std::min(share * 10 / 11, share - 384)));
}

std::vector<std::string> spark_conf(const SparkSettings& settings, int cores) {
    std::vector<std::string> conf{fmt::format("spark.task.cpus={}", cores),
                                  "spark.dynamicAllocation.enabled=false",
                                  "spark.task.maxFailures=1"};
    if (settings.master == "yarn") {
        conf.emplace_back("spark.yarn.maxAppAttempts=1");
        // spark-submit returns once YARN has the application; dljob polls YARN.
        conf.emplace_back("spark.yarn.submit.waitAppCompletion=false");
    }
    if (settings.major > 2 || (settings.major == 2 && settings.minor >= 4)) {
        conf.emplace_back("spark.stage.maxConsecutiveAttempts=1");
    } else {
        // Before barrier mode (Spark 2.4): wait for every executor before the ranks' stage.
        conf.emplace_back("spark.scheduler.minRegisteredResourcesRatio=1.0");
        conf.emplace_back("spark.scheduler.maxRegisteredResourcesWaitingTime=300s");
    }
    conf.insert(conf.end(), settings.conf.begin(), settings.conf.end());
    return conf;
}

// Where YARN unpacks the shipped release in each executor's working directory (#NAME).
constexpr std::string_view shipped_folder = "dljob-release";

// Starts the ranks through the driver, which set DLJOB_SPARK_LAUNCH in the batch side.
class SparkLauncher final : public Launcher {
public:
    [[nodiscard]] LauncherKind kind() const override { return LauncherKind::none; }
    [[nodiscard]] std::string_view name() const override { return "spark"; }
    [[nodiscard]] std::string prefix(const LaunchGeometry& geometry) const override {
        return fmt::format(R"("${{PYSPARK_PYTHON:-python3}}" )"
                           R"("${{DLJOB_SPARK_LAUNCH:?set by the dljob Spark driver}}" )"
                           "--launch --ranks {}",
                           geometry.ranks());
    }
};

class SparkFamily final : public SchedulerFamily {
public:
    [[nodiscard]] std::string_view name() const override { return "spark"; }
    [[nodiscard]] std::vector<LauncherKind> launchers() const override {
        return {LauncherKind::none};
    }
    [[nodiscard]] std::optional<PartitionProblem>
    check_partition(const Partition& partition) const override {
        auto settings = spark_settings(partition);
        if (auto* problem = std::get_if<PartitionProblem>(&settings)) {
            return *problem;
        }
        return std::nullopt;
    }
    [[nodiscard]] const Launcher* rank_launcher() const override { return &m_launcher; }
    [[nodiscard]] std::string_view template_name() const override { return "spark.sh"; }
    [[nodiscard]] std::string_view job_id_expression() const override {
        return R"("${DLJOB_SPARK_APP_ID:-}")";
    }
    [[nodiscard]] bool log_in_directives() const override { return false; }
    // The application master has neither dljob nor spark-submit: `dljob status` submits the
    // next attempt of a job that checkpointed.
    [[nodiscard]] bool job_continues_itself() const override { return false; }
    [[nodiscard]] std::string refusal(JobFeature feature) const override {
        return feature == JobFeature::after
                   ? "YARN has no dependencies between applications: submit this job once the "
                     "other has ended"
                   : "a Spark site runs one application per job, not job arrays: submit the "
                     "sweep's points to a batch site, or one at a time";
    }

    [[nodiscard]] SubmitPlan plan(const JobFacts& facts) const override {
        SubmitPlan plan;
        // check_site accepted the partition, so its settings read.
        const auto settings = std::get<SparkSettings>(spark_settings(facts.partition));
        const ResolvedResources& res = facts.resources;
        const int ranks = std::max(1, res.nodes * res.tasks_per_node);
        const int cores = executor_cores(facts.partition, ranks);
        const std::string memory = settings.executor_memory.empty()
                                       ? executor_memory(facts.partition, ranks)
                                       : settings.executor_memory;
        const bool yarn = settings.master == "yarn";
        // A standalone master has no --num-executors: the job's cores over each executor's.
        plan.resource_options = {yarn ? "--num-executors" : "--total-executor-cores",
                                 std::to_string(yarn ? ranks : ranks * cores),
                                 "--executor-cores",
                                 std::to_string(cores),
                                 "--executor-memory",
                                 memory};
        if (yarn && !facts.partition.queue.empty()) {
            plan.resource_options.insert(plan.resource_options.end(),
                                         {"--queue", facts.partition.queue});
        }
        plan.submit_argv = {settings.spark_submit, "--master", settings.master, "--deploy-mode",
                            settings.deploy_mode,  "--name",   facts.name};
        plan.submit_argv.insert(plan.submit_argv.end(), plan.resource_options.begin(),
                                plan.resource_options.end());
        for (const auto& line : spark_conf(settings, cores)) {
            plan.submit_argv.insert(plan.submit_argv.end(), {"--conf", line});
        }
        if (!settings.archive.empty()) {
            plan.submit_argv.insert(
                plan.submit_argv.end(),
                {"--archives", fmt::format("{}#{}", settings.archive, shipped_folder)});
        }
        const auto driver = facts.request.dljob_binary.parent_path().parent_path() / "share" /
                            "dljob" / "spark" / "dljob_spark_driver.py";
        plan.submit_argv.insert(plan.submit_argv.end(),
                                {driver.string(), "--ranks", std::to_string(ranks), "--threads",
                                 std::to_string(cores), "--script", facts.script, "--log",
                                 facts.log});
        if (!settings.archive.empty()) {
            // The tarball's one top folder is its name; YARN unpacks it under #shipped_folder
            // in each executor's working directory.
            const std::string file = settings.archive.substr(settings.archive.rfind('/') + 1);
            plan.submit_argv.insert(
                plan.submit_argv.end(),
                {"--shipped-bin", fmt::format("{}/{}/bin", shipped_folder,
                                              file.substr(0, file.size() - 7))}); // .tar.gz
            plan.notes.push_back(fmt::format("dljob's release {} is shipped to every executor; "
                                             "the ranks run its dltrain",
                                             settings.archive));
        }
        plan.submit_from_script = !yarn;
        if (!yarn) {
            plan.notes.push_back(
                "a standalone master runs dljob's Python driver in client mode: on this machine, "
                "as a local job runs, until the job ends (status, logs and cancel as for local)");
        }
        plan.notes.push_back(fmt::format(
            "{} executor(s) of {} core(s) and {} each, one rank per executor (Spark {}.{}: {})",
            ranks, cores, memory, settings.major, settings.minor,
            settings.major > 2 || (settings.major == 2 && settings.minor >= 4)
                ? "barrier execution mode starts them together"
                : "every executor is awaited before the ranks start"));
        return plan;
    }

    [[nodiscard]] std::vector<std::string>
    dependency_options(const JobDependency& /*after*/) const override {
        return {}; // refused before rendering (refusal)
    }

    [[nodiscard]] Result<InteractivePlan>
    interactive(const InteractiveRequest& request) const override {
        InteractivePlan plan;
        plan.refusal = fmt::format("site {} (partition {}) runs Spark applications on YARN, which "
                                   "has no interactive session on a node; nothing was allocated",
                                   request.site->name, request.partition->name);
        plan.alternative = fmt::format(
            "for Spark itself, 'pyspark --master yarn' on the login node; to train, 'dljob "
            "submit RECIPE --site {}'",
            request.site->name);
        return plan;
    }

    [[nodiscard]] DoctorCommands doctor_commands(const Partition& partition,
                                                 const std::string& /*user*/) const override {
        const auto read = spark_settings(partition);
        const auto* settings = std::get_if<SparkSettings>(&read);
        const std::string submit = settings ? settings->spark_submit : "spark-submit";
        if (settings && settings->master != "yarn") {
            // A standalone master has no command-line client to ask; the job's driver meets it.
            return {{submit}, {submit, "--version"}, {}, {}, {}};
        }
        if (partition.queue.empty()) {
            return {
                {submit, "yarn"}, {submit, "--version"}, {"yarn", "application", "-list"}, {}, {}};
        }
        // Hadoop's QueueCLI: "State : RUNNING"; a stopped queue answers and refuses every job.
        return {
            {submit, "yarn"},
            {submit, "--version"},
            {"yarn", "queue", "-status", partition.queue},
            "State : STOPPED",
            fmt::format("YARN's queue {} is stopped: it accepts no application", partition.queue)};
    }
    [[nodiscard]] std::unique_ptr<Scheduler>
    make_adapter(ProcessRunner& runner, const SchedulerOptions& options) const override {
        return std::make_unique<SparkScheduler>(runner, options);
    }

private:
    SparkLauncher m_launcher;
};

} // namespace

const SchedulerFamily& spark_family() {
    static const SparkFamily family;
    return family;
}

} // namespace dljob::schedulers
