// Issue 21, launch side: a train: recipe of several ranks (one per GPU, or resources.ranks CPU
// ranks) renders each family's launcher line for them. Golden files per site:
//   tests/golden/<site>/mnist-2-ranks.sh (regenerate with DLJOB_UPDATE_GOLDEN=1, as GoldenScripts)

#include "render_support.hpp"

#include <dljob/config/resolve.hpp>

#include <algorithm>
#include <cstdlib>

namespace dljob::test {
namespace {

// Two ranks on the site's default partition: two GPUs where it has them (on nodes of one GPU,
// two nodes), else two CPU ranks; local always CPU ranks (any laptop runs them).
RenderRequest two_ranks(const std::string& site) {
    RenderRequest request = golden_request(site, "mnist");
    const Partition* partition = request.site.find_partition("");
    if (site == "local" || partition->node.gpus == 0) {
        request.recipe.resources.gpus = 0;
        request.recipe.resources.ranks = 2;
    } else {
        request.recipe.resources.gpus = 2;
        if (partition->node.gpus < 2) {
            request.recipe.resources.nodes = 2;
        }
    }
    return request;
}

class TwoRanks : public ::testing::TestWithParam<std::string> {};

TEST_P(TwoRanks, MatchTheCommittedScript) {
    auto templates = builtin_templates();
    auto rendered = render::render_job(two_ranks(GetParam()), templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    EXPECT_EQ(rendered->resources.nodes * rendered->resources.tasks_per_node, 2);
    const auto golden = source_dir / "tests" / "golden" / GetParam() / "mnist-2-ranks.sh";
    const char* update = std::getenv("DLJOB_UPDATE_GOLDEN"); // NOLINT(concurrency-mt-unsafe)
    if (update != nullptr && std::string(update) == "1") {
        write_text(golden, rendered->script);
    }
    ASSERT_TRUE(std::filesystem::exists(golden))
        << golden << " is missing; regenerate with DLJOB_UPDATE_GOLDEN=1";
    EXPECT_EQ(rendered->script, read_text(golden)) << "rendered script differs from " << golden;
}

INSTANTIATE_TEST_SUITE_P(EverySite, TwoRanks, ::testing::ValuesIn(builtin_sites()),
                         [](const auto& param) { return param.param; });

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// Each family's way of starting the ranks, and the site's MPI module with them.
TEST(TwoRanksLaunch, EachFamilyStartsTheRanksItsWay) {
    auto templates = builtin_templates();
    const std::vector<std::pair<std::string, std::vector<std::string>>> expected{
        {"graham",
         {"#SBATCH --ntasks-per-node=2", "#SBATCH --cpus-per-task=16",
          "srun --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=16 --gpus-per-task=1 "
          "--kill-on-bad-exit=1 --label -- ",
          "dljob_module load openmpi"}},
        {"bigred2",
         {"#PBS -l nodes=2:ppn=16", "aprun -n 2 -N 1 -d 16 -cc none -b -- ",
          "dljob_module load cray-mpich"}},
        {"helios",
         {"#PBS -l nodes=1:gpus=2", "mpiexec -n 2 --tag-output -- ", "dljob_module load openmpi"}},
        {"sharcnet",
         {"sqsub -q gpu -f mpi -n 2 ", "mpirun -n 2 --tag-output -- ",
          "dljob_module load openmpi"}},
        {"local", {"mpirun.openmpi -n 2 --tag-output --oversubscribe --bind-to none -- "}},
    };
    for (const auto& [site, parts] : expected) {
        auto rendered = render::render_job(two_ranks(site), templates);
        ASSERT_TRUE(rendered) << site << ": " << rendered.error().message;
        for (const auto& part : parts) {
            EXPECT_TRUE(contains(rendered->script, part)) << site << ": " << part;
        }
        // One rank: no MPI module, no multi-rank launcher options.
        auto one = render::render_job(golden_request(site, "mnist"), templates);
        ASSERT_TRUE(one);
        EXPECT_FALSE(contains(one->script, "--kill-on-bad-exit")) << site;
        EXPECT_FALSE(contains(one->script, "dljob_module load openmpi")) << site;
        EXPECT_FALSE(contains(one->script, "dljob_module load cray-mpich")) << site;
    }
}

// Several ranks on one node each run the compute side's staging at once: a pack's link is
// replaced atomically and never removed under another rank; a plain tree is refused (each rank
// would copy it into one directory). One rank per node keeps the one-rank lines.
TEST(TwoRanksLaunch, RanksSharingANodeStageSafely) {
    auto templates = builtin_templates();
    auto shared = render::render_job(two_ranks("graham"), templates);
    ASSERT_TRUE(shared) << shared.error().message;
    EXPECT_TRUE(contains(shared->script, R"(mv -Tf -- "$DLJOB_DATA_DIR.$$" "$DLJOB_DATA_DIR")"));
    EXPECT_FALSE(contains(shared->script, R"(rm -f -- "$DLJOB_DATA_DIR")"));
    EXPECT_FALSE(contains(shared->script, "cp -R --"));
    EXPECT_TRUE(contains(shared->script, "is not a pack, and several ranks on this node"));
    RenderRequest one_per_node = two_ranks("graham");
    one_per_node.recipe.resources.nodes = 2; // a GPU, so one rank, on each of two nodes
    auto apart = render::render_job(one_per_node, templates);
    ASSERT_TRUE(apart) << apart.error().message;
    EXPECT_EQ(apart->resources.tasks_per_node, 1);
    EXPECT_TRUE(contains(apart->script, R"(rm -f -- "$DLJOB_DATA_DIR")"));
    EXPECT_TRUE(contains(apart->script, "cp -R --"));
}

// The multi-rank scripts pass the same shell checks as the one-rank ones.
TEST(TwoRanksLaunch, ScriptsPassBashAndShellcheck) {
    if (std::system("command -v shellcheck >/dev/null 2>&1") !=
        0) { // NOLINT(concurrency-mt-unsafe)
        GTEST_SKIP() << "no shellcheck";
    }
    std::string files;
    for (const auto& site : builtin_sites()) {
        files += " " + (source_dir / "tests" / "golden" / site / "mnist-2-ranks.sh").string();
    }
    EXPECT_EQ(std::system(("bash -n" + files).c_str()), 0);               // NOLINT
    EXPECT_EQ(std::system(("shellcheck -S warning" + files).c_str()), 0); // NOLINT
}

// A command: recipe starts its own processes: its GPUs stay one process per node.
TEST(TwoRanksLaunch, ACommandRecipeKeepsOneProcessPerNode) {
    RenderRequest request = golden_request("graham", "pytorch-mnist");
    request.recipe.resources.gpus = 2;
    auto templates = builtin_templates();
    auto rendered = render::render_job(request, templates);
    ASSERT_TRUE(rendered) << rendered.error().message;
    EXPECT_EQ(rendered->resources.tasks_per_node, 1);
    EXPECT_TRUE(contains(rendered->script, "#SBATCH --ntasks-per-node=1"));
}

Result<ResolvedResources> resolve(const RenderRequest& request) {
    return config::resolve_resources(request.recipe, request.site,
                                     *request.site.find_partition(""));
}

TEST(Ranks, CpuRanksSpreadEvenlyOverTheNodes) {
    RenderRequest request = golden_request("slurm", "mnist");
    request.recipe.resources.gpus = 0;
    request.recipe.resources.ranks = 6;
    request.recipe.resources.nodes = 2;
    request.recipe.resources.cores_per_gpu.reset();
    request.recipe.resources.memory.reset();
    auto res = resolve(request);
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->tasks_per_node, 3);
    EXPECT_EQ(res->cores_per_node, 3); // a core per rank unless cores says more
}

TEST(Ranks, RefusesRanksThatDoNotFit) {
    RenderRequest request = golden_request("slurm", "mnist");
    request.recipe.resources.gpus = 0;
    request.recipe.resources.cores_per_gpu.reset();
    request.recipe.resources.memory.reset();
    request.recipe.resources.ranks = 3;
    request.recipe.resources.nodes = 2;
    auto uneven = resolve(request);
    ASSERT_FALSE(uneven);
    EXPECT_TRUE(contains(uneven.error().message, "resources.ranks")) << uneven.error().message;
    EXPECT_TRUE(contains(uneven.error().message, "do not divide evenly"));

    request.recipe.resources.ranks = 4;
    request.recipe.resources.nodes = 1;
    request.recipe.resources.cores = 2;
    auto cramped = resolve(request);
    ASSERT_FALSE(cramped);
    EXPECT_TRUE(contains(cramped.error().message, "resources.cores")) << cramped.error().message;

    RenderRequest command = golden_request("slurm", "pytorch-mnist");
    command.recipe.resources.gpus = 0;
    command.recipe.resources.cores_per_gpu.reset();
    command.recipe.resources.memory.reset();
    command.recipe.resources.ranks = 2;
    auto refused = resolve(command);
    ASSERT_FALSE(refused);
    EXPECT_TRUE(contains(refused.error().message, "resources.ranks")) << refused.error().message;
}

// A GPU training that does not ask the site for CUDA and cuDNN is told so at render (issue 21:
// a job that asks for GPUs trains on GPUs or says why not, before it waits in a queue).
TEST(TwoRanksLaunch, AGpuTrainingWithoutCudaNeedsIsWarnedOnASiteWithModules) {
    auto templates = builtin_templates();
    RenderRequest request = golden_request("graham", "mnist");
    request.recipe.resources.gpus = 1;
    auto with_needs = render::render_job(request, templates);
    ASSERT_TRUE(with_needs) << with_needs.error().message;
    for (const auto& note : with_needs->notes) {
        EXPECT_EQ(note.find("CUDA plugin"), std::string::npos) << note;
    }
    request.recipe.needs = {"cuda"};
    auto without = render::render_job(request, templates);
    ASSERT_TRUE(without) << without.error().message;
    const auto note = std::find_if(without->notes.begin(), without->notes.end(),
                                   [](const std::string& n) { return contains(n, "CUDA plugin"); });
    ASSERT_NE(note, without->notes.end());
    EXPECT_TRUE(contains(*note, "no cudnn")) << *note;
    EXPECT_TRUE(contains(without->script, "# note: the recipe asks for GPUs")) << without->script;
    // A CPU training, or a site without modules, has nothing to load.
    request.recipe.resources.gpus = 0;
    auto cpu = render::render_job(request, templates);
    ASSERT_TRUE(cpu) << cpu.error().message;
    EXPECT_TRUE(std::none_of(cpu->notes.begin(), cpu->notes.end(),
                             [](const std::string& n) { return contains(n, "CUDA plugin"); }));
}

// gpus: 4 with nodes: left out, on nodes of fewer GPUs: the fewest whole nodes that hold them, one
// rank per GPU, shown by render (it was refused at submit with "ask for nodes: 2 explicitly",
// while `dljob shell --gpus 4` worked the nodes out itself).
TEST(GpusOverNodes, MoreGpusThanANodeHasRenderWholeNodesWithARankPerGpu) {
    auto templates = builtin_templates();
    RenderRequest graham = golden_request("graham", "mnist");
    graham.recipe.resources.gpus = 4;
    auto two = render::render_job(graham, templates);
    ASSERT_TRUE(two) << two.error().message;
    EXPECT_EQ(two->resources.nodes, 2);
    EXPECT_EQ(two->resources.tasks_per_node, 2);
    const auto header = parse_directives(two->script, "#SBATCH").header;
    for (const char* directive : {"--nodes=2", "--ntasks-per-node=2", "--gpus-per-node=p100:2"}) {
        EXPECT_NE(std::find(header.begin(), header.end(), directive), header.end())
            << directive << "\n"
            << two->script;
    }
    EXPECT_TRUE(contains(two->script, "srun --nodes=2 --ntasks=4 --ntasks-per-node=2"))
        << two->script;
    EXPECT_TRUE(contains(two->script, "# note: 4 GPUs on nodes of 2 GPU(s) each: 2 whole nodes, "
                                      "one dltrain rank per GPU (2 per node)"))
        << two->script;
    EXPECT_TRUE(contains(two->script, "--device cuda")) << two->script;

    RenderRequest bigred2 = golden_request("bigred2", "mnist");
    bigred2.recipe.resources.gpus = 4;
    auto four = render::render_job(bigred2, templates);
    ASSERT_TRUE(four) << four.error().message;
    EXPECT_EQ(four->resources.nodes, 4);
    EXPECT_TRUE(contains(four->script, "nodes=4")) << four->script;
    EXPECT_TRUE(contains(four->script, "aprun -n 4 -N 1")) << four->script;

    // What cannot be divided over whole nodes is still refused, saying what can.
    graham.recipe.resources.gpus = 3;
    auto three = render::render_job(graham, templates);
    ASSERT_FALSE(three);
    EXPECT_TRUE(contains(three.error().hint, "gpus: 4 (2 nodes)")) << three.error().hint;
    // One node's worth needs no note.
    graham.recipe.resources.gpus = 2;
    auto one = render::render_job(graham, templates);
    ASSERT_TRUE(one) << one.error().message;
    EXPECT_FALSE(contains(one->script, "whole nodes")) << one->script;
}

} // namespace
} // namespace dljob::test
