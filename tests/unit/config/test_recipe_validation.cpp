// Validation errors name file, line, column, key path, what was expected and the choices.

#include <dljob/config/recipe_loader.hpp>
#include <dljob/config/resolve.hpp>
#include <dljob/config/site_loader.hpp>
#include <dljob/schedulers/scheduler_table.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace dljob::config {
namespace {

const std::filesystem::path source_dir{DLJOB_SOURCE_DIR};

class RecipeValidation : public ::testing::Test {
protected:
    Result<Recipe> load(const std::string& text) {
        auto doc = parse_yaml(text, "r.yaml");
        if (!doc) {
            return fail(doc.error());
        }
        return recipe_from_yaml(*doc, "/recipes");
    }
    static constexpr const char* base =
        "name: t\ndata:\n  source: /d\ntrain:\n  config: net.yaml\n";
};

TEST_F(RecipeValidation, AcceptsMinimalTrainRecipeAndResolvesConfigAgainstRecipeFolder) {
    auto recipe = load(base);
    ASSERT_TRUE(recipe) << recipe.error().message;
    EXPECT_EQ(recipe->train.config, "/recipes/net.yaml");
}

TEST_F(RecipeValidation, FineTuneWeightsResolveLikeTheConfigUnlessTheJobExpandsThem) {
    auto relative = load(std::string(base) + "  weights: ../models/lenet.ckpt\n");
    ASSERT_TRUE(relative) << relative.error().message;
    EXPECT_EQ(relative->train.weights, "/models/lenet.ckpt");
    for (const char* kept : {"~/models/lenet.ckpt", "$SCRATCH/lenet.ckpt", "/abs/lenet.ckpt"}) {
        auto recipe = load(std::string(base) + "  weights: " + kept + "\n");
        ASSERT_TRUE(recipe) << recipe.error().message;
        EXPECT_EQ(recipe->train.weights, kept);
    }
    auto bad = load(std::string(base) + "  weights: \"a\\tb\"\n");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message.rfind("r.yaml:6:12: train.weights: expected a dltrain "
                                        "checkpoint path without control characters",
                                        0),
              0U)
        << bad.error().message;
}

TEST_F(RecipeValidation, RejectsUnknownKeyListingValidOnesAndClosest) {
    auto recipe = load(std::string(base) + "resources:\n  gpu: 2\n");
    ASSERT_FALSE(recipe);
    EXPECT_EQ(recipe.error().message.rfind("r.yaml:7:3: resources.gpu: unknown key; valid keys "
                                           "here: gpus, nodes",
                                           0),
              0U)
        << recipe.error().message;
    EXPECT_EQ(recipe.error().hint, "did you mean 'gpus'?");
}

TEST_F(RecipeValidation, RejectsWrongTypeSayingWhatWasExpected) {
    auto recipe = load(std::string(base) + "resources:\n  gpus: four\n");
    ASSERT_FALSE(recipe);
    EXPECT_EQ(recipe.error().message,
              "r.yaml:7:9: resources.gpus: expected a whole number from 0 to 1024, got 'four'");
    auto quoted = load(std::string(base) + "resources:\n  gpus: \"4\"\n");
    ASSERT_FALSE(quoted);
    EXPECT_NE(quoted.error().message.find("resources.gpus"), std::string::npos);
}

TEST_F(RecipeValidation, RejectsOutOfRangeValues) {
    auto recipe = load(std::string(base) + "resources:\n  gpus: -1\n");
    ASSERT_FALSE(recipe);
    EXPECT_EQ(recipe.error().message,
              "r.yaml:7:9: resources.gpus: expected a whole number from 0 to 1024, got -1");
}

TEST_F(RecipeValidation, RejectsInvalidChoiceListingChoices) {
    auto recipe = load(std::string(base) + "  stage_to: ssd\n");
    ASSERT_FALSE(recipe) << "stage_to under train must be rejected";
    auto data = load("name: t\ndata:\n  source: /d\n  stage_to: ssd\ntrain:\n  config: n.yaml\n");
    ASSERT_FALSE(data);
    EXPECT_EQ(data.error().message,
              "r.yaml:4:13: data.stage_to: expected one of none, node-local, ramdisk, got 'ssd'");
}

