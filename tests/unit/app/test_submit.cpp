// `dljob submit`: the site detected from the host name when none is named, and `--set`
// overrides reaching the job script and the run directory's record of the recipe. A real SQLite
// store; the scheduler is the local one, whose detached start the fake runner records.

#include "unit/schedulers/fake_process_runner.hpp"

#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/jobs/submit.hpp>
#include <dljob/app/jobs/sweep.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace dljob::app {
namespace {

const std::filesystem::path source_dir{DLJOB_SOURCE_DIR};
const std::filesystem::path fashion = source_dir / "recipes" / "fashion-mnist.yaml";

class Submit : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-submit-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir / "config");
        // The user's own profiles must not take part: an empty config home.
        remember("XDG_CONFIG_HOME", (dir / "config").string());
        remember("DLJOB_RUNS_DIR", (dir / "runs").string());
        remember("DLJOB_SITE_PROFILES_DIR", "");
    }
    void TearDown() override {
        for (const auto& [name, value] : saved) {
            if (value) {
                ::setenv(name.c_str(), value->c_str(), 1);
            } else {
                ::unsetenv(name.c_str());
            }
        }
        std::filesystem::remove_all(dir);
    }
    void remember(const std::string& name, const std::string& value) {
        const char* old = std::getenv(name.c_str()); // NOLINT(concurrency-mt-unsafe): tests
        saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
        if (value.empty()) {
            ::unsetenv(name.c_str());
        } else {
            ::setenv(name.c_str(), value.c_str(), 1);
        }
    }
    std::filesystem::path write_site(const std::string& name, const std::string& hostnames,
                                     const std::string& extra = "") {
        const auto path = dir / (name + ".yaml");
        std::ofstream(path) << "name: " << name << "\nhostnames: " << hostnames << "\n"
                            << extra
                            << "modules: {system: none}\n"
                               "partitions:\n"
                               "  cpu:\n"
                               "    scheduler: slurm\n"
                               "    launcher: none\n"
                               "    node: {cores: 8, memory: 16G, gpus: 2}\n"
                               "    walltime: {default: \"01:00:00\", max: \"04:00:00\"}\n";
        return path;
    }
    JobContext context() {
        auto store = adapters::SqliteJobStore::open(dir / "jobs.db");
        EXPECT_TRUE(store) << (store ? "" : store.error().message);
        auto runner = std::make_unique<dljob::testing::FakeProcessRunner>();
        runner_ = runner.get();
        return JobContext(std::move(store.value()), std::move(runner));
    }

    std::filesystem::path dir;
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    dljob::testing::FakeProcessRunner* runner_ = nullptr;
    // `local` is the machine dljob runs on; the tests that submit the bundled recipes (one GPU
    // each) there, about other things, run on this workstation whatever machine runs them.
    const FixedMachine workstation{[] {
        MachineFacts facts;
        facts.cores = 64;
        facts.memory = MemorySize::from_mib(256 * 1024);
        facts.gpus = 8;
        facts.gpus_found = "8 GPU(s) (the tests' workstation)";
        return facts;
    }()};
};

TEST_F(Submit, DetectsTheSiteWhoseHostnamePatternMatchesElseLocal) {
    const auto lab = write_site("lab", R"(["login*.lab.example.org", "gpu-node?"])");
    EXPECT_EQ(detect_site(SiteCatalog({lab}), "login2.lab.example.org"), "lab");
    EXPECT_EQ(detect_site(SiteCatalog({lab}), "LOGIN2.Lab.Example.ORG"),
              "lab"); // host names ignore case
    EXPECT_EQ(detect_site(SiteCatalog({lab}), "gpu-node7"), "lab");
    EXPECT_EQ(detect_site(SiteCatalog({lab}), "gpu-node17"), "local");
    EXPECT_EQ(detect_site(SiteCatalog({lab}), "workstation"), "local");
    // The built-in profiles' own patterns.
    EXPECT_EQ(detect_site(SiteCatalog(), "gra-login1"), "graham");
    EXPECT_EQ(detect_site(SiteCatalog(), "login1.bigred2.uits.iu.edu"), "bigred2");
    EXPECT_EQ(detect_site(SiteCatalog(), "my-laptop"), "local");
}

