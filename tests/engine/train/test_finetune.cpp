// The fine-tuning recipe end to end with the real dltrain (recipes/lenet-finetune.yaml and its
// network): a short LeNet run (recipes/networks/lenet.yaml) exported as a .caffemodel, then the
// fine-tuning network started from it. Its renamed classifier is listed as initialised from its
// filler, the other layers as copied, the old classifier as not in the network, and it trains.

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

std::vector<nlohmann::json> metrics(const fs::path& run_dir) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(run_dir / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        lines.push_back(nlohmann::json::parse(line));
    }
    return lines;
}

TEST(FineTuneRecipe, StartsFromAnExportedCaffemodelWithANewClassifier) {
    dl_test::TempDir dir;
    // LeNet's file names, 28x28 images of three learnable classes.
    dl_test::write_tiny_dataset(dir.path(), "train", 128, 28, 1, /*gz=*/true);
    dl_test::write_tiny_dataset(dir.path(), "t10k", 100, 28, 2, /*gz=*/true);
    const fs::path recipes = fs::path(DLJOB_SOURCE_DIR) / "recipes";
    const std::string recipe = dl_test::read_file(recipes / "lenet-finetune.yaml");
    EXPECT_NE(recipe.find("config: networks/lenet_finetune.yaml"), std::string::npos);
    EXPECT_NE(recipe.find(".caffemodel"), std::string::npos);

    const std::string dltrain = std::string(DLTRAIN_BINARY);
    const std::string common = " --device cpu --threads 1 --deadline none --data-dir " +
                               dir.path().string() +
                               " --solver test_iter=1 --solver display=10 --max-iter 30";
    const fs::path base = dir.path() / "base";
    const auto trained =
        run_shell(dltrain + " train --config " + (recipes / "networks" / "lenet.yaml").string() +
                  " --run-dir " + base.string() + common);
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    const fs::path model = dir.path() / "lenet.caffemodel";
    const auto exported =
        run_shell(dltrain + " export --config " + (recipes / "networks" / "lenet.yaml").string() +
                  " --weights " + (base / "checkpoints" / "iter_00000030.ckpt").string() +
                  " --caffemodel " + model.string() + " --data-dir " + dir.path().string());
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    ASSERT_TRUE(fs::exists(model));

    const fs::path tuned = dir.path() / "tuned";
    const auto finetuned = run_shell(
        dltrain + " train --config " + (recipes / "networks" / "lenet_finetune.yaml").string() +
        " --weights " + model.string() + " --run-dir " + tuned.string() + common);
    ASSERT_EQ(finetuned.exit_code, 0) << finetuned.output;
    // conv1, conv2, ip1: weights and bias each copied; the new classifier from its filler.
    EXPECT_NE(finetuned.output.find("dltrain: 6 parameters from " + model.string() +
                                    "; from their fillers: ip2_finetune.0, ip2_finetune.1; "
                                    "not in this network: ip2.0, ip2.1"),
              std::string::npos)
        << finetuned.output;
    const auto lines = metrics(tuned);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.front()["weights_from"], model.string());
    EXPECT_EQ(lines.back()["type"], "final") << lines.back().dump();
    EXPECT_EQ(lines.back()["iter"], 30);
    const std::string resolved = dl_test::read_file(tuned / "config.resolved.yaml");
    EXPECT_NE(resolved.find("lr_mult: 10"), std::string::npos) << resolved;

    // The copied features are the base run's: the first test of the fine-tuned run differs from
    // one started without the weights (same seed, same classifier filler).
    const fs::path scratch = dir.path() / "scratch";
    ASSERT_EQ(run_shell(dltrain + " train --config " +
                        (recipes / "networks" / "lenet_finetune.yaml").string() + " --run-dir " +
                        scratch.string() + common)
                  .exit_code,
              0);
    const auto first_test = [](const std::vector<nlohmann::json>& all) {
        for (const auto& line : all) {
            if (line["type"] == "test") {
                return line["loss"].get<double>();
            }
        }
        return -1.0;
    };
    EXPECT_NE(first_test(lines), first_test(metrics(scratch)));
}

} // namespace