TEST_F(RecipeValidation, KeepStagedIsABooleanDefaultingToFalse) {
    auto plain =
        load("name: t\ndata:\n  source: /d\n  stage_to: ramdisk\ntrain:\n  config: n.yaml\n");
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_FALSE(plain->data.keep_staged);
    auto kept = load("name: t\ndata:\n  source: /d\n  stage_to: ramdisk\n  keep_staged: true\n"
                     "train:\n  config: n.yaml\n");
    ASSERT_TRUE(kept) << kept.error().message;
    EXPECT_TRUE(kept->data.keep_staged);
    auto bad = load("name: t\ndata:\n  source: /d\n  keep_staged: sometimes\ntrain:\n"
                    "  config: n.yaml\n");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message.rfind("r.yaml:4:16: data.keep_staged:", 0), 0U)
        << bad.error().message;
}

// A tar archive is extracted on the node: read in place it would reach the program as one file.
TEST_F(RecipeValidation, ATarSourceNeedsStagingAndSaysSoAtTheKey) {
    auto in_place = load("name: t\ndata:\n  source: $HOME/images.tar\n  stage_to: none\n"
                         "command:\n  argv: [python3, t.py]\n");
    ASSERT_FALSE(in_place);
    EXPECT_EQ(in_place.error().message.rfind("r.yaml:4:13: data.stage_to:", 0), 0U)
        << in_place.error().message;
    EXPECT_NE(in_place.error().message.find("$HOME/images.tar is a tar archive"), std::string::npos)
        << in_place.error().message;
    EXPECT_NE(in_place.error().message.find("expected node-local or ramdisk"), std::string::npos);
    auto by_format = load("name: t\ndata:\n  source: /d/images.bin\n  format: archive\n"
                          "train:\n  config: n.yaml\n");
    ASSERT_FALSE(by_format);
    EXPECT_NE(by_format.error().message.find("data.stage_to"), std::string::npos);
    for (const char* name : {"a.tar", "a.tar.gz", "a.tgz", "a.tar.xz", "a.tar.zst", "a.tar.bz2"}) {
        auto staged = load(fmt::format("name: t\ndata:\n  source: /d/{}\n  stage_to: ramdisk\n"
                                       "train:\n  config: n.yaml\n",
                                       name));
        ASSERT_TRUE(staged) << staged.error().message;
        EXPECT_TRUE(is_tar_archive(staged->data)) << name;
    }
    auto tree = load(base);
    ASSERT_TRUE(tree) << tree.error().message;
    EXPECT_FALSE(is_tar_archive(tree->data));
}

TEST_F(RecipeValidation, RejectsBothTrainAndCommand) {
    auto recipe = load(std::string(base) + "command:\n  argv: [python3]\n");
    ASSERT_FALSE(recipe);
    EXPECT_NE(recipe.error().message.find("exactly one of train:"), std::string::npos);
}

TEST_F(RecipeValidation, RejectsCoresWithGpus) {
    auto recipe = load(std::string(base) + "resources:\n  gpus: 1\n  cores: 4\n");
    ASSERT_FALSE(recipe);
    EXPECT_NE(recipe.error().message.find("r.yaml:8:10: resources.cores:"), std::string::npos)
        << recipe.error().message;
}

TEST_F(RecipeValidation, RejectsNamesWithShellCharacters) {
    auto recipe = load("name: \"x;rm\"\ndata:\n  source: /d\ntrain:\n  config: n.yaml\n");
    ASSERT_FALSE(recipe);
    EXPECT_EQ(recipe.error().message.rfind("r.yaml:1:7: name: expected 1 to 64 of", 0), 0U)
        << recipe.error().message;
}

TEST_F(RecipeValidation, BuiltInRecipesAreValid) {
    for (const char* name : {"mnist", "fashion-mnist", "pytorch-mnist", "cifar10-quick",
                             "cifar10-resnet20", "googlenet-imagenet", "lenet-finetune"}) {
        auto recipe = load_recipe(source_dir / "recipes" / (std::string(name) + ".yaml"));
        EXPECT_TRUE(recipe) << name << ": " << recipe.error().message;
    }
}

