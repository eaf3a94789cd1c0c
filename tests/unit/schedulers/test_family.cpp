// The scheduler families and launchers (schedulers/family.hpp, launcher.hpp): one answer per
// family, used alike by the batch script and `dljob shell`.
#include "support/run_process.hpp"
#include "unit/render/render_support.hpp"

#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/launcher.hpp>
#include <dljob/schedulers/scheduler_table.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dljob {
namespace {

std::string line_starting(const std::string& text, const std::string& prefix) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind(prefix, 0) == 0) {
            return line;
        }
    }
    return {};
}

TEST(SchedulerFamily, EachNameHasItsOwnFamily) {
    std::vector<std::string> names;
    for (const char* name : {"slurm", "pbs", "moab", "sqsub", "local", "spark"}) {
        const auto& family = schedulers::family_of(name);
        EXPECT_EQ(family.name(), name);
        EXPECT_EQ(std::string(family.template_name()), std::string(name) + ".sh");
        names.emplace_back(name);
    }
    EXPECT_EQ(&schedulers::family_of("torque"), &schedulers::family_of("pbs"));
    EXPECT_EQ(schedulers::find_family("lsf"), nullptr);
    EXPECT_THROW((void)schedulers::family_of("lsf"), std::logic_error);
    std::sort(names.begin(), names.end());
    std::vector<std::string> listed = schedulers::scheduler_families();
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, names);
}

// The batch script and an interactive session name the job by one expression per family; the
// two copies had drifted (Moab's and sqsub's batch scripts did not look at SLURM_JOB_ID, which
// is all the shims the tests run them on set, so their job_identity had no job id).
TEST(SchedulerFamily, BatchScriptAndSessionShareTheJobIdExpression) {
    auto templates = test::builtin_templates();
    for (const auto& site : test::builtin_sites()) {
        auto request = test::golden_request(site, "mnist");
        auto rendered = render::render_job(request, templates);
        ASSERT_TRUE(rendered) << site << ": " << rendered.error().message;
        const std::string batch = line_starting(rendered->script, "DLJOB_JOB_ID=");
        ASSERT_FALSE(batch.empty()) << site;
        schedulers::SessionFiles files;
        files.site = site;
        files.scheduler = rendered->scheduler;
        files.token = request.job_token;
        auto rc = schedulers::session_rc(files, rendered->script);
        ASSERT_TRUE(rc) << site;
        EXPECT_EQ(line_starting(*rc, "DLJOB_JOB_ID="), batch) << site;
        if (rendered->scheduler != "local") {
            EXPECT_NE(batch.find("SLURM_JOB_ID"), std::string::npos) << site << ": " << batch;
        }
    }
}

