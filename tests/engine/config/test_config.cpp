// Bad configs: every error names the file, the line and the key, and lists the valid choices.

#include "engine_test_support.hpp"
#include "net/memory_plan.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/train.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

namespace dl {
namespace {

using dl_test::config_error;

TEST(ConfigErrors, UnknownLayerTypeNamesLineAndListsTypes) {
    const std::string message = config_error("layers:\n"
                                             "  - name: a\n"
                                             "    type: Convolutoin\n");
    EXPECT_NE(message.find("bad.yaml:3"), std::string::npos) << message;
    EXPECT_NE(message.find("'Convolutoin'"), std::string::npos) << message;
    EXPECT_NE(message.find("Convolution, Pooling, InnerProduct"), std::string::npos) << message;
}

TEST(ConfigErrors, UnknownKeyNamesKeyAndValidKeys) {
    const std::string message = config_error("layers:\n"
                                             "  - name: p\n"
                                             "    type: Pooling\n"
                                             "    kernel_size: 2\n"
                                             "    kernal: 3\n");
    EXPECT_NE(message.find("bad.yaml:5"), std::string::npos) << message;
    EXPECT_NE(message.find("'kernal'"), std::string::npos) << message;
    EXPECT_NE(message.find("kernel_size"), std::string::npos) << message;
}

TEST(ConfigErrors, BadChoiceListsValidValues) {
    const std::string message = config_error("layers:\n"
                                             "  - {name: p, type: Pooling, kernel_size: 2}\n"
                                             "solver:\n"
                                             "  lr_policy: invv\n");
    EXPECT_NE(message.find("bad.yaml:4"), std::string::npos) << message;
    EXPECT_NE(message.find("lr_policy"), std::string::npos) << message;
    EXPECT_NE(message.find("fixed, step, multistep, exp, inv, poly"), std::string::npos) << message;
}

TEST(ConfigErrors, WrongValueTypeNamesKey) {
    const std::string message = config_error("layers:\n"
                                             "  - name: c\n"
                                             "    type: Convolution\n"
                                             "    kernel_size: 3\n"
                                             "    num_output: many\n");
    EXPECT_NE(message.find("bad.yaml:5"), std::string::npos) << message;
    EXPECT_NE(message.find("'num_output'"), std::string::npos) << message;
}

TEST(ConfigErrors, ShuffleIsABooleanOfDataLayersOnly) {
    std::string message = config_error("layers:\n"
                                       "  - {name: d, type: Data, source: x, batch_size: 2,\n"
                                       "     shuffle: yes please}\n");
    EXPECT_NE(message.find("bad.yaml:3"), std::string::npos) << message;
    EXPECT_NE(message.find("'shuffle'"), std::string::npos) << message;
    EXPECT_NE(message.find("boolean (true or false)"), std::string::npos) << message;
    message = config_error("layers:\n"
                           "  - {name: p, type: Pooling, kernel_size: 2, shuffle: true}\n");
    EXPECT_NE(message.find("bad.yaml:2"), std::string::npos) << message;
    EXPECT_NE(message.find("unknown key 'shuffle'"), std::string::npos) << message;
}

TEST(ConfigErrors, MissingRequiredKeyIsNamed) {
    const std::string message = config_error("layers:\n"
                                             "  - {name: c, type: Convolution, num_output: 3}\n");
    EXPECT_NE(message.find("bad.yaml:2"), std::string::npos) << message;
    EXPECT_NE(message.find("'kernel_size'"), std::string::npos) << message;
}

TEST(ConfigErrors, ShapesThatDoNotFitNameBothLayers) {
    const NetConfig config = parse_config(
        "layers:\n"
        "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
        "     batch_size: 2, shape: [1, 4, 4]}\n"
        "  - {name: pool, type: Pooling, bottom: data, top: p, kernel_size: 2, stride: 2}\n"
        "  - {name: conv, type: Convolution, bottom: p, top: c, num_output: 2, kernel_size: 5}\n",
        "bad.yaml");
    auto backend = make_backend("cpu", 1);
    try {
        const Net net(config, Phase::train, *backend, 1);
        FAIL() << "no error for a 5x5 kernel over a 2x2 input";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("bad.yaml:5"), std::string::npos) << message;
        EXPECT_NE(message.find("'conv'"), std::string::npos) << message;
        EXPECT_NE(message.find("'pool'"), std::string::npos) << message;
    }
}

TEST(ConfigErrors, APoolingWindowWhollyPastTheInputIsRefused) {
    // 2 wide, kernel 1, stride 2: Caffe's ceil-mode size gives 2 outputs, the second starting at
    // column 2, outside the input; its argmax would point outside the plane.
    const NetConfig config = parse_config(
        "layers:\n"
        "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
        "     batch_size: 2, shape: [1, 2, 2]}\n"
        "  - {name: pool, type: Pooling, bottom: data, top: p, kernel_size: 1, stride: 2}\n",
        "bad.yaml");
    auto backend = make_backend("cpu", 1);
    try {
        const Net net(config, Phase::train, *backend, 1);
        FAIL() << "no error for a window past the input";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("bad.yaml:4"), std::string::npos) << message;
        EXPECT_NE(message.find("'pool'"), std::string::npos) << message;
        EXPECT_NE(message.find("kernel_size 1 with stride 2 leaves the last window past the 2x2"),
                  std::string::npos)
            << message;
    }
    // Kernel and stride equal, and Caffe's 3x3 / 2 over an odd and an even size, still build.
    for (const std::string pool : {"kernel_size: 2, stride: 2", "kernel_size: 3, stride: 2"}) {
        for (const std::string side : {"7", "8"}) {
            const NetConfig fine = parse_config(
                "layers:\n"
                "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
                "     batch_size: 2, shape: [1, " +
                    side + ", " + side +
                    "]}\n"
                    "  - {name: pool, type: Pooling, bottom: data, top: p, " +
                    pool + "}\n",
                "fine.yaml");
            EXPECT_NO_THROW(const Net net(fine, Phase::train, *backend, 1)) << pool << " " << side;
        }
    }
}