// Every integer field of a recipe: a whole number past an int is too large (or too small), said
// with the field's range, not "not a whole number".
TEST_F(RecipeValidation, IntegersPastAnIntAreTooLargeOrTooSmallWithTheRange) {
    struct Case {
        std::string yaml; // appended to `base`, with V for the value
        std::string key;
        std::string range;
    };
    const std::vector<Case> cases = {
        {"resources:\n  gpus: V\n", "resources.gpus", "0 to 1024"},
        {"resources:\n  nodes: V\n", "resources.nodes", "1 to 10000"},
        {"resources:\n  cores_per_gpu: V\n", "resources.cores_per_gpu", "1 to 256"},
        {"resources:\n  gpus: 0\n  cores: V\n", "resources.cores", "1 to 1024"},
        {"  threads: V\n", "train.threads", "1 to 1024"},
        {"  max_iter: V\n", "train.max_iter", "1 to 1000000000"},
        {"checkpoint:\n  max_continuations: V\n", "checkpoint.max_continuations", "0 to 1000"},
        {"checkpoint:\n  signal_margin: V\n", "checkpoint.signal_margin", "30 to 3600"},
    };
    for (const auto& c : cases) {
        for (const auto& [value, which] :
             std::vector<std::pair<std::string, std::string>>{{"2147483648", "large"},
                                                              {"99999999999999999999999", "large"},
                                                              {"-2147483649", "small"}}) {
            std::string yaml = c.yaml;
            yaml.replace(yaml.find('V'), 1, value);
            auto recipe = load(std::string(base) + yaml);
            ASSERT_FALSE(recipe) << yaml;
            EXPECT_NE(recipe.error().message.find(fmt::format(
                          "{}: expected a whole number from {}, got {}, which is too {}", c.key,
                          c.range, value, which)),
                      std::string::npos)
                << recipe.error().message;
            EXPECT_EQ(recipe.error().message.rfind("r.yaml:", 0), 0U) << recipe.error().message;
        }
    }
    auto walltime = load(std::string(base) + "resources:\n  walltime: 2147483647\n");
    ASSERT_FALSE(walltime);
    EXPECT_EQ(walltime.error().message,
              "r.yaml:7:13: resources.walltime: invalid walltime '2147483647': 2147483647 is too "
              "large: each field may be at most 999999999");
    auto memory =
        load(std::string(base) + "resources:\n  memory: 1" + std::string(400, '0') + "G\n");
    ASSERT_FALSE(memory);
    EXPECT_NE(memory.error().message.find("between 1M and about 1000 PB"), std::string::npos)
        << memory.error().message;
}

// dltrain check and the job read train.config; a FIFO there would block them (validate waited
// for dltrain check's 60 s timeout), so what stat sees that is not a regular file is refused.
TEST_F(RecipeValidation, ANetworkConfigThatIsNotARegularFileIsRefused) {
    const auto dir =
        std::filesystem::temp_directory_path() / fmt::format("dljob-recipe-config-{}", ::getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "folder.yaml");
    ASSERT_EQ(::mkfifo((dir / "fifo.yaml").c_str(), 0600), 0);
    for (const auto& [name, kind] : std::vector<std::pair<std::string, std::string>>{
             {"fifo.yaml", "a FIFO (named pipe)"}, {"folder.yaml", "a directory"}}) {
        const auto path = (dir / name).string();
        auto recipe = load("name: t\ndata:\n  source: /d\ntrain:\n  config: " + path + "\n");
        ASSERT_FALSE(recipe) << name;
        EXPECT_EQ(recipe.error().message,
                  fmt::format("r.yaml:5:11: train.config: {} is {}, not a network config file",
                              path, kind));
    }
    std::filesystem::remove_all(dir);
}

// sweep: (issue 22) is a mapping of recipe keys, dotted or nested as --set makes them, to a
// list of values or a range A..B; each value is checked as its key's and an error points at it.
TEST_F(RecipeValidation, ASweepBlockIsTheKeysAndValuesInTheFilesOrder) {
    auto recipe = load(std::string(base) + "sweep:\n"
                                           "  train.base_lr: [0.1, 0.01]\n"
                                           "  train:\n"
                                           "    random_seed: 1..3\n"
                                           "  name: [\"a\", b]\n");
    ASSERT_TRUE(recipe) << recipe.error().message;
    ASSERT_EQ(recipe->sweep.size(), 3U);
    EXPECT_EQ(recipe->sweep[0].key, "train.base_lr");
    EXPECT_EQ(recipe->sweep[0].values, (std::vector<std::string>{"0.1", "0.01"}));
    EXPECT_EQ(recipe->sweep[0].origin, "r.yaml:7:3");
    EXPECT_EQ(recipe->sweep[1].key, "train.random_seed");
    EXPECT_EQ(recipe->sweep[1].values, (std::vector<std::string>{"1", "2", "3"}));
    // A quoted value stays a string when it is passed on as --set text.
    EXPECT_EQ(recipe->sweep[2].values, (std::vector<std::string>{"\"a\"", "b"}));
    // The recipe's own values are the file's: the sweep changes only its points.
    EXPECT_TRUE(recipe->train.solver.empty());
    auto none = load(std::string(base) + "sweep:\n");
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_TRUE(none->sweep.empty());
}