// `dljob shell` asks for the resources the batch job asks for, from the family's own list,
// without the batch-only options.
TEST(SchedulerFamily, ResourceOptionsAreTheSubmitOptionsWithoutBatchOnlyOnes) {
    auto templates = test::builtin_templates();
    auto request = test::golden_request("graham", "mnist");
    request.recipe.mail.address = "someone@example.org";
    auto rendered = render::render_job(request, templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    const auto& options = rendered->resource_options;
    ASSERT_FALSE(options.empty());
    for (const auto& option : options) {
        EXPECT_NE(std::find(rendered->submit_argv.begin(), rendered->submit_argv.end(), option),
                  rendered->submit_argv.end())
            << option;
        for (const char* batch_only : {"--output=", "--open-mode=", "--signal=", "--no-requeue",
                                       "--mail-user=", "--mail-type="}) {
            EXPECT_NE(option.rfind(batch_only, 0), 0U) << option;
        }
    }
}

TEST(SchedulerFamily, DependencyOptionsGoWhereTheSubmitCommandTakesThem) {
    std::vector<std::string> sbatch{"sbatch", "--parsable", "/r/job.sh"};
    schedulers::family_of("slurm").add_submit_options(sbatch, {"--dependency=afterok:7"});
    EXPECT_EQ(sbatch, (std::vector<std::string>{"sbatch", "--parsable", "--dependency=afterok:7",
                                                "/r/job.sh"}));
    std::vector<std::string> sqsub{"sqsub", "-q", "gpu", "--nompirun", "/bin/bash", "/r/job.sh"};
    schedulers::family_of("sqsub").add_submit_options(sqsub, {"-w", "7"});
    EXPECT_EQ(sqsub, (std::vector<std::string>{"sqsub", "-q", "gpu", "-w", "7", "--nompirun",
                                               "/bin/bash", "/r/job.sh"}));
    JobDependency after;
    after.scheduler_id = "7";
    after.ok = false;
    EXPECT_EQ(schedulers::family_of("moab").dependency_options(after),
              (std::vector<std::string>{"-W", "depend=afterany:7"}));
    EXPECT_TRUE(schedulers::family_of("local").dependency_options(after).empty());
}

schedulers::LaunchGeometry geometry(int nodes, int tasks_per_node, int cores_per_task,
                                    int node_cores) {
    schedulers::LaunchGeometry g;
    g.nodes = nodes;
    g.tasks_per_node = tasks_per_node;
    g.cores_per_task = cores_per_task;
    g.node_cores = node_cores;
    return g;
}

TEST(Launcher, EachLauncherStartsOneTaskPerSlot) {
    auto g = geometry(2, 4, 3, 16);
    g.gpus_per_task = 1;
    EXPECT_EQ(schedulers::launcher_of(LauncherKind::srun).command(g, "prog"),
              "srun --nodes=2 --ntasks=8 --ntasks-per-node=4 --cpus-per-task=3 --gpus-per-task=1 "
              "--kill-on-bad-exit=1 --label -- prog");
    EXPECT_EQ(schedulers::launcher_of(LauncherKind::aprun).command(g, "prog"),
              "aprun -n 8 -N 4 -d 4 -cc none -b -- prog");
    EXPECT_EQ(schedulers::launcher_of(LauncherKind::mpirun).command(g, "prog"),
              "mpirun -n 8 -- prog");
    EXPECT_EQ(schedulers::launcher_of(LauncherKind::none).command(g, "prog"), "prog");
    EXPECT_TRUE(schedulers::launcher_of(LauncherKind::aprun).script_off_compute_node());
    EXPECT_FALSE(schedulers::launcher_of(LauncherKind::srun).script_off_compute_node());
}

// One task: the launch lines as they were before several ranks existed.
TEST(Launcher, OneTaskPerNodeKeepsTheSingleRankLine) {
    const auto g = geometry(2, 1, 8, 16);
    EXPECT_EQ(schedulers::launcher_of(LauncherKind::srun).command(g, "prog"),
              "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=8 "
              "--kill-on-bad-exit=1 --label -- prog");
    const auto one = geometry(1, 1, 8, 16);
    EXPECT_EQ(schedulers::launcher_of(LauncherKind::srun).command(one, "prog"),
              "srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=8 -- prog");
    EXPECT_EQ(schedulers::launcher_of(LauncherKind::aprun).command(one, "prog"),
              "aprun -n 1 -N 1 -d 16 -cc none -b -- prog");
}

// The site's MPI launcher by its flavour's name, and its flags.
TEST(Launcher, TheSitesMpiLauncherAndFlags) {
    Partition partition;
    partition.node.cores = 8;
    partition.mpi.launcher = "mpirun.openmpi";
    partition.mpi.flags = {"--oversubscribe", "--bind-to", "none"};
    ResolvedResources res;
    res.tasks_per_node = 2;
    res.cores_per_node = 2;
    const auto& launcher = schedulers::job_launcher(partition, res);
    EXPECT_EQ(launcher.kind(), LauncherKind::mpirun);
    EXPECT_EQ(launcher.command(schedulers::launch_geometry(partition, res), "prog"),
              "mpirun.openmpi -n 2 --oversubscribe --bind-to none -- prog");
    res.tasks_per_node = 1; // one rank: no launcher, no MPI
    EXPECT_EQ(schedulers::job_launcher(partition, res).kind(), LauncherKind::none);
    EXPECT_TRUE(schedulers::launch_geometry(partition, res).flags.empty());
}

// Each MPI flavor tags its ranks' output, and on several PBS nodes spreads them T per node over
// $PBS_NODEFILE; an MPI of unknown flavor gets neither, and sqsub's MPI finds its hosts itself.
TEST(Launcher, TheMpiFlavorTagsAndPlacesTheRanks) {
    Partition partition;
    partition.scheduler = "pbs";
    partition.launcher = LauncherKind::mpirun;
    partition.node.cores = 16;
    ResolvedResources res;
    res.nodes = 2;
    res.tasks_per_node = 4;
    res.cores_per_node = 16;
    const auto line = [&](MpiFlavor flavor, const std::string& program) {
        partition.mpi.flavor = flavor;
        partition.mpi.launcher = program;
        return schedulers::job_launcher(partition, res)
            .command(schedulers::launch_geometry(partition, res), "prog");
    };
    EXPECT_EQ(line(MpiFlavor::openmpi, "mpirun"),
              "mpirun -n 8 --tag-output --map-by ppr:4:node --hostfile \"$PBS_NODEFILE\" -- prog");
    EXPECT_EQ(line(MpiFlavor::mpich, "mpiexec"),
              "mpiexec -n 8 -prepend-rank -ppn 4 -f \"$PBS_NODEFILE\" -- prog");
    EXPECT_EQ(line(MpiFlavor::unknown, "mpiexec"), "mpiexec -n 8 -- prog");
    partition.scheduler = "moab";
    EXPECT_EQ(line(MpiFlavor::mpich, "mpiexec"),
              "mpiexec -n 8 -prepend-rank -ppn 4 -f \"$PBS_NODEFILE\" -- prog");
    partition.scheduler = "sqsub";
    EXPECT_EQ(line(MpiFlavor::openmpi, "mpirun"),
              "mpirun -n 8 --tag-output --map-by ppr:4:node -- prog");
    res.nodes = 1; // one node: nothing to place
    partition.scheduler = "pbs";
    EXPECT_EQ(line(MpiFlavor::openmpi, "mpirun"), "mpirun -n 4 --tag-output -- prog");
}

TEST(Launcher, GeometryComesFromTheResolvedResources) {
    Partition partition;
    partition.node.cores = 16;
    ResolvedResources res;
    res.nodes = 3;
    res.tasks_per_node = 2;
    res.cores_per_node = 8;
    res.gpus_per_node = 2;
    const auto g = schedulers::launch_geometry(partition, res);
    EXPECT_EQ(g.nodes, 3);
    EXPECT_EQ(g.tasks_per_node, 2);
    EXPECT_EQ(g.cores_per_task, 4);
    EXPECT_EQ(g.gpus_per_task, 1);
    EXPECT_EQ(g.node_cores, 16);
}

} // namespace
} // namespace dljob