TEST_F(Submit, ASiteFileThatDoesNotLoadIsSkippedWhenDetecting) {
    const auto broken = dir / "broken.yaml";
    std::ofstream(broken) << "name: broken\nhostnames: [\"box*\"]\npartitions: 3\n";
    EXPECT_EQ(detect_site(SiteCatalog({broken}), "box1"), "local");
}

TEST_F(Submit, WithoutSiteSubmitUsesTheDetectedOne) {
    const auto lab = write_site("lab", R"(["login*.lab.example.org"])");
    auto jobs = context();
    SubmitOptions options;
    options.recipe = fashion;
    options.site_files = {lab};
    options.machine = &workstation;
    options.hostname = "login1.lab.example.org";
    options.dry_run = true;
    auto outcome = submit_recipe(jobs, options);
    ASSERT_TRUE(outcome) << outcome.error().message;
    EXPECT_EQ(outcome->job.site, "lab");
    EXPECT_EQ(outcome->job.scheduler, "slurm");
    options.hostname = "elsewhere";
    auto local = submit_recipe(jobs, options);
    ASSERT_TRUE(local) << local.error().message;
    EXPECT_EQ(local->job.site, "local");
    EXPECT_EQ(local->job.scheduler, "local");
}

// submit reads its recipe once: the read the sweep check made is the one the job is made of,
// not the file read again (here the file is gone by then, as an edited file would be changed).
TEST_F(Submit, TheRecipeReadForTheSweepCheckIsTheOneSubmitted) {
    const auto copy = dir / "mine.yaml";
    std::filesystem::copy_file(fashion, copy);
    auto jobs = context();
    SubmitOptions options;
    options.recipe = copy;
    options.site = "local";
    options.machine = &workstation;
    options.overrides = {"train.max_iter=123"};
    options.dry_run = true;
    auto read = read_submit_recipe(options);
    ASSERT_TRUE(read) << read.error().message;
    auto axes = submit_sweep_axes(*read, options, {});
    ASSERT_TRUE(axes) << axes.error().message;
    EXPECT_TRUE(axes->empty());
    std::filesystem::remove(copy);
    options.read = std::move(*read);
    auto outcome = submit_recipe(jobs, options);
    ASSERT_TRUE(outcome) << outcome.error().message;
    EXPECT_NE(outcome->rendered.script.find("--max-iter 123"), std::string::npos)
        << outcome->rendered.script;
    options.read.reset(); // without it, the file is read (and now missing)
    EXPECT_FALSE(submit_recipe(jobs, options));
}

TEST_F(Submit, RenderShellAndDoctorResolveTheSiteAsSubmitDoes) {
    // One resolver for every verb: render used to fall back to local where submit detected the
    // site by host name, so `render` showed a script that `submit` would not run.
    const auto lab = write_site("lab", R"(["login*.lab.example.org"])");
    RenderOptions render;
    render.recipe = fashion;
    render.site_files = {lab};
    render.machine = &workstation;
    render.hostname = "login1.lab.example.org";
    auto rendered = render_recipe(render);
    ASSERT_TRUE(rendered) << rendered.error().message;
    EXPECT_EQ(rendered->scheduler, "slurm");
    render.hostname = "elsewhere";
    auto local = render_recipe(render);
    ASSERT_TRUE(local) << local.error().message;
    EXPECT_EQ(local->scheduler, "local");

    SiteChoice choice;
    choice.site_files = {lab};
    choice.hostname = "login7.lab.example.org";
    auto site = resolve_site(choice);
    ASSERT_TRUE(site) << site.error().message;
    EXPECT_EQ(site->name, "lab");
    choice.site = "local"; // named wins over detected
    choice.machine = &workstation;
    auto named = resolve_site(choice);
    ASSERT_TRUE(named) << named.error().message;
    EXPECT_EQ(named->name, "local");
}

TEST_F(Submit, ANamedSiteIsFoundWithoutReadingTheOtherProfiles) {
    // A broken profile of another name in the user's folder does not stop loading a built-in
    // one (only NAME.yaml is read), and naming the broken one shows its own error.
    std::filesystem::create_directories(dir / "config" / "dljob" / "sites");
    std::ofstream(dir / "config" / "dljob" / "sites" / "mine.yaml")
        << "name: mine\npartitions: 3\n";
    const SiteCatalog catalog;
    auto local = catalog.load("local");
    ASSERT_TRUE(local) << local.error().message;
    EXPECT_EQ(local->name, "local");
    auto mine = catalog.load("mine");
    ASSERT_FALSE(mine);
    EXPECT_NE(mine.error().message.find("mine.yaml"), std::string::npos) << mine.error().message;
    auto none = catalog.load("nowhere");
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().hint.find("mine"), std::string::npos) << none.error().hint;
    EXPECT_NE(none.error().hint.find("graham"), std::string::npos) << none.error().hint;
}