TEST_F(RecipeValidation, ABadSweepNamesFileLineColumnAndTheSweptKey) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"sweep:\n  train.base_lr: [0.1, -1]\n",
         "r.yaml:7:24: sweep.train.base_lr[1]: expected a number >= 0, got '-1'"},
        {"sweep:\n  train.base_rate: [0.1]\n", "r.yaml:7:3: sweep.train.base_rate: unknown key"},
        {"sweep:\n  resources.gpus: [1, four]\n",
         "r.yaml:7:23: sweep.resources.gpus[1]: expected a whole number from 0 to 1024"},
        {"sweep:\n  train.random_seed: -3..2\n",
         "r.yaml:7:22: sweep.train.random_seed: expected a whole number from 0"},
        {"sweep:\n  train.random_seed: 1..x\n",
         "r.yaml:7:22: sweep.train.random_seed: expected a list of values like [0.1, 0.01], or a "
         "range"},
        {"sweep:\n  train.base_lr: []\n", "r.yaml:7:18: sweep.train.base_lr: expected at least"},
        {"sweep:\n  train.random_seed: -9000000000000000000..9000000000000000000\n",
         "r.yaml:7:22: sweep.train.random_seed: more than 1000 values"},
        {"sweep:\n  train.base_lr: [[0.1]]\n",
         "r.yaml:7:19: sweep.train.base_lr[0]: expected a value (a number or a word), got a "
         "list"},
        {"sweep:\n  train.base_lr: [0.1]\n  train:\n    base_lr: [0.2]\n",
         "r.yaml:9:5: sweep.train.base_lr: train.base_lr is swept already at r.yaml:7:3"},
        {"sweep:\n  sweep.x: [1]\n", "r.yaml:7:3: sweep.sweep.x: a sweep cannot sweep itself"},
        {"sweep: [1, 2]\n", "r.yaml:6:8: sweep: expected a mapping of recipe keys"},
        {"sweep:\n  train.random_seed: 1..40\n  train.batch_size: 1..30\n",
         "r.yaml:8:3: sweep.train.batch_size: 1200 points so far, more than the 1000"},
        // A value that is fine alone but not with the recipe's other values.
        {"resources:\n  gpus: 1\nsweep:\n  resources.cores: [2]\n",
         "r.yaml:9:21: sweep.resources.cores[0]: cores is for CPU-only jobs"},
        {"resources:\n  gpus: 1\n  cores_per_gpu: 2\nsweep:\n  resources.gpus: [1, 0]\n",
         "r.yaml:10:23: sweep.resources.gpus[1]: with resources.gpus=0: r.yaml:8:18: "
         "resources.cores_per_gpu: cores_per_gpu needs gpus"},
    };
    for (const auto& [sweep, message] : cases) {
        auto recipe = load(std::string(base) + sweep);
        ASSERT_FALSE(recipe) << sweep;
        EXPECT_EQ(recipe.error().code, ErrorCode::config_invalid);
        EXPECT_EQ(recipe.error().message.rfind(message, 0), 0U)
            << sweep << "\n  got: " << recipe.error().message << "\n  want: " << message;
    }
}

class SiteProfileValidation : public ::testing::Test {
protected:
    // As the site catalog loads one: the document, then what its families accept.
    static Result<SiteProfile> load(const std::string& text) {
        auto doc = parse_yaml(text, "s.yaml");
        if (!doc) {
            return fail(doc.error());
        }
        auto site = site_profile_from_yaml(*doc);
        if (site) {
            if (auto accepted = schedulers::check_site(*site); !accepted) {
                return fail(accepted.error());
            }
        }
        return site;
    }
    static std::string partition(const std::string& extra) {
        return "name: s\npartitions:\n  gpu:\n    scheduler: slurm\n    node: {cores: 8, memory: "
               "32G, gpus: 2}\n    walltime: {default: \"01:00:00\", max: \"02:00:00\"}\n" +
               extra;
    }
};