TEST(ConfigErrors, ATopThatIsItsBottomIsRefusedUnlessTheLayerTypeMayRunInPlace) {
    // Each of these reads its input while it writes its output: in place, train segfaulted or
    // computed garbage where check had passed.
    const std::vector<std::pair<std::string, std::string>> layers = {
        {"Convolution", "bottom: data, top: data, num_output: 1, kernel_size: 1"},
        {"Pooling", "bottom: data, top: data, kernel_size: 2, stride: 2"},
        {"InnerProduct", "bottom: data, top: data, num_output: 4"},
        {"LRN", "bottom: data, top: data, local_size: 3"},
        {"Concat", "bottom: [data, data], top: data"},
        {"Eltwise", "bottom: [data, data], top: data"},
        {"SoftmaxWithLoss", "bottom: [data, label], top: data"},
        {"Accuracy", "bottom: [data, label], top: label"},
    };
    auto backend = make_backend("cpu", 1);
    for (const auto& [type, keys] : layers) {
        const NetConfig config = parse_config(
            "layers:\n"
            "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
            "     batch_size: 2, shape: [4, 1, 1]}\n"
            "  - {name: self, type: " +
                type + ", " + keys + "}\n",
            "bad.yaml");
        try {
            const Net net(config, Phase::train, *backend, 1);
            ADD_FAILURE() << type << " ran in place";
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_EQ(e.kind(), ErrorKind::config);
            EXPECT_EQ(message.rfind("bad.yaml:4: layer 'self' (" + type + "): top '", 0), 0U)
                << message;
            EXPECT_NE(
                message.find("is also its bottom, and layer type " + type + " cannot run in place"),
                std::string::npos)
                << message;
            EXPECT_NE(message.find("(layers that may run in place: ReLU, Sigmoid, TanH, Dropout, "
                                   "BatchNorm, Scale, PReLU)"),
                      std::string::npos)
                << message;
        }
    }
    // The layers that may, may.
    for (const std::string type :
         {"ReLU", "Sigmoid", "TanH", "Dropout", "BatchNorm", "Scale", "PReLU"}) {
        const NetConfig config = parse_config(
            "layers:\n"
            "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
            "     batch_size: 2, shape: [4, 1, 1]}\n"
            "  - {name: self, type: " +
                type + ", bottom: data, top: data}\n",
            "fine.yaml");
        EXPECT_NO_THROW(const Net net(config, Phase::train, *backend, 1)) << type;
    }
}