TEST_F(Submit, OverridesReachTheScriptAndAreRecordedWithTheRecipe) {
    auto jobs = context();
    SubmitOptions options;
    options.recipe = fashion;
    options.site = "local";
    options.machine = &workstation;
    options.overrides = {"train.max_iter=200", "resources.memory=1G"};
    auto outcome = submit_recipe(jobs, options);
    ASSERT_TRUE(outcome) << outcome.error().message;
    EXPECT_NE(outcome->rendered.script.find("--max-iter 200"), std::string::npos);
    auto record = util::read_file(std::filesystem::path(outcome->job.run_dir) / "recipe.yaml");
    ASSERT_TRUE(record);
    const auto original = util::read_file(fashion);
    ASSERT_TRUE(original);
    EXPECT_EQ(record->rfind(*original, 0), 0U); // the file's text, then the overrides
    EXPECT_NE(record->find("\n# --set train.max_iter=200\n# --set resources.memory=1G\n"),
              std::string::npos)
        << *record;
    // What the job needs to submit its next attempt itself, without the store (issue 25).
    auto chain = util::read_file(std::filesystem::path(outcome->job.run_dir) / "chain.json");
    ASSERT_TRUE(chain);
    const auto json = nlohmann::json::parse(*chain);
    EXPECT_EQ(json.at("scheduler"), "local");
    EXPECT_EQ(json.at("script_path"), outcome->job.script_path);
    EXPECT_EQ(json.at("max_continuations"), outcome->job.max_continuations);
    EXPECT_EQ(json.at("submit_argv"), outcome->job.submit_argv);
    ASSERT_EQ(runner_->detached.size(), 1U);
}

TEST_F(Submit, ABadOverrideChangesNothing) {
    auto jobs = context();
    SubmitOptions options;
    options.recipe = fashion;
    options.site = "local";
    options.machine = &workstation;
    options.overrides = {"train.max_iter=-5"};
    auto outcome = submit_recipe(jobs, options);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::config_invalid);
    EXPECT_NE(outcome.error().message.find("--set:1:16: train.max_iter"), std::string::npos)
        << outcome.error().message;
    EXPECT_FALSE(std::filesystem::exists(dir / "runs"));
    auto all = jobs.store().list(JobQuery{});
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->empty());
    EXPECT_TRUE(runner_->calls.empty());
}

// `local` is the machine dljob runs on: a recipe asking for a GPU it does not have, or for more
// cores or memory, is refused before anything is written (it used to be accepted against a
// made-up workstation of 64 cores, 256G and 8 GPUs, and trained on the CPU), with the fix.
TEST_F(Submit, LocalRefusesWhatThisMachineDoesNotHave) {
    MachineFacts facts;
    facts.cores = 2;
    facts.memory = MemorySize::from_mib(23 * 1024);
    facts.gpus = 0;
    facts.gpus_found = "no /dev/nvidia[0-9]* device: no NVIDIA driver or GPU";
    const FixedMachine machine(facts);
    auto jobs = context();
    for (const std::vector<std::string>& overrides :
         {std::vector<std::string>{},
          {"resources.gpus=0", "resources.cores=48"},
          {"resources.gpus=0", "resources.memory=200G"}}) {
        SubmitOptions options;
        options.recipe = fashion; // gpus: 1, memory: 8G
        options.site = "local";
        options.machine = &machine;
        options.overrides = overrides;
        auto outcome = submit_recipe(jobs, options);
        ASSERT_FALSE(outcome) << overrides.size();
        EXPECT_EQ(outcome.error().code, ErrorCode::config_invalid);
        EXPECT_NE(outcome.error().message.find("but this machine has"), std::string::npos)
            << outcome.error().message;
        RenderOptions render;
        render.recipe = fashion;
        render.site = "local";
        render.machine = &machine;
        render.overrides = overrides;
        EXPECT_FALSE(render_recipe(render)) << "render refuses it too";
    }
    SubmitOptions gpu;
    gpu.recipe = fashion;
    gpu.site = "local";
    gpu.machine = &machine;
    auto refused = submit_recipe(jobs, gpu);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("resources.gpus: 1 GPU(s) requested, but this machine "
                                           "has none"),
              std::string::npos)
        << refused.error().message;
    EXPECT_NE(refused.error().hint.find("--set resources.gpus=0"), std::string::npos)
        << refused.error().hint;
    EXPECT_FALSE(std::filesystem::exists(dir / "runs"));
    auto all = jobs.store().list(JobQuery{});
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->empty());
    EXPECT_TRUE(runner_->calls.empty());

    // What the hint says is what runs: on the machine's CPUs, with --device cpu.
    gpu.overrides = {"resources.gpus=0"};
    gpu.dry_run = true;
    auto cpu = submit_recipe(jobs, gpu);
    ASSERT_TRUE(cpu) << cpu.error().message;
    EXPECT_NE(cpu->rendered.script.find("--device cpu"), std::string::npos);
}

