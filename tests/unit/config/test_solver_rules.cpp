// dljob checks a recipe's `train:` solver keys by its copy of dltrain's rules
// (config/solver_rules.hpp), since no dltrain need be installed where a recipe is validated.
// The copy is only worth having while it says what dltrain says: this runs the dltrain built
// beside this dljob (`dltrain describe --json`) and compares every key, kind, bound and choice.

#include "support/run_process.hpp"

#include <dljob/config/recipe_loader.hpp>
#include <dljob/config/solver_rules.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace dljob::config {
namespace {

nlohmann::json dltrain_rules() {
    const auto described = test::run_shell(std::string(DLJOB_TEST_DLTRAIN) + " describe");
    EXPECT_EQ(described.exit_code, 0) << described.output;
    const nlohmann::json document = nlohmann::json::parse(described.output);
    nlohmann::json rules;
    for (const auto& entry : document.at("solver_keys")) {
        rules[entry.at("key").get<std::string>()] = entry;
    }
    return rules;
}

const char* kind_name(SolverRule::Kind kind) {
    switch (kind) {
    case SolverRule::Kind::number:
        return "number";
    case SolverRule::Kind::integer:
        return "integer";
    case SolverRule::Kind::integers:
        return "integers";
    case SolverRule::Kind::choice:
        return "choice";
    }
    return "";
}

TEST(SolverRules, EveryRecipeKeyIsCheckedAsDltrainChecksIt) {
    const nlohmann::json dltrain = dltrain_rules();
    for (const auto& rule : solver_rules) {
        const std::string key(rule.dltrain_key);
        ASSERT_TRUE(dltrain.contains(key)) << "dltrain has no solver key " << key;
        const auto& theirs = dltrain.at(key);
        EXPECT_EQ(theirs.at("kind"), kind_name(rule.kind)) << key;
        if (std::isinf(rule.min)) {
            EXPECT_FALSE(theirs.contains("min")) << key << ": dltrain has a minimum";
        } else {
            EXPECT_EQ(theirs.value("min", -1.0), rule.min) << key;
            EXPECT_EQ(theirs.value("min_open", false), rule.min_open) << key;
        }
        if (std::isinf(rule.max)) {
            EXPECT_FALSE(theirs.contains("max")) << key << ": dltrain has a maximum";
        } else {
            EXPECT_EQ(theirs.value("max", -1.0), rule.max) << key;
            EXPECT_EQ(theirs.value("max_open", false), rule.max_open) << key;
        }
        std::vector<std::string> choices;
        for (const auto choice : rule.choices) {
            if (!choice.empty()) {
                choices.emplace_back(choice);
            }
        }
        EXPECT_EQ(theirs.value("choices", std::vector<std::string>{}), choices) << key;
    }
}

// The rules are what the loader enforces: a value at each bound, and past it.
TEST(SolverRules, TheLoaderRefusesWhatDltrainWouldAndTakesWhatItWould) {
    const auto load = [](const std::string& train_lines) -> Result<Recipe> {
        auto doc = parse_yaml(
            "name: t\ndata:\n  source: /d\ntrain:\n  config: net.yaml\n" + train_lines, "r.yaml");
        if (!doc) {
            return fail(doc.error());
        }
        return recipe_from_yaml(*doc, "/recipes");
    };
    for (const char* good :
         {"  base_lr: 0\n", "  momentum: 0.99\n", "  weight_decay: 5\n", "  gamma: -0.5\n",
          "  random_seed: 4294967295\n", "  stepvalue: [0, 10]\n", "  solver: Adam\n"}) {
        EXPECT_TRUE(load(good)) << good;
    }
    for (const auto& [bad, message] :
         {std::pair{"  base_lr: -1\n", "train.base_lr: expected a number >= 0, got '-1'"},
          {"  momentum: 1\n", "train.momentum: expected a number >= 0 and < 1, got '1'"},
          {"  random_seed: 4294967296\n",
           "train.random_seed: expected a whole number from 0 to 4294967295, got 4294967296"},
          {"  batch_size: 0\n", "train.batch_size: expected a whole number from 1 to"},
          {"  solver: Adagrad\n",
           "train.solver: expected one of SGD, Nesterov, Adam, AdaGrad, RMSProp, AdaDelta"}}) {
        const auto result = load(bad);
        ASSERT_FALSE(result) << bad;
        EXPECT_NE(result.error().message.find(message), std::string::npos)
            << result.error().message;
    }
}

} // namespace
} // namespace dljob::config