TEST(ConfigErrors, ImageLayersOnAFlatBottomNameItAndItsLayer) {
    for (const std::string layer :
         {"{name: late, type: Convolution, bottom: f, top: c, num_output: 2, kernel_size: 1}",
          "{name: late, type: Pooling, bottom: f, top: c, kernel_size: 1}"}) {
        const NetConfig config = parse_config(
            "layers:\n"
            "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
            "     batch_size: 2, shape: [1, 4, 4]}\n"
            "  - {name: flat, type: InnerProduct, bottom: data, top: f, num_output: 3}\n"
            "  - " +
                layer + "\n",
            "bad.yaml");
        auto backend = make_backend("cpu", 1);
        try {
            const Net net(config, Phase::train, *backend, 1);
            FAIL() << "no error for " << layer;
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find("bad.yaml:5"), std::string::npos) << message;
            EXPECT_NE(message.find("layer 'late'"), std::string::npos) << message;
            EXPECT_NE(message.find("needs a 4-D bottom (N x C x H x W) but 'f' from layer 'flat' "
                                   "is 2x3"),
                      std::string::npos)
                << message;
        }
    }
}

TEST(ConfigErrors, ScoresAndLabelsOfDifferentRowsNameBothLayers) {
    for (const std::string type : {"SoftmaxWithLoss", "Accuracy"}) {
        // The image blob (2 x 16 values) given where the 2 labels belong.
        const NetConfig config = parse_config(
            "layers:\n"
            "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
            "     batch_size: 2, shape: [1, 4, 4]}\n"
            "  - {name: ip, type: InnerProduct, bottom: data, top: scores, num_output: 3}\n"
            "  - {name: out, type: " +
                type + ", bottom: [scores, data], top: o}\n",
            "bad.yaml");
        auto backend = make_backend("cpu", 1);
        try {
            const Net net(config, Phase::train, *backend, 1);
            FAIL() << type << ": no error for 32 labels against 2 rows";
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find("bad.yaml:5"), std::string::npos) << message;
            EXPECT_NE(message.find("'scores' from layer 'ip' has 2 rows but 'data' from layer "
                                   "'in' has 32 labels"),
                      std::string::npos)
                << message;
        }
    }
}

TEST(ConfigErrors, UnknownBottomListsKnownBlobs) {
    const NetConfig config =
        parse_config("layers:\n"
                     "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
                     "     batch_size: 2, shape: [1, 4, 4]}\n"
                     "  - {name: relu, type: ReLU, bottom: dta, top: r}\n",
                     "bad.yaml");
    auto backend = make_backend("cpu", 1);
    try {
        const Net net(config, Phase::train, *backend, 1);
        FAIL() << "no error for an unknown bottom";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("bad.yaml:4"), std::string::npos) << message;
        EXPECT_NE(message.find("'dta'"), std::string::npos) << message;
        EXPECT_NE(message.find("data, label"), std::string::npos) << message;
    }
}

TEST(ConfigErrors, AConfigPathThatIsADirectoryOrMissingIsNamed) {
    const dl_test::TempDir dir;
    for (const auto& [path, expected] :
         {std::pair{dir.path(), std::string("is a directory, not a YAML file")},
          std::pair{dir.path() / "none.yaml", std::string("does not exist")}}) {
        try {
            load_config(path);
            ADD_FAILURE() << "no error for " << path;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config);
            const std::string message = e.what();
            EXPECT_NE(message.find(path.string() + " "), std::string::npos) << message;
            EXPECT_NE(message.find(expected), std::string::npos) << message;
        }
    }
}