TEST_F(Submit, ARefusedSubmissionLeavesNoRowAndNoRunDirectory) {
    const auto lab = write_site("lab", R"(["login*.lab.example.org"])");
    auto jobs = context();
    runner_->reply("sbatch", 1, "",
                   "sbatch: error: Batch job submission failed: Invalid partition name specified");
    SubmitOptions options;
    options.recipe = fashion;
    options.site = "lab";
    options.site_files = {lab};
    auto outcome = submit_recipe(jobs, options);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::scheduler_rejected) << outcome.error().message;
    EXPECT_NE(outcome.error().message.find("Invalid partition name"), std::string::npos);
    ASSERT_EQ(runner_->calls.back().front(), "sbatch"); // it ran, with the script now gone
    auto all = jobs.store().list(JobQuery{});
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->empty());
    EXPECT_TRUE(std::filesystem::is_empty(dir / "runs")) << "a run directory was left behind";
}

TEST_F(Submit, AnUnansweredSubmissionKeepsItsRowAndItsScript) {
    // sbatch timed out: the job may exist, so status must be able to find it by its token and
    // the scheduler may still run its script.
    const auto lab = write_site("lab", R"(["login*.lab.example.org"])");
    auto jobs = context();
    runner_->reply_timeout("sbatch");
    SubmitOptions options;
    options.recipe = fashion;
    options.site = "lab";
    options.site_files = {lab};
    auto outcome = submit_recipe(jobs, options);
    ASSERT_FALSE(outcome);
    auto all = jobs.store().list(JobQuery{});
    ASSERT_TRUE(all);
    ASSERT_EQ(all->size(), 1U);
    EXPECT_EQ(all->front().phase, SubmitPhase::submit_unknown);
    EXPECT_TRUE(std::filesystem::exists(all->front().script_path));
}

TEST_F(Submit, ANetworkConfigDltrainRefusesIsRefusedBeforeAnythingIsWritten) {
    auto jobs = context();
    runner_->reply(default_dltrain_binary().string(), 3, "",
                   "dltrain: error: lenet.yaml:27: layer 'conv1' (Convolution): kernel_size 50 "
                   "does not fit the 28x28 input from layer 'mnist' (pad 0)\n");
    SubmitOptions options;
    options.recipe = fashion;
    options.site = "local";
    options.machine = &workstation;
    auto outcome = submit_recipe(jobs, options);
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code, ErrorCode::config_invalid);
    // The recipe's train.config position leads, then dltrain's own file and line.
    std::ifstream recipe(fashion);
    std::string config_at;
    std::string text;
    for (int line = 1; std::getline(recipe, text); ++line) {
        if (text.rfind("  config: ", 0) == 0) {
            config_at = fmt::format("{}:11", line);
        }
    }
    const std::string config_key = fashion.string() + ":" + config_at + ": train.config: ";
    EXPECT_EQ(outcome.error().message.rfind(config_key + "lenet.yaml:27: layer 'conv1'", 0), 0U)
        << outcome.error().message;
    ASSERT_EQ(runner_->calls.size(), 1U);
    EXPECT_EQ(runner_->calls[0][1], "check");
    EXPECT_EQ(runner_->calls[0][3], (source_dir / "recipes/networks/lenet.yaml").string());
    EXPECT_TRUE(runner_->detached.empty()); // nothing started
    auto all = jobs.store().list(JobQuery{});
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->empty());
    EXPECT_FALSE(std::filesystem::exists(dir / "runs"));
}

