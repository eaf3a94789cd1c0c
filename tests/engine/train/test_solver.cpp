// Caffe's learning-rate policies and update rules, against values worked out by hand and, for
// the adaptive rules and Adam, against torch.optim (tests/engine/parity/make_solver_fixture.py).

#include "test_paths.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

namespace dl {
namespace {

TEST(LearningRate, FollowsEveryCaffePolicy) {
    SolverConfig c;
    c.base_lr = 0.1F;
    c.gamma = 0.5F;
    c.power = 0.75F;
    c.stepsize = 10;
    c.stepvalues = {5, 20};
    c.max_iter = 100;
    c.lr_policy = "fixed";
    EXPECT_FLOAT_EQ(learning_rate(c, 42), 0.1F);
    c.lr_policy = "step";
    EXPECT_FLOAT_EQ(learning_rate(c, 9), 0.1F);
    EXPECT_FLOAT_EQ(learning_rate(c, 25), 0.025F);
    c.lr_policy = "multistep";
    EXPECT_FLOAT_EQ(learning_rate(c, 4), 0.1F);
    EXPECT_FLOAT_EQ(learning_rate(c, 5), 0.05F);
    EXPECT_FLOAT_EQ(learning_rate(c, 20), 0.025F);
    c.lr_policy = "exp";
    EXPECT_FLOAT_EQ(learning_rate(c, 3), 0.1F * 0.125F);
    c.lr_policy = "inv";
    c.gamma = 0.0001F;
    EXPECT_FLOAT_EQ(learning_rate(c, 1000),
                    static_cast<float>(0.1 * std::pow(1.0 + 0.0001F * 1000.0, -0.75F)));
    c.lr_policy = "poly";
    c.power = 2.0F;
    EXPECT_FLOAT_EQ(learning_rate(c, 50), 0.1F * 0.25F);
}

class SolverRule : public ::testing::Test {
protected:
    // One InnerProduct 1 -> 1 with a constant weight 0.5 and bias 0; lr_mult 1 / 2.
    NetConfig m_config = [] {
        NetConfig config = parse_config(
            "layers:\n"
            "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
            "     batch_size: 1, shape: [1, 1, 1]}\n"
            "  - {name: ip, type: InnerProduct, bottom: data, top: ip, num_output: 2,\n"
            "     param: [{lr_mult: 1, decay_mult: 1}, {lr_mult: 2, decay_mult: 0}],\n"
            "     weight_filler: {type: constant, value: 0.5}}\n"
            "  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}\n",
            "rule.yaml");
        config.solver.base_lr = 0.1F;
        config.solver.momentum = 0.9F;
        config.solver.weight_decay = 0.01F;
        return config;
    }();
    std::unique_ptr<Backend> m_backend = make_backend("cpu", 1);

