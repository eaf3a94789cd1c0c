// The Spark family (schedulers/spark.cpp): its parsers on spark-submit's and yarn's output, its
// state table, what it renders for the seed's MapR cluster, and what it refuses. None of this
// has met a real Spark or YARN (neither is packaged in Debian): the formats are the ones
// Spark's and Hadoop's sources print (tests/fixtures/scheduler-output/README.md).
#include "fake_process_runner.hpp"
#include "fixture.hpp"
#include "unit/render/render_support.hpp"

#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/scheduler_table.hpp>
#include <dljob/schedulers/spark.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace dljob::schedulers {
namespace {

using dljob::testing::scheduler_output;
using Words = std::vector<std::string>;

TEST(SparkParsers, TheApplicationIdIsHadoopsSubmittedLineInEverySparkVersion) {
    // Spark 1.5 logs only the sequence number on its own "Submitting application 12" line.
    EXPECT_EQ(parse_spark_submit_id(scheduler_output("spark-submit-1.5-yarn.txt")),
              "application_1456812345678_0012");
    EXPECT_EQ(parse_spark_submit_id(scheduler_output("spark-submit-2.x-yarn.txt")),
              "application_1539852791165_0007");
    // A report line names the id too, but only a submit line says one was made.
    EXPECT_FALSE(parse_spark_submit_id("INFO Client: Application report for "
                                       "application_1_0001 (state: ACCEPTED)\n"));
    EXPECT_FALSE(parse_spark_submit_id("Exception in thread \"main\" java.lang."
                                       "IllegalArgumentException: Required executor memory\n"));
}

TEST(SparkParsers, YarnsListIsSplitOnTabsNotColumns) {
    const auto listed = parse_yarn_list(scheduler_output("yarn-application-list.txt"));
    ASSERT_EQ(listed.size(), 4U);
    EXPECT_EQ(listed[0].id, "application_1456812345678_0012");
    EXPECT_EQ(listed[0].name, "dlj-0123456789");
    EXPECT_EQ(listed[0].state, "RUNNING");
    EXPECT_EQ(listed[0].final_state, "UNDEFINED");
    // A name longer than its padding shifts every column after it.
    EXPECT_EQ(listed[1].state, "FINISHED");
    EXPECT_EQ(listed[1].final_state, "SUCCEEDED");
}

TEST(SparkParsers, YarnsStatusIsReadByKeyWithItsDiagnosticsLines) {
    const auto status = parse_yarn_status(scheduler_output("yarn-application-status-failed.txt"));
    ASSERT_TRUE(status);
    EXPECT_EQ(status->id, "application_1456812345678_0010");
    EXPECT_EQ(status->state, "FINISHED");
    EXPECT_EQ(status->final_state, "FAILED");
    EXPECT_EQ(status->diagnostics.substr(0, status->diagnostics.find('\n')),
              "User application exited with status 3");
    EXPECT_NE(status->diagnostics.find("ApplicationMaster.runDriver"), std::string::npos);
    EXPECT_FALSE(parse_yarn_status("Application with id 'application_1_0001' doesn't exist in "
                                   "RM or Timeline Server.\n"));
}

TEST(SparkStates, YarnsStateAndFinalStatusMapOntoDljobs) {
    const auto state = [](const std::string& yarn, const std::string& final_state) {
        return map_yarn_state(YarnApplication{"application_1_0001", "n", yarn, final_state, ""})
            .state;
    };
    for (const char* waiting : {"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED"}) {
        EXPECT_EQ(state(waiting, "UNDEFINED"), JobState::pending) << waiting;
    }
    EXPECT_EQ(state("RUNNING", "UNDEFINED"), JobState::running);
    EXPECT_EQ(state("FINISHED", "SUCCEEDED"), JobState::completed);
    EXPECT_EQ(state("FINISHED", "FAILED"), JobState::failed);
    EXPECT_EQ(state("FINISHED", "UNDEFINED"), JobState::failed); // as Spark's own client has it
    EXPECT_EQ(state("FINISHED", "KILLED"), JobState::cancelled);
    EXPECT_EQ(state("FAILED", "FAILED"), JobState::failed);
    EXPECT_EQ(state("KILLED", "KILLED"), JobState::cancelled);
    const auto failed =
        map_yarn_state(YarnApplication{"application_1_0001", "n", "FINISHED", "FAILED",
                                       "User application exited with status 3\n"
                                       "\tat org.apache.spark"});
    EXPECT_EQ(failed.native_state, "FINISHED/FAILED");
    EXPECT_EQ(failed.reason, "User application exited with status 3");
}

class SparkAdapter : public ::testing::Test {
protected:
    dljob::testing::FakeProcessRunner runner;
    SparkScheduler spark{runner, SchedulerOptions{std::chrono::seconds(5), "alice"}};
};

TEST_F(SparkAdapter, SubmitsTheRenderedCommandNamedByTheToken) {
    runner.reply("spark-submit", 0, "", scheduler_output("spark-submit-1.5-yarn.txt"));
    SubmitRequest request;
    request.run_dir = "/runs/1";
    request.token = "0123456789";
    request.submit_argv = {"spark-submit", "--master", "yarn", "--name", "lenet", "driver.py"};
    auto submitted = spark.submit(request);
    ASSERT_TRUE(submitted) << submitted.error().message;
    EXPECT_EQ(submitted->scheduler_id, "application_1456812345678_0012");
    EXPECT_EQ(runner.calls.at(0),
              (Words{"spark-submit", "--master", "yarn", "--name", "dlj-0123456789", "driver.py"}));
}

TEST_F(SparkAdapter, PollsFindsAndCancelsThroughTheYarnCli) {
    runner.reply("yarn", 0, scheduler_output("yarn-application-list.txt"));
    auto polled = spark.poll({JobRef{"application_1456812345678_0012", "", "/runs/1", "t"},
                              JobRef{"application_1456812345678_0010", "", "/runs/2", "u"},
                              JobRef{"application_9_0001", "", "/runs/3", "v"}});
    ASSERT_TRUE(polled) << polled.error().message;
    EXPECT_EQ(polled->at("application_1456812345678_0012").state, JobState::running);
    EXPECT_EQ(polled->at("application_1456812345678_0010").state, JobState::failed);
    EXPECT_EQ(polled->count("application_9_0001"), 0U); // forgotten by the ResourceManager
    EXPECT_EQ(runner.calls.at(0), (Words{"yarn", "application", "-list", "-appStates", "ALL"}));

    runner.reply("yarn", 0, scheduler_output("yarn-application-list.txt"));
    auto found = spark.find_by_token(JobRef{"", "", "/nonexistent", "0123456789"});
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(*found);
    EXPECT_EQ((*found)->scheduler_id, "application_1456812345678_0012");

    runner.reply("yarn", 0, "Killing application application_1456812345678_0012\n");
    EXPECT_TRUE(spark.cancel(JobRef{"application_1456812345678_0012", "", "/runs/1", "t"}));
    EXPECT_EQ(runner.calls.back(),
              (Words{"yarn", "application", "-kill", "application_1456812345678_0012"}));
    runner.reply("yarn", 255, "",
                 "Application with id 'application_9_0001' doesn't exist in RM.\n");
    EXPECT_FALSE(spark.cancel(JobRef{"application_9_0001", "", "/runs/3", "v"}));
}

TEST_F(SparkAdapter, AStandaloneJobIsTheLocalRunnersAndNeverAsksYarn) {
    const auto run_dir = std::filesystem::temp_directory_path() /
                         ("dljob-spark-client-" + std::to_string(::getpid()));
    std::filesystem::remove_all(run_dir);
    std::filesystem::create_directories(run_dir);
    test::write_text(run_dir / "job.sh", "#!/bin/bash\nDLJOB_SPARK_CLIENT_MODE=1\n");
    SubmitRequest request;
    request.run_dir = run_dir.string();
    request.script_path = (run_dir / "job.sh").string();
    request.token = "0123456789";
    request.submit_argv = {"spark-submit",  "--master", "spark://m:7077",
                           "--deploy-mode", "client",   "driver.py"};
    auto submitted = spark.submit(request);
    ASSERT_TRUE(submitted) << submitted.error().message;
    ASSERT_EQ(runner.calls.size(), 1U);
    EXPECT_EQ(runner.calls.at(0).at(0), "bash"); // the local runner's wrapper, detached
    EXPECT_EQ(std::find(runner.calls.at(0).begin(), runner.calls.at(0).end(), "spark-submit"),
              runner.calls.at(0).end());
    // Its end is the wrapper's local_exit; no yarn is run for it.
    test::write_text(run_dir / LocalScheduler::exit_file, "0\n");
    auto polled = spark.poll({JobRef{submitted->scheduler_id, "", run_dir.string(), "0123456789"}});
    ASSERT_TRUE(polled) << polled.error().message;
    EXPECT_EQ(polled->at(submitted->scheduler_id).state, JobState::completed);
    // Never recorded as submitted: the script says it is a standalone job; found by the
    // wrapper's own record.
    test::write_text(run_dir / LocalScheduler::job_file, "pid=4242\ntoken=0123456789\n");
    auto found = spark.find_by_token(JobRef{"", "", run_dir.string(), "0123456789"});
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(*found);
    EXPECT_EQ((*found)->scheduler_id, "4242");
    EXPECT_EQ(runner.calls.size(), 1U); // still only the submit
    std::filesystem::remove_all(run_dir);
}

// The seed's job: LeNet, 2 CPU ranks, on 5 nodes of 12 vcores and 30 GB with Spark 1.5.2.
RenderRequest mapr_request(int ranks) {
    RenderRequest request = test::golden_request("mapr", "mnist");
    request.recipe.resources.gpus = 0;
    request.recipe.resources.ranks = ranks;
    request.recipe.needs.clear();
    return request;
}

// The words after `option` in the command.
std::string after(const Words& argv, const std::string& option) {
    const auto at = std::find(argv.begin(), argv.end(), option);
    return at == argv.end() || at + 1 == argv.end() ? std::string() : *(at + 1);
}

bool has_conf(const Words& argv, const std::string& line) {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
        if (argv[i] == "--conf" && argv[i + 1] == line) {
            return true;
        }
    }
    return false;
}