// yaml-cpp keeps both of two equal keys and `node[key]` finds the first: `base_lr: 0.01` then
// `base_lr: 10` trained at 0.01 and `check` said ok. Every map refuses them, wherever it is.
TEST(ConfigErrors, DuplicateKeysAreRefusedNamingLineColumnAndKey) {
    const std::string tiny = dl_test::tiny_net_yaml(10);
    struct Case {
        std::string text;
        std::string expected;
    };
    const std::vector<Case> cases = {
        // The solver, in block style: the later value was silently dropped.
        {tiny + "  base_lr: 10\n", "duplicate key 'base_lr' (first given at line 20, column 3)"},
        // The top level.
        {"name: a\n" + tiny, ":2:1: duplicate key 'name' (first given at line 1, column 1)"},
        // A layer in flow style, and a filler inside it.
        {"layers:\n  - {name: c, type: ReLU, name: d}\n",
         "bad.yaml:2:27: duplicate key 'name' (first given at line 2, column 6)"},
        {"layers:\n  - {name: c, type: Convolution, num_output: 2, kernel_size: 1,\n"
         "     weight_filler: {type: gaussian, std: 1, std: 2}}\n",
         "bad.yaml:3:46: duplicate key 'std'"},
        // A key given through an alias of the same scalar.
        {"name: &n name\n*n : b\nlayers: []\n", "duplicate key 'name'"},
    };
    for (const auto& [text, expected] : cases) {
        const std::string message = config_error(text);
        EXPECT_NE(message.find(expected), std::string::npos) << message << "\nfor:\n" << text;
    }
    // Equal keys in different maps are fine.
    EXPECT_NO_THROW(parse_config(tiny, "tiny.yaml"));
}

TEST(ConfigErrors, NestingDepthIsBounded) {
    // 40 levels of lists in a value: refused at the 33rd, naming where.
    const std::string deep = "name: " + std::string(40, '[') + std::string(40, ']') + "\n";
    const std::string message = config_error(deep);
    EXPECT_NE(message.find("bad.yaml:1:38: nesting deeper than 32 levels"), std::string::npos)
        << message;
    // And a document of 100,000 levels (yaml-cpp's own recursion) is an error, not a crash.
    const std::string deeper = "name: " + std::string(100000, '[') + "\n";
    EXPECT_FALSE(config_error(deeper).empty());
}

TEST(ConfigErrors, AliasExpansionIsBounded) {
    // A billion laughs: 10 aliases of 10 aliases ... of a scalar, about 1 KB that stands for 10^9
    // nodes. Anywhere in the document (here under 'layers' itself) it is refused while parsing,
    // before any of it is walked.
    std::string text = "a0: &a0 x\n";
    for (int level = 1; level <= 9; ++level) {
        text += fmt::format("a{}: &a{} [", level, level);
        for (int i = 0; i < 10; ++i) {
            text += fmt::format("{}*a{}", i > 0 ? ", " : "", level - 1);
        }
        text += "]\n";
    }
    text += "layers: *a9\n";
    ASSERT_LT(text.size(), 1024U);
    const std::string message = config_error(text);
    EXPECT_NE(message.find("more than 100000 nodes, counting each alias"), std::string::npos)
        << message;
    EXPECT_NE(message.find("bad.yaml:6:"), std::string::npos) << message;
    // A few aliases, as people use them, are fine.
    const std::string tiny = dl_test::tiny_net_yaml(10);
    std::string aliased = tiny;
    const auto at = aliased.find("weight_filler: {type: xavier}");
    ASSERT_NE(at, std::string::npos);
    aliased.replace(at, 29, "weight_filler: &w {type: xavier}");
    const auto msra = aliased.find("weight_filler: {type: msra}");
    ASSERT_NE(msra, std::string::npos);
    aliased.replace(msra, 27, "weight_filler: *w");
    const NetConfig config = parse_config(aliased, "aliased.yaml");
    EXPECT_EQ(config.layers[4].weight_filler.type, "xavier");
}

TEST(ConfigErrors, ConfigSizeIsBounded) {
    // A valid config followed by 2 MB of comments: refused by size, not parsed.
    const dl_test::TempDir dir;
    const auto file = dir.path() / "big.yaml";
    std::string text = dl_test::tiny_net_yaml(10);
    while (text.size() <= (2U << 20)) {
        text += "# padding padding padding padding padding padding padding padding padding\n";
    }
    std::ofstream(file) << text;
    for (const bool from_file : {true, false}) {
        try {
            if (from_file) {
                load_config(file);
            } else {
                parse_config(text, file);
            }
            ADD_FAILURE() << "no error for a config of " << text.size() << " bytes";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config);
            EXPECT_NE(std::string(e.what()).find("more than the 1048576 bytes"), std::string::npos)
                << e.what();
        }
    }
}