    // Sets every diff to g and runs one update.
    static void step(Net& net, Solver& solver, float g) {
        for (const auto& param : net.params()) {
            std::fill(param.tensor->diff(), param.tensor->diff() + param.tensor->count(), g);
        }
        solver.apply_update();
    }
};

TEST_F(SolverRule, SgdUsesCaffeMomentumWithLrAndDecayMultipliers) {
    Net net(m_config, Phase::train, *m_backend, 1);
    Solver solver(m_config.solver, net, *m_backend);
    step(net, solver, 1.0F);
    // weight: v = 0.1 * (1 + 0.01 * 0.5) = 0.1005; w = 0.5 - 0.1005
    EXPECT_FLOAT_EQ(net.params()[0].tensor->data()[0], 0.3995F);
    // bias: lr_mult 2, decay_mult 0: v = 0.2; b = -0.2
    EXPECT_FLOAT_EQ(net.params()[1].tensor->data()[0], -0.2F);
    step(net, solver, 1.0F);
    // bias: v = 0.9 * 0.2 + 0.2 = 0.38; b = -0.58
    EXPECT_FLOAT_EQ(net.params()[1].tensor->data()[0], -0.58F);
    EXPECT_EQ(solver.iteration(), 2);
}

TEST_F(SolverRule, NesterovStepsAheadOfTheMomentum) {
    m_config.solver.type = "Nesterov";
    Net net(m_config, Phase::train, *m_backend, 1);
    Solver solver(m_config.solver, net, *m_backend);
    step(net, solver, 1.0F);
    // bias: v = 0.2; update = 1.9 * 0.2 - 0.9 * 0 = 0.38
    EXPECT_FLOAT_EQ(net.params()[1].tensor->data()[0], -0.38F);
    step(net, solver, 1.0F);
    // v = 0.38; update = 1.9 * 0.38 - 0.9 * 0.2 = 0.542
    EXPECT_NEAR(net.params()[1].tensor->data()[0], -0.922F, 1e-6);
}

TEST_F(SolverRule, AdamAppliesBiasCorrection) {
    m_config.solver.type = "Adam";
    m_config.solver.momentum = 0.9F;
    m_config.solver.momentum2 = 0.999F;
    Net net(m_config, Phase::train, *m_backend, 1);
    Solver solver(m_config.solver, net, *m_backend);
    step(net, solver, 1.0F);
    // t = 1: m = 0.1, v = 0.001, correction = sqrt(0.001) / 0.1; update = lr * 1 (approx.)
    EXPECT_NEAR(net.params()[1].tensor->data()[0], -0.2F, 1e-5);
}

TEST(SolverParity, AdaptiveRulesAndAdamFollowTorchOptimForFiveSteps) {
    std::ifstream in(std::string(DLJOB_SOURCE_DIR) + "/tests/engine/parity/solvers.json");
    ASSERT_TRUE(in) << "missing tests/engine/parity/solvers.json";
    const nlohmann::json cases = nlohmann::json::parse(in)["cases"];
    std::vector<std::string> rules;
    for (const auto& c : cases) {
        const std::string rule = c["rule"].get<std::string>();
        SCOPED_TRACE(rule);
        rules.push_back(rule);
        const nlohmann::json& s = c["settings"];
        // One parameter of 40 values: an InnerProduct 1 -> 40 without bias.
        NetConfig config = parse_config(
            "layers:\n"
            "  - {name: in, type: Data, top: [data, label], source: x, label_source: y,\n"
            "     batch_size: 1, shape: [1, 1, 1]}\n"
            "  - {name: ip, type: InnerProduct, bottom: data, top: ip, num_output: 40,\n"
            "     bias_term: false}\n"
            "  - {name: loss, type: SoftmaxWithLoss, bottom: [ip, label], top: loss}\n",
            "parity.yaml");
        config.solver.type = rule;
        config.solver.base_lr = s["lr"].get<float>();
        config.solver.weight_decay = s["weight_decay"].get<float>();
        config.solver.delta = s["delta"].get<float>();
        config.solver.momentum = s.value("momentum", 0.0F);
        config.solver.momentum2 = s.value("momentum2", config.solver.momentum2);
        config.solver.rms_decay = s.value("rms_decay", config.solver.rms_decay);
        validate_config(config);
        const auto backend = make_backend("cpu", 1);
        Net net(config, Phase::train, *backend, 1);
        Solver solver(config.solver, net, *backend);
        Tensor& w = *net.params().at(0).tensor;
        ASSERT_EQ(w.count(), 40U);
        const auto w0 = c["w0"].get<std::vector<float>>();
        w.write_data(w0.data());
        for (const auto& g : c["grads"]) {
            const auto grad = g.get<std::vector<float>>();
            w.write_diff(grad.data());
            solver.apply_update();
        }
        const auto want = c["w"].get<std::vector<float>>();
        const std::vector<float> got = w.read_data();
        double largest = 0.0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            largest = std::max(largest, std::fabs(static_cast<double>(got[i]) - want[i]));
        }
        EXPECT_LT(largest, 2e-6) << "largest difference from torch.optim after 5 steps";
    }
    EXPECT_EQ(rules, (std::vector<std::string>{"AdaGrad", "RMSProp", "AdaDelta", "Adam"}));
}

TEST(SolverConfigRules, AdaGradAndRmsPropRefuseMomentumAsCaffeDoes) {
    for (const char* type : {"AdaGrad", "RMSProp"}) {
        try {
            (void)parse_config(std::string("solver: {type: ") + type +
                                   ", momentum: 0.9}\nlayers:\n"
                                   "  - {name: in, type: Data, top: [data], source: x, batch_size: "
                                   "1, shape: [1, 1, 1]}\n",
                               "m.yaml");
            ADD_FAILURE() << type << " with momentum was accepted";
        } catch (const Error& e) {
            EXPECT_NE(
                std::string(e.what()).find(std::string("momentum 0.9 cannot be used with ") + type),
                std::string::npos)
                << e.what();
        }
    }
}

} // namespace
} // namespace dl