TEST_F(Submit, ANetworkConfigThatCannotBeCheckedHereIsANote) {
    auto jobs = context(); // the fake runner has no reply for dltrain: it "cannot run" it
    SubmitOptions options;
    options.recipe = fashion;
    options.site = "local";
    options.machine = &workstation;
    options.dry_run = true;
    auto outcome = submit_recipe(jobs, options);
    ASSERT_TRUE(outcome) << outcome.error().message;
    const auto& notes = outcome->rendered.notes;
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& note) {
        return note.find("not checked here") != std::string::npos;
    })) << "no note";
}

// A walltime no longer than the checkpoint warning: the job would be warned after a second.
// Said once, at submit; a walltime past the warning says nothing. The submitted job (and
// what it records) is the same either way.
TEST_F(Submit, AWalltimeWithinTheCheckpointWarningIsANote) {
    auto jobs = context();
    const auto notes_for = [&](const std::string& walltime) {
        SubmitOptions options;
        options.recipe = fashion;
        options.site = "local";
        options.machine = &workstation;
        options.dry_run = true;
        options.overrides = {"resources.walltime=" + walltime};
        auto outcome = submit_recipe(jobs, options);
        EXPECT_TRUE(outcome) << outcome.error().message;
        std::string all;
        for (const auto& note : outcome->rendered.notes) {
            all += note + "\n";
        }
        return all;
    };
    const std::string short_walltime = notes_for("00:01:30");
    EXPECT_NE(short_walltime.find("resources.walltime 00:01:30 is not longer than the 120 s "
                                  "checkpoint warning"),
              std::string::npos)
        << short_walltime;
    EXPECT_EQ(notes_for("00:02:01").find("checkpoint warning"), std::string::npos);
}

} // namespace
} // namespace dljob::app