TEST(ConfigErrors, ASecondDocumentIsRefused) {
    const std::string message = config_error(dl_test::tiny_net_yaml(10) + "---\nname: other\n");
    EXPECT_NE(message.find("more than one YAML document"), std::string::npos) << message;
}

// Slurm's --mem is a cgroup limit: on a node of 256 GB a job of 8G is killed past 8G, so the
// default memory limit is the smaller of the two. cgroup v2 and v1 layouts, "max" for none.
TEST(MemoryLimit, TheCgroupsLimitIsReadForV2AndV1) {
    const dl_test::TempDir dir;
    const auto write = [&](const std::filesystem::path& file, const std::string& text) {
        std::filesystem::create_directories(file.parent_path());
        std::ofstream(file) << text;
    };
    write(dir.path() / "v2" / "proc", "0::/slurm/uid_1/job_7\n");
    write(dir.path() / "v2" / "root/slurm/uid_1/job_7/memory.max", "8589934592\n");
    EXPECT_EQ(cgroup_memory_limit(dir.path() / "v2" / "proc", dir.path() / "v2" / "root"),
              std::optional<std::uint64_t>(8589934592U));
    write(dir.path() / "v1" / "proc",
          "9:name=systemd:/\n4:memory:/slurm/job_7\n2:cpu,cpuacct:/\n0::/\n");
    write(dir.path() / "v1" / "root/memory/slurm/job_7/memory.limit_in_bytes", "1073741824\n");
    EXPECT_EQ(cgroup_memory_limit(dir.path() / "v1" / "proc", dir.path() / "v1" / "root"),
              std::optional<std::uint64_t>(1073741824U));
    write(dir.path() / "none" / "proc", "0::/user.slice\n4:memory:/\n");
    write(dir.path() / "none" / "root/user.slice/memory.max", "max\n");
    write(dir.path() / "none" / "root/memory/memory.limit_in_bytes", "9223372036854771712\n");
    EXPECT_EQ(cgroup_memory_limit(dir.path() / "none" / "proc", dir.path() / "none" / "root"),
              std::nullopt);
    EXPECT_EQ(cgroup_memory_limit(dir.path() / "missing", dir.path()), std::nullopt);
}

TEST(ConfigErrors, MissingDataFileNamesItsPath) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 10);
    TrainOptions options;
    options.config = config;
    options.run_dir = dir.path() / "run";
    options.data_dir = dir.path() / "nowhere";
    try {
        train(options);
        FAIL() << "no error for a missing data directory";
    } catch (const Error& e) {
        EXPECT_EQ(exit_code_for(e.kind()), exit_code::invalid_config);
        const std::string message = e.what();
        EXPECT_NE(message.find((dir.path() / "nowhere" / "train-images-idx3-ubyte").string()),
                  std::string::npos)
            << message;
        EXPECT_NE(message.find("tiny.yaml:3"), std::string::npos) << message;
    }
}

TEST(ConfigErrors, ResolvedConfigReadsBackToTheSameNet) {
    const NetConfig config =
        parse_config(dl_test::tiny_net_yaml(100, "SGD", /*shuffle=*/true), "tiny.yaml");
    const NetConfig again = parse_config(to_yaml(config), "resolved.yaml");
    ASSERT_EQ(again.layers.size(), config.layers.size());
    EXPECT_TRUE(config.layers[0].shuffle);
    for (std::size_t i = 0; i < config.layers.size(); ++i) {
        EXPECT_EQ(again.layers[i].type, config.layers[i].type);
        EXPECT_EQ(again.layers[i].shuffle, config.layers[i].shuffle);
        EXPECT_EQ(again.layers[i].num_output, config.layers[i].num_output);
        EXPECT_EQ(again.layers[i].weight_filler.type, config.layers[i].weight_filler.type);
        EXPECT_EQ(again.layers[i].params.size(), config.layers[i].params.size());
    }
    EXPECT_EQ(again.solver.lr_policy, "inv");
    EXPECT_FLOAT_EQ(again.solver.gamma, 0.0001F);
    EXPECT_EQ(again.solver.max_iter, 100);
}