TEST_F(SiteProfileValidation, BuiltInProfilesAreValid) {
    for (const auto& entry : std::filesystem::directory_iterator(source_dir / "site-profiles")) {
        auto site = load_site_profile(entry.path());
        EXPECT_TRUE(site) << entry.path() << ": " << site.error().message;
        if (site) {
            EXPECT_EQ(site->name, entry.path().stem().string());
            const auto accepted = schedulers::check_site(*site);
            EXPECT_TRUE(accepted) << accepted.error().message;
        }
    }
}

TEST_F(SiteProfileValidation, RejectsUnknownScheduler) {
    auto site = load(partition("").replace(partition("").find("slurm"), 5, "lsf"));
    ASSERT_FALSE(site);
    EXPECT_EQ(site.error().message,
              "s.yaml:4:16: partitions.gpu.scheduler: 'lsf' is not a scheduler family dljob "
              "knows; expected one of local, moab, pbs, slurm, spark, sqsub");
}

TEST_F(SiteProfileValidation, RejectsDefaultWalltimeAboveMaximum) {
    auto site = load("name: s\npartitions:\n  gpu:\n    scheduler: slurm\n    node: {cores: 8, "
                     "memory: 32G}\n    walltime: {default: \"03:00:00\", max: \"02:00:00\"}\n");
    ASSERT_FALSE(site);
    EXPECT_NE(site.error().message.find("partitions.gpu.walltime.default: default 03:00:00 is "
                                        "above the maximum 02:00:00"),
              std::string::npos)
        << site.error().message;
}

TEST_F(SiteProfileValidation, RejectsAprunWithSlurm) {
    auto site = load(partition("    launcher: aprun\n"));
    ASSERT_FALSE(site);
    EXPECT_EQ(site.error().message, "s.yaml:7:15: partitions.gpu.launcher: aprun does not run "
                                    "under slurm; expected srun, mpirun, none");
    EXPECT_EQ(site.error().hint, "aprun runs under moab, pbs");
}

// What only a family knows of its partitions is the family's check, named like the loader's.
TEST_F(SiteProfileValidation, EachFamilyChecksWhatItNeeds) {
    auto srun =
        load(partition("    launcher: srun\n").replace(partition("").find("slurm"), 5, "pbs"));
    ASSERT_FALSE(srun);
    EXPECT_EQ(srun.error().message, "s.yaml:7:15: partitions.gpu.launcher: srun does not run "
                                    "under pbs; expected aprun, mpirun, none");
    auto sqsub = load(partition("").replace(partition("").find("slurm"), 5, "sqsub"));
    ASSERT_FALSE(sqsub);
    EXPECT_EQ(sqsub.error().message, "s.yaml:4:5: partitions.gpu.queue: sqsub needs a queue (-q), "
                                     "e.g. gpu, threaded, mpi");
    auto local =
        load(partition("    max_nodes: 2\n").replace(partition("").find("slurm"), 5, "local"));
    ASSERT_FALSE(local);
    EXPECT_NE(local.error().message.find("partitions.gpu.max_nodes: the local scheduler runs on "
                                         "this one machine"),
              std::string::npos)
        << local.error().message;
    auto automatic = load(
        "name: s\npartitions:\n  gpu:\n    scheduler: slurm\n    node: {cores: 8, memory: auto}\n"
        "    walltime: {default: \"01:00:00\", max: \"02:00:00\"}\n");
    ASSERT_FALSE(automatic);
    EXPECT_NE(automatic.error().message.find("partitions.gpu.node: auto is the machine dljob runs "
                                             "on, and a slurm job"),
              std::string::npos)
        << automatic.error().message;
}

// `scheduler_options:` is kept, word by word, for the family; a shell character is refused.
TEST_F(SiteProfileValidation, SchedulerOptionsAreWordsKeptForTheFamily) {
    auto site = load(partition("    scheduler_options:\n      master: yarn\n"
                               "      conf: [spark.a=1, spark.b=x]\n"));
    ASSERT_TRUE(site) << site.error().message;
    const auto& options = site->partitions.at(0).scheduler_options;
    EXPECT_EQ(options.at("master"), std::vector<std::string>{"yarn"});
    EXPECT_EQ(options.at("conf"), (std::vector<std::string>{"spark.a=1", "spark.b=x"}));
    EXPECT_EQ(site->origins.at("partitions.gpu.scheduler_options.master"), "s.yaml:8:15");
    auto hostile = load(partition("    scheduler_options:\n      master: \"yarn; rm -rf ~\"\n"));
    ASSERT_FALSE(hostile);
    EXPECT_NE(hostile.error().message.find("s.yaml:8:15: partitions.gpu.scheduler_options.master"),
              std::string::npos)
        << hostile.error().message;
}