TEST(SparkRender, TheSeedsClusterGetsOneExecutorPerRankWithEveryUsefulCore) {
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(mapr_request(2), templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    const Words& argv = rendered->submit_argv;
    EXPECT_EQ(argv.front(), "/opt/mapr/spark/spark-1.5.2/bin/spark-submit");
    EXPECT_EQ(after(argv, "--master"), "yarn");
    EXPECT_EQ(after(argv, "--deploy-mode"), "cluster");
    EXPECT_EQ(after(argv, "--num-executors"), "2");
    EXPECT_EQ(after(argv, "--executor-cores"), "11"); // 12 vcores, one left to YARN
    EXPECT_TRUE(has_conf(argv, "spark.task.cpus=11"));
    EXPECT_TRUE(has_conf(argv, "spark.dynamicAllocation.enabled=false"));
    // Spark 1.5 has no barrier mode: the seed's settings, with the property's real name and a
    // unit (its 30 was milliseconds).
    EXPECT_TRUE(has_conf(argv, "spark.scheduler.minRegisteredResourcesRatio=1.0"));
    EXPECT_TRUE(has_conf(argv, "spark.scheduler.maxRegisteredResourcesWaitingTime=300s"));
    EXPECT_EQ(after(argv, "--ranks"), "2");
    EXPECT_EQ(after(argv, "--script"), "/scratch/dljob/runs/golden-run/job.sh");
    EXPECT_EQ(argv.at(argv.size() - 9), "/opt/dljob/share/dljob/spark/dljob_spark_driver.py");
    // Each rank's threads are its executor's cores (OMP_NUM_THREADS, which dltrain reads).
    EXPECT_EQ(after(argv, "--threads"), "11");
    // The ranks start through the driver, which gives each its Gloo rendezvous.
    EXPECT_NE(rendered->script.find(R"("${DLJOB_SPARK_LAUNCH:?set by the dljob Spark driver}" )"
                                    "--launch --ranks 2 -- "),
              std::string::npos);

    // The seed's fastest: 25 executors of 2 cores on its 60 vcores.
    RenderRequest five_nodes = mapr_request(25);
    five_nodes.recipe.resources.nodes = 5;
    auto seed = render::render_job(five_nodes, templates);
    ASSERT_TRUE(seed) << seed.error().message;
    EXPECT_EQ(after(seed->submit_argv, "--num-executors"), "25");
    EXPECT_EQ(after(seed->submit_argv, "--executor-cores"), "2");
}

TEST(SparkRender, GoldenScriptForTheSeedsCluster) {
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(mapr_request(2), templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    const auto golden = test::source_dir / "tests" / "golden" / "mapr" / "mnist-2-ranks.sh";
    const char* update = std::getenv("DLJOB_UPDATE_GOLDEN"); // NOLINT(concurrency-mt-unsafe)
    if (update != nullptr && std::string(update) == "1") {
        test::write_text(golden, rendered->script);
    }
    EXPECT_EQ(rendered->script, test::read_text(golden))
        << "regenerate with DLJOB_UPDATE_GOLDEN=1 and review the diff";
}

TEST(SparkRender, AStandaloneMasterRunsTheDriverHereInClientMode) {
    RenderRequest request = test::golden_request("spark-standalone", "mnist");
    request.recipe.resources.gpus = 0;
    request.recipe.resources.ranks = 2;
    request.recipe.needs.clear();
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(request, templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    const Words& argv = rendered->submit_argv;
    EXPECT_EQ(after(argv, "--master"), "spark://spark-master:7077");
    EXPECT_EQ(after(argv, "--deploy-mode"), "client");
    // No --num-executors on a standalone master: two executors of 15 cores are 30 in all.
    EXPECT_EQ(after(argv, "--total-executor-cores"), "30");
    EXPECT_EQ(after(argv, "--executor-cores"), "15");
    EXPECT_EQ(std::count(argv.begin(), argv.end(), "--num-executors"), 0);
    EXPECT_EQ(std::count(argv.begin(), argv.end(), "--queue"), 0);
    for (const auto& word : argv) {
        EXPECT_EQ(word.find("spark.yarn."), std::string::npos) << word;
    }
    EXPECT_TRUE(has_conf(argv, "spark.stage.maxConsecutiveAttempts=1")); // 3.5: barrier mode
    // The script, run here by the local runner, becomes the client-mode driver; the driver runs
    // it again with its socket set, and the ranks' compute side never reaches the exec.
    const std::string& script = rendered->script;
    const auto exec = script.find("\n    exec /opt/spark/bin/spark-submit --master "
                                  "spark://spark-master:7077 --deploy-mode client ");
    ASSERT_NE(exec, std::string::npos) << script;
    EXPECT_NE(script.find("\nDLJOB_SPARK_CLIENT_MODE=1\n"), std::string::npos);
    EXPECT_LT(exec, script.find("# ---- prologue"));
    EXPECT_NE(
        script.find(R"(if [ -z "${DLJOB_SPARK_SOCKET:-}" ] && [ "${1:-}" != "--dljob-compute" ])"),
        std::string::npos);
    // A YARN job's script has none of it.
    auto yarn = render::render_job(mapr_request(2), templates);
    ASSERT_TRUE(yarn) << yarn.error().message;
    EXPECT_EQ(yarn->script.find("DLJOB_SPARK_CLIENT_MODE"), std::string::npos);
}

TEST(SparkRender, TheReleaseTarballIsShippedToEveryExecutor) {
    RenderRequest request = mapr_request(2);
    request.site.partitions.front().scheduler_options["archive"] = {
        "maprfs:///apps/dljob-0.1.0-linux-x86_64.tar.gz"};
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(request, templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    const Words& argv = rendered->submit_argv;
    EXPECT_EQ(after(argv, "--archives"),
              "maprfs:///apps/dljob-0.1.0-linux-x86_64.tar.gz#dljob-release");
    EXPECT_EQ(after(argv, "--shipped-bin"), "dljob-release/dljob-0.1.0-linux-x86_64/bin");
    // spark-submit's options come before the application, the driver's after it.
    const auto driver =
        std::find(argv.begin(), argv.end(), "/opt/dljob/share/dljob/spark/dljob_spark_driver.py");
    EXPECT_LT(std::find(argv.begin(), argv.end(), "--archives"), driver);
    EXPECT_GT(std::find(argv.begin(), argv.end(), "--shipped-bin"), driver);
    // The compute side runs the shipped dltrain where the driver names its bin/.
    EXPECT_NE(rendered->script.find(R"(DLJOB_COMMAND[0]=$DLJOB_SHIPPED_BIN/dltrain)"),
              std::string::npos);
}

TEST(SparkDoctor, TheProfilesSparkSubmitAndTheYarnQueueAreChecked) {
    const SiteProfile mapr = test::load_site("mapr");
    const auto commands = family_of("spark").doctor_commands(mapr.partitions.front(), "alice");
    EXPECT_EQ(commands.programs, (Words{"/opt/mapr/spark/spark-1.5.2/bin/spark-submit", "yarn"}));
    EXPECT_EQ(commands.version,
              (Words{"/opt/mapr/spark/spark-1.5.2/bin/spark-submit", "--version"}));
    EXPECT_EQ(commands.query, (Words{"yarn", "queue", "-status", "default"}));
    EXPECT_EQ(commands.refusal_in_answer, "State : STOPPED");
    const SiteProfile standalone = test::load_site("spark-standalone");
    const auto client = family_of("spark").doctor_commands(standalone.partitions.front(), "alice");
    EXPECT_EQ(client.programs, (Words{"/opt/spark/bin/spark-submit"}));
    EXPECT_TRUE(client.query.empty());
}

TEST(SparkRender, BarrierModeFromSpark24) {
    RenderRequest request = mapr_request(2);
    request.site.partitions.front().scheduler_options["version"] = {"3.5.1"};
    auto templates = test::builtin_templates();
    auto rendered = render::render_job(request, templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    EXPECT_TRUE(has_conf(rendered->submit_argv, "spark.stage.maxConsecutiveAttempts=1"));
    EXPECT_FALSE(
        has_conf(rendered->submit_argv, "spark.scheduler.minRegisteredResourcesRatio=1.0"));
}

TEST(SparkRender, WhatDoesNotFitIsRefusedWithASentence) {
    RenderRequest request = mapr_request(2);
    request.after = JobDependency{7, "application_1_0001", "/runs/first", true};
    auto templates = test::builtin_templates();
    auto after_refused = render::render_job(request, templates);
    ASSERT_FALSE(after_refused);
    EXPECT_NE(after_refused.error().message.find("--after: site mapr (spark) cannot make a job "
                                                 "wait for another: YARN has no dependencies"),
              std::string::npos)
        << after_refused.error().message;
    const auto& family = family_of("spark");
    EXPECT_FALSE(family.refusal(JobFeature::sweep).empty());
    EXPECT_TRUE(family.array_options(ArraySpec{3, 0}).empty());
}

TEST(SparkSite, SettingsAreCheckedWhereTheyAreWritten) {
    SiteProfile site = test::load_site("mapr");
    ASSERT_TRUE(check_site(site));
    const auto problem = [&](const std::string& key, const Words& values) {
        SiteProfile changed = site;
        changed.partitions.front().scheduler_options[key] = values;
        changed.origins["partitions.yarn.scheduler_options." + key] = "mapr.yaml:30:7";
        auto checked = check_site(changed);
        return checked ? std::string() : checked.error().message + " | " + checked.error().hint;
    };
    // The seed's own line: no such property, and 30 would be milliseconds.
    EXPECT_NE(problem("conf", {"spark.scheduler.minRegisteredResourcesWaitingTime=30"})
                  .find("mapr.yaml:30:7: partitions.yarn.scheduler_options.conf: "
                        "spark.scheduler.minRegisteredResourcesWaitingTime is no Spark property"),
              std::string::npos);
    EXPECT_NE(problem("conf", {"spark.network.timeout=600"}).find("a bare number is milliseconds"),
              std::string::npos);
    EXPECT_NE(problem("conf", {"spark.task.cpus=4"}).find("set by dljob"), std::string::npos);
    EXPECT_EQ(problem("conf", {"spark.network.timeout=600s", "spark.ui.port=4050"}), "");
    EXPECT_NE(problem("version", {"one"}).find("is not a Spark version"), std::string::npos);
    EXPECT_NE(problem("deploy_mode", {"client"}).find("application master"), std::string::npos);
    // mapr says deploy_mode: cluster, which a standalone master cannot run.
    EXPECT_NE(problem("master", {"spark://master:7077"}).find("cannot run a Python driver"),
              std::string::npos);
    EXPECT_NE(problem("archive", {"/apps/dljob.tgz"}).find("not the path of a dljob release"),
              std::string::npos);
    EXPECT_EQ(problem("archive", {"maprfs:///apps/dljob-0.1.0-linux-x86_64.tar.gz"}), "");
    SiteProfile standalone = site;
    standalone.partitions.front().scheduler_options["master"] = {"spark://master:7077"};
    standalone.partitions.front().scheduler_options.erase("deploy_mode"); // client, its default
    EXPECT_TRUE(check_site(standalone));
    const auto standalone_problem = [&](const std::string& key, const Words& values) {
        SiteProfile changed = standalone;
        changed.partitions.front().scheduler_options[key] = values;
        auto checked = check_site(changed);
        return checked ? std::string() : checked.error().message;
    };
    EXPECT_NE(standalone_problem("archive", {"/apps/dljob-0.1.0-linux-x86_64.tar.gz"})
                  .find("does not ship archives"),
              std::string::npos);
    EXPECT_NE(problem("executors", {"3"}).find("not a Spark setting"), std::string::npos);
    SiteProfile srun = site;
    srun.partitions.front().launcher = LauncherKind::srun;
    EXPECT_FALSE(check_site(srun));
}

TEST(SparkShell, AnInteractiveSessionIsRefusedNamingWhatToDo) {
    const SiteProfile site = test::load_site("mapr");
    InteractiveRequest request;
    request.site = &site;
    request.partition = &site.partitions.front();
    auto plan = family_of("spark").interactive(request);
    ASSERT_TRUE(plan);
    EXPECT_NE(plan->refusal.find("no interactive session"), std::string::npos);
    EXPECT_NE(plan->alternative.find("dljob submit RECIPE --site mapr"), std::string::npos);
}

} // namespace
} // namespace dljob::schedulers