namespace dljob::app {
namespace {

class SweepArray : public Submit {
protected:
    /// The fashion recipe for a Slurm site "lab" written from `extra` profile text.
    SubmitOptions lab_options(const std::string& extra = {}) {
        SubmitOptions options;
        options.recipe = fashion;
        options.site = "lab";
        options.site_files = {write_site("lab", R"(["login*.lab.example.org"])", extra)};
        return options;
    }
    std::vector<Job> rows(JobContext& jobs) {
        auto all = jobs.store().list(JobQuery{});
        EXPECT_TRUE(all);
        auto listed = all ? *all : std::vector<Job>{};
        std::sort(listed.begin(), listed.end(),
                  [](const Job& a, const Job& b) { return a.id < b.id; });
        return listed;
    }
    std::size_t sbatch_calls() const {
        return static_cast<std::size_t>(
            std::count_if(runner_->calls.begin(), runner_->calls.end(),
                          [](const auto& argv) { return argv.front() == "sbatch"; }));
    }
    const std::vector<SweepAxis> axes{{"train.max_iter", {"10", "20", "30"}, "--sweep 1"}};
};

// One sbatch for the whole sweep; each point keeps its own run directory, script and record,
// and its record names its task.
TEST_F(SweepArray, ASlurmSweepIsOneArrayWhosePointsHoldTheirTasksIds) {
    auto jobs = context();
    runner_->reply("sbatch", 0, "42\n");
    SubmitOptions options = lab_options();
    auto swept = submit_sweep(jobs, options, axes, 2);
    ASSERT_TRUE(swept) << swept.error().message;
    ASSERT_EQ(sbatch_calls(), 1U);
    const auto& argv = *std::find_if(runner_->calls.begin(), runner_->calls.end(),
                                     [](const auto& a) { return a.front() == "sbatch"; });
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--array=0-2%2"), argv.end());
    const auto points = rows(jobs);
    ASSERT_EQ(points.size(), 3U);
    for (std::size_t i = 0; i < points.size(); ++i) {
        EXPECT_EQ(points[i].scheduler_id, fmt::format("42_{}", i));
        EXPECT_EQ(points[i].phase, SubmitPhase::submitted);
        EXPECT_EQ(points[i].sweep, swept->sweep);
        EXPECT_TRUE(std::filesystem::exists(points[i].script_path));
        EXPECT_EQ(swept->points[i].job.scheduler_id, points[i].scheduler_id);
    }
    EXPECT_EQ(argv.back(), (std::filesystem::path(points[0].run_dir) / "array.sh").string());
    const auto script = util::read_file(argv.back());
    ASSERT_TRUE(script);
    for (const auto& point : points) {
        EXPECT_NE(script->find(point.script_path), std::string::npos);
    }
}

// What would be submitted, and nothing more: every point's script, the array's script that
// runs them and the one sbatch line; no row, no run directory, no scheduler call.
TEST_F(SweepArray, ADryRunShowsTheArrayAndItsOneSbatchLineAndDoesNothing) {
    auto jobs = context();
    SubmitOptions options = lab_options();
    options.dry_run = true;
    auto swept = submit_sweep(jobs, options, axes, 2);
    ASSERT_TRUE(swept) << swept.error().message;
    EXPECT_EQ(sbatch_calls(), 0U);
    EXPECT_TRUE(rows(jobs).empty());
    EXPECT_FALSE(std::filesystem::exists(dir / "runs") && !std::filesystem::is_empty(dir / "runs"))
        << "a dry run wrote a run directory";
    ASSERT_EQ(swept->points.size(), 3U);
    const auto& argv = swept->array_command;
    ASSERT_FALSE(argv.empty());
    EXPECT_EQ(argv.front(), "sbatch");
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--array=0-2%2"), argv.end());
    EXPECT_EQ(argv.back(),
              (std::filesystem::path(swept->points[0].job.run_dir) / "array.sh").string());
    for (const auto& point : swept->points) {
        EXPECT_NE(swept->array_script.find(point.job.script_path), std::string::npos);
        EXPECT_NE(point.rendered.script.find("--max-iter"), std::string::npos);
    }
}

// Points that ask for different resources would be jobs of their own: no array, and a note.
TEST_F(SweepArray, ADryRunOfPointsWithTheirOwnResourcesShowsNoArrayAndSaysWhy) {
    auto jobs = context();
    SubmitOptions options = lab_options();
    options.dry_run = true;
    const std::vector<SweepAxis> walltimes{
        {"resources.walltime", {"01:00:00", "02:00:00"}, "--sweep 1"}};
    auto swept = submit_sweep(jobs, options, walltimes, 0);
    ASSERT_TRUE(swept) << swept.error().message;
    EXPECT_TRUE(swept->array_script.empty());
    EXPECT_TRUE(swept->array_command.empty());
    const auto& notes = swept->points.front().rendered.notes;
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& note) {
        return note.find("point 2 asks for other resources") != std::string::npos;
    }));
    EXPECT_EQ(sbatch_calls(), 0U);
    EXPECT_TRUE(rows(jobs).empty());
}

TEST_F(SweepArray, ARefusedArrayLeavesNoRowAndNoRunDirectory) {
    auto jobs = context();
    runner_->reply("sbatch", 1, "", "sbatch: error: Batch job submission failed: bad array\n");
    SubmitOptions options = lab_options();
    auto swept = submit_sweep(jobs, options, axes, 0);
    ASSERT_FALSE(swept);
    EXPECT_EQ(swept.error().code, ErrorCode::scheduler_rejected);
    EXPECT_NE(swept.error().message.find("bad array"), std::string::npos);
    EXPECT_TRUE(rows(jobs).empty());
    EXPECT_TRUE(std::filesystem::is_empty(dir / "runs")) << "a run directory was left behind";
}

TEST_F(SweepArray, MorePointsThanTheSitesArraysTakeIsRefusedBeforeAnythingIsSubmitted) {
    const auto lab =
        write_site("lab", R"(["login*.lab.example.org"])", "scheduler: {max_array_size: 2}\n");
    auto jobs = context();
    SubmitOptions options;
    options.recipe = fashion;
    options.site = "lab";
    options.site_files = {lab};
    auto swept = submit_sweep(jobs, options, axes, 2);
    ASSERT_FALSE(swept);
    EXPECT_EQ(swept.error().code, ErrorCode::usage);
    EXPECT_NE(swept.error().message.find("sweep of 3 points: site lab takes job arrays of at "
                                         "most 2 tasks (scheduler.max_array_size, " +
                                         lab.string() + ":3:"),
              std::string::npos)
        << swept.error().message;
    EXPECT_EQ(sbatch_calls(), 0U);
    EXPECT_TRUE(rows(jobs).empty());
    EXPECT_TRUE(std::filesystem::is_empty(dir / "runs"));
}

} // namespace
} // namespace dljob::app