TEST_F(SiteProfileValidation, RejectsDefaultPartitionThatDoesNotExistListingChoices) {
    auto site = load(partition("default_partition: cpu\n"));
    ASSERT_FALSE(site);
    EXPECT_NE(site.error().message.find("default_partition: no partition 'cpu'; valid choices: "
                                        "gpu"),
              std::string::npos)
        << site.error().message;
}

TEST_F(SiteProfileValidation, RejectsExtraDirectiveWithShellCharacters) {
    auto site = load(partition("    extra_directives: [\"--qos=x; rm -rf\"]\n"));
    ASSERT_FALSE(site);
    EXPECT_NE(site.error().message.find("partitions.gpu.extra_directives[0]"), std::string::npos);
}

// The integer, number and walltime fields of a profile report overflow the same way.
TEST_F(SiteProfileValidation, NumbersPastTheirTypeAreTooLargeWithTheRange) {
    auto max_nodes = load(partition("    max_nodes: 2147483648\n"));
    ASSERT_FALSE(max_nodes);
    EXPECT_EQ(max_nodes.error().message,
              "s.yaml:7:16: partitions.gpu.max_nodes: expected a whole number from 1 to 100000, "
              "got 2147483648, which is too large");
    auto grace = load(partition("scheduler:\n  grace_seconds: 99999999999999999999\n"));
    ASSERT_FALSE(grace);
    EXPECT_NE(grace.error().message.find("scheduler.grace_seconds: expected a whole number from 0 "
                                         "to 3600, got 99999999999999999999, which is too large"),
              std::string::npos)
        << grace.error().message;
    std::string text = partition("");
    text.replace(text.find("cores: 8"), 8, "cores: 4294967296");
    auto cores = load(text);
    ASSERT_FALSE(cores);
    EXPECT_NE(cores.error().message.find("partitions.gpu.node.cores: expected a whole number from "
                                         "1 to 4096, got 4294967296, which is too large"),
              std::string::npos)
        << cores.error().message;
    text = partition("");
    text.replace(text.find("gpus: 2"), 7, "gpus: 2, cores_per_gpu: 1e999");
    auto per_gpu = load(text);
    ASSERT_FALSE(per_gpu);
    EXPECT_NE(per_gpu.error().message.find("partitions.gpu.node.cores_per_gpu: expected a number "
                                           "from 0 to 256, got 1e999, which is too large"),
              std::string::npos)
        << per_gpu.error().message;
    text = partition("");
    text.replace(text.find("\"02:00:00\""), 10, "\"2147483647:00:00\"");
    auto walltime = load(text);
    ASSERT_FALSE(walltime);
    EXPECT_NE(walltime.error().message.find("partitions.gpu.walltime.max: invalid walltime "
                                            "'2147483647:00:00': 2147483647 is too large: each "
                                            "field may be at most 999999999"),
              std::string::npos)
        << walltime.error().message;
}

class ResourceResolution : public ::testing::Test {
protected:
    static SiteProfile site(const char* name) {
        return load_site_profile(source_dir / "site-profiles" / (std::string(name) + ".yaml"))
            .value();
    }
    static Recipe recipe(int gpus, std::optional<int> nodes = {}) {
        Recipe r;
        r.name = "t";
        r.resources.gpus = gpus;
        r.resources.nodes = nodes;
        r.origins["resources.gpus"] = "r.yaml:4:9";
        r.origins["resources.walltime"] = "r.yaml:5:13";
        return r;
    }
};