namespace dljob {
namespace {

// Sweeps are one job array where the family has them (docs/schedulers.md), in each one's own form.
TEST(SchedulerFamily, ArrayOptionsAreEachFamilysOwnForm) {
    const ArraySpec limited{3, 2};
    const ArraySpec unlimited{3, 0};
    using Words = std::vector<std::string>;
    EXPECT_EQ(schedulers::family_of("slurm").array_options(limited), Words{"--array=0-2%2"});
    EXPECT_EQ(schedulers::family_of("slurm").array_options(unlimited), Words{"--array=0-2"});
    EXPECT_EQ(schedulers::family_of("pbs").array_options(limited), (Words{"-t", "0-2%2"}));
    EXPECT_EQ(schedulers::family_of("pbs").array_options(unlimited), (Words{"-t", "0-2"}));
    EXPECT_EQ(schedulers::family_of("moab").array_options(limited), (Words{"-t", "dljob[0-2]%2"}));
    EXPECT_EQ(schedulers::family_of("moab").array_options(unlimited), (Words{"-t", "dljob[0-2]"}));
    // No arrays: a sweep is one job per point (sqsub), or limited by dependencies (local).
    EXPECT_TRUE(schedulers::family_of("sqsub").array_options(limited).empty());
    EXPECT_TRUE(schedulers::family_of("local").array_options(limited).empty());
}

TEST(SchedulerFamily, AnArrayTaskIsNamedAsItsSchedulerNamesIt) {
    const auto& slurm = schedulers::family_of("slurm");
    EXPECT_EQ(slurm.array_task_id("123", 4), "123_4");
    EXPECT_EQ(slurm.array_of("123_4"), "123");
    EXPECT_EQ(slurm.array_of("123"), "123");
    const auto& pbs = schedulers::family_of("pbs");
    EXPECT_EQ(pbs.array_task_id("123[].server", 4), "123[4].server"); // Torque's answer
    EXPECT_EQ(pbs.array_task_id("123", 4), "123[4]");                 // the Slurm wrappers'
    EXPECT_EQ(pbs.array_of("123[4].server"), "123[].server");
    EXPECT_EQ(pbs.array_of("123[4]"), "123[]");
    EXPECT_EQ(pbs.array_of("123.server"), "123.server");
    const auto& moab = schedulers::family_of("moab");
    EXPECT_EQ(moab.array_task_id("Moab.45", 3), "Moab.45[3]");
    EXPECT_EQ(moab.array_of("Moab.45[3]"), "Moab.45");
    EXPECT_EQ(schedulers::family_of("sqsub").array_of("77"), "77");
}

TEST(SchedulerFamily, APendingJobsDependencyIsChangedWithTheFamilysCommand) {
    JobDependency after;
    after.scheduler_id = "901";
    using Words = std::vector<std::string>;
    EXPECT_EQ(schedulers::family_of("slurm").retarget_dependency("900", after),
              (Words{"scontrol", "update", "JobId=900", "Dependency=afterok:901"}));
    EXPECT_EQ(schedulers::family_of("pbs").retarget_dependency("900.server", after),
              (Words{"qalter", "-W", "depend=afterok:901", "900.server"}));
    after.ok = false;
    after.scheduler_id = "Moab.12";
    EXPECT_EQ(schedulers::family_of("moab").retarget_dependency("Moab.11", after),
              (Words{"mjobctl", "-m", "depend=afterany:Moab.12", "Moab.11"}));
    EXPECT_TRUE(schedulers::family_of("sqsub").retarget_dependency("5", after).empty());
    EXPECT_TRUE(schedulers::family_of("local").retarget_dependency("5", after).empty());
}

// The array script, run for real as each family's scheduler would run one task: the task's
// point runs its own script, in place of the array script, with its output in the point's
// job.log and DLJOB_ARRAY_TASK_ID naming the task; an index that is no point fails loudly.
struct ArrayRun {
    std::string kind;
    std::string env; // what the scheduler sets in task 1 of array 77
    std::string directive;
    std::string task_id;
};

class ArrayScript : public ::testing::TestWithParam<ArrayRun> {};

TEST_P(ArrayScript, EachTaskRunsItsPointsScriptWithItsLogAndId) {
    const ArrayRun& run = GetParam();
    char pattern[] = "/tmp/dljob-array-XXXXXX";
    const char* made = mkdtemp(pattern);
    ASSERT_NE(made, nullptr);
    const std::filesystem::path root(made);
    schedulers::ArrayScriptFacts facts;
    facts.sweep = "sw-abc123";
    facts.directives = {"--job-name=lenet"};
    facts.array = ArraySpec{2, 1};
    for (const char* point : {"p0", "p1"}) {
        std::filesystem::create_directories(root / point);
        std::ofstream(root / point / "job.sh")
            << "echo \"ran $0 as ${DLJOB_ARRAY_TASK_ID:-none} pid $$\"\n";
        facts.scripts.push_back((root / point / "job.sh").string());
    }
    const auto& family = schedulers::family_of(run.kind);
    const std::string script = schedulers::array_script(family, facts);
    EXPECT_EQ(line_starting(script, run.directive), run.directive) << script;
    EXPECT_EQ(line_starting(script, std::string(family.directive_prefix()) + " --job-name"),
              std::string(family.directive_prefix()) + " --job-name=lenet");
    std::ofstream(root / "array.sh") << script;
    auto ran = test::run_shell(
        fmt::format("cd {} && env -i PATH=/usr/bin:/bin {} bash array.sh", root.string(), run.env));
    EXPECT_EQ(ran.exit_code, 0) << ran.output;
    EXPECT_EQ(ran.output, ""); // all of it went to the point's log
    std::ifstream log(root / "p1" / "job.log");
    std::string line;
    std::getline(log, line);
    EXPECT_EQ(line.substr(0, line.find(" pid ")),
              fmt::format("ran {} as {}", (root / "p1" / "job.sh").string(), run.task_id));
    EXPECT_FALSE(std::filesystem::exists(root / "p0" / "job.log"));
    auto stray = test::run_shell(
        fmt::format("cd {} && env -i PATH=/usr/bin:/bin {} bash array.sh", root.string(),
                    std::string(run.env).replace(run.env.find("=1"), 2, "=7")));
    EXPECT_EQ(stray.exit_code, 1);
    EXPECT_NE(stray.output.find("array task index '7' is no point of sweep sw-abc123"),
              std::string::npos)
        << stray.output;
    std::filesystem::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(
    EveryFamilyWithArrays, ArrayScript,
    ::testing::Values(
        ArrayRun{"slurm", "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_JOB_ID=77", "#SBATCH --array=0-1%1",
                 "77_1"},
        // Torque itself, then Slurm's Torque wrappers (which set only Slurm's variables).
        ArrayRun{"pbs", "PBS_ARRAYID=1 PBS_JOBID=77[1].server", "#PBS -t 0-1%1", "77[1].server"},
        ArrayRun{"pbs", "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_JOB_ID=77", "#PBS -t 0-1%1", "77[1]"},
        ArrayRun{"moab", "MOAB_JOBARRAYINDEX=1 MOAB_JOBID=Moab.77[1]", "#PBS -t dljob[0-1]%1",
                 "Moab.77[1]"},
        ArrayRun{"moab", "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_JOB_ID=77", "#PBS -t dljob[0-1]%1",
                 "Moab.77[1]"}));

} // namespace
} // namespace dljob