TEST(SolverOverrides, ReplaceTheConfigsSolverKeysAndTheTrainBatchSize) {
    const NetConfig config =
        parse_config(dl_test::tiny_net_yaml(100), "tiny.yaml",
                     {"base_lr=0.002", "lr_policy=step", "stepsize=30", "gamma=0.5",
                      "random_seed=11", "batch_size=4", "weight_decay=0"});
    EXPECT_FLOAT_EQ(config.solver.base_lr, 0.002F);
    EXPECT_EQ(config.solver.lr_policy, "step");
    EXPECT_EQ(config.solver.stepsize, 30);
    EXPECT_FLOAT_EQ(config.solver.gamma, 0.5F);
    EXPECT_EQ(config.solver.random_seed, 11U);
    EXPECT_FLOAT_EQ(config.solver.weight_decay, 0.0F);
    EXPECT_FLOAT_EQ(config.solver.momentum, 0.9F); // not overridden: the file's
    EXPECT_EQ(config.layers[0].batch_size, 4);     // the train Data layer
    EXPECT_EQ(config.layers[1].batch_size, 10);    // the test one keeps its own
}

TEST(SolverOverrides, AreValidatedLikeTheFileAndUnknownKeysListTheValidOnes) {
    try {
        parse_config(dl_test::tiny_net_yaml(100), "tiny.yaml", {"lr_policy=stepp"});
        ADD_FAILURE() << "a bad lr_policy was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("fixed, step, multistep"), std::string::npos)
            << e.what();
    }
    try {
        parse_config(dl_test::tiny_net_yaml(100), "tiny.yaml", {"base_rl=0.1"});
        ADD_FAILURE() << "an unknown key was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::usage);
        EXPECT_NE(std::string(e.what()).find("base_lr"), std::string::npos) << e.what();
    }
    // A step policy without a stepsize is refused whether the policy came from the file or here.
    EXPECT_THROW(parse_config(dl_test::tiny_net_yaml(100), "tiny.yaml", {"lr_policy=step"}), Error);
}

TEST(SolverOverrides, AreReadByTheirKeysTypeWithoutReReadingTheConfig) {
    const NetConfig config =
        parse_config(dl_test::tiny_net_yaml(100), "tiny.yaml",
                     {"lr_policy=multistep", "stepvalue=[10, 20,30]", "test_initialization=false",
                      "random_seed=4294967295", "max_iter=7"});
    EXPECT_EQ(config.solver.stepvalues, (std::vector<int>{10, 20, 30}));
    EXPECT_FALSE(config.solver.test_initialization);
    EXPECT_EQ(config.solver.random_seed, 4294967295U);
    EXPECT_EQ(config.solver.max_iter, 7);
    // The marks name the assignment, so the validator's messages do.
    EXPECT_EQ(config.solver_marks.at("max_iter").override_text, "max_iter=7");
    for (const auto& [assignment, words] :
         {std::pair{"test_initialization=maybe", "'maybe' is not a valid boolean"},
          std::pair{"max_iter=3000000000", "'3000000000' is not a valid integer"},
          std::pair{"random_seed=-1", "'-1' is not a valid integer (0 to 2^32 - 1)"},
          std::pair{"stepvalue=[10,x]", "'[10,x]' is not a valid list of integers"},
          std::pair{"base_lr=0.1x", "'0.1x' is not a valid number"},
          std::pair{"batch_size=", "'' is not a valid integer"}}) {
        try {
            parse_config(dl_test::tiny_net_yaml(100), "tiny.yaml", {assignment});
            ADD_FAILURE() << assignment << " was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::config) << e.what();
            EXPECT_NE(std::string(e.what()).find(std::string("--solver ") + assignment),
                      std::string::npos)
                << e.what();
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    }
    // A value the type takes but the rule does not: the validator names the assignment.
    try {
        parse_config(dl_test::tiny_net_yaml(100), "tiny.yaml", {"momentum=1.5"});
        ADD_FAILURE() << "momentum 1.5 was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--solver momentum=1.5"), std::string::npos)
            << e.what();
    }
}

} // namespace
} // namespace dl