// More GPUs than a node has get the fewest whole nodes that hold them, one rank per GPU, as
// `dljob shell --gpus N` gets them: gpus: 4 on Big Red II's one-GPU XK7 nodes is 4 nodes, on
// Graham's two-P100 nodes 2 (both used to be refused with "ask for nodes: N explicitly").
TEST_F(ResourceResolution, MoreGpusThanANodeHasGetWholeNodes) {
    const auto bigred2 = site("bigred2");
    const auto& gpu = *bigred2.find_partition("gpu");
    Recipe train = recipe(4);
    train.kind = RecipeKind::train;
    auto four = resolve_resources(train, bigred2, gpu);
    ASSERT_TRUE(four) << four.error().message;
    EXPECT_EQ(four->nodes, 4);
    EXPECT_EQ(four->gpus_per_node, 1);
    EXPECT_EQ(four->tasks_per_node, 1);
    EXPECT_EQ(four->cores_per_node, 16) << "each node whole";

    const auto graham = site("graham");
    train.resources.gpus = 4;
    auto two = resolve_resources(train, graham, *graham.find_partition("gpu"));
    ASSERT_TRUE(two) << two.error().message;
    EXPECT_EQ(two->nodes, 2);
    EXPECT_EQ(two->gpus_per_node, 2);
    EXPECT_EQ(two->tasks_per_node, 2) << "one rank per GPU";
    EXPECT_EQ(two->cores_per_node, 32);

    // Only what does not fill whole nodes is refused, with what would.
    train.resources.gpus = 3;
    auto three = resolve_resources(train, graham, *graham.find_partition("gpu"));
    ASSERT_FALSE(three);
    EXPECT_EQ(three.error().message,
              "r.yaml:4:9: resources.gpus: 3 GPUs do not fill whole nodes of partition 'gpu' of "
              "site 'graham', which have 2 GPU(s) each");
    EXPECT_EQ(three.error().hint, "ask for gpus: 2, or gpus: 4 (2 nodes), or nodes: 3 (one GPU on "
                                  "each); a job gets at most 8 node(s) here");
    train.resources.nodes = 3;
    EXPECT_TRUE(resolve_resources(train, graham, *graham.find_partition("gpu")))
        << "what the hint says works";
    // More nodes than the partition allows: how many GPUs it can give.
    train.resources.nodes.reset();
    train.resources.gpus = 18;
    auto many = resolve_resources(train, graham, *graham.find_partition("gpu"));
    ASSERT_FALSE(many);
    EXPECT_EQ(many.error().message,
              "r.yaml:4:9: resources.gpus: 18 GPUs need 9 nodes of 2 GPU(s) each, but partition "
              "'gpu' of site 'graham' allows at most 8");
    EXPECT_EQ(many.error().hint, "ask for at most 16 GPUs");
}

TEST_F(ResourceResolution, BigRed2FourGpusOnFourNodesExplicitly) {
    const auto bigred2 = site("bigred2");
    const auto& gpu = *bigred2.find_partition("gpu");
    auto four_nodes = resolve_resources(recipe(4, 4), bigred2, gpu);
    ASSERT_TRUE(four_nodes) << four_nodes.error().message;
    EXPECT_EQ(four_nodes->nodes, 4);
    EXPECT_EQ(four_nodes->gpus_per_node, 1);
    EXPECT_FALSE(resolve_resources(recipe(4, 2), bigred2, gpu));
}

TEST_F(ResourceResolution, HeliosTiesCoresToGpus) {
    const auto helios = site("helios");
    const auto& k80 = *helios.find_partition("k80");
    auto two = resolve_resources(recipe(2), helios, k80);
    ASSERT_TRUE(two);
    EXPECT_EQ(two->cores_per_node, 3); // 1.5 cores per K80 GPU
    auto greedy = recipe(2);
    greedy.resources.cores_per_gpu = 3;
    auto refused = resolve_resources(greedy, helios, k80);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("ties cores to GPUs: 2 GPU(s) per node come with 3 "
                                           "core(s)"),
              std::string::npos)
        << refused.error().message;
}

TEST_F(ResourceResolution, WalltimeOverMaximumNamesTheMaximum) {
    const auto helios = site("helios");
    auto r = recipe(1);
    r.resources.walltime = Walltime::parse("1-00:00:00").value();
    auto refused = resolve_resources(r, helios, *helios.find_partition("k80"));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().message,
              "r.yaml:5:13: resources.walltime: walltime 24:00:00 is over the maximum 12:00:00 of "
              "partition 'k80' of site 'helios'");
}

TEST_F(ResourceResolution, GpusOnCpuPartitionAreRefused) {
    const auto graham = site("graham");
    auto refused = resolve_resources(recipe(1), graham, *graham.find_partition("cpu"));
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("has no GPUs"), std::string::npos);
}

} // namespace
} // namespace dljob::config
