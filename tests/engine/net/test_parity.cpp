// Parity with PyTorch on LeNet (ip1 narrowed to 100; see parity/make_fixture.py, which wrote
// the fixture with Debian's python3-torch): forward logits, loss, every gradient, the losses of
// three Caffe-rule SGD steps with the inv policy, and the weights after them, to 1e-4 relative.

#include "test_paths.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

namespace dl {
namespace {

const std::string k_dir = std::string(DLJOB_SOURCE_DIR) + "/tests/engine/parity/";
constexpr double k_lenet_tolerance = 1e-4;

class Parity : public ::testing::Test {
protected:
    void SetUp() override {
        std::ifstream index_file(k_dir + "fixture.json");
        ASSERT_TRUE(index_file) << "missing " << k_dir << "fixture.json";
        m_index = nlohmann::json::parse(index_file);
        std::ifstream bin(k_dir + "fixture.bin", std::ios::binary);
        const std::string bytes{std::istreambuf_iterator<char>(bin),
                                std::istreambuf_iterator<char>()};
        m_floats.resize(bytes.size() / sizeof(float));
        std::memcpy(m_floats.data(), bytes.data(), m_floats.size() * sizeof(float));
    }

    std::vector<float> fixture(const std::string& name, const std::vector<int>& shape) {
        const auto& entry = m_index["tensors"].at(name);
        EXPECT_EQ(entry["shape"].get<std::vector<int>>(), shape) << name;
        std::size_t count = 1;
        for (const int d : shape) {
            count *= static_cast<std::size_t>(d);
        }
        const auto offset = entry["offset"].get<std::size_t>();
        return {m_floats.begin() + static_cast<std::ptrdiff_t>(offset),
                m_floats.begin() + static_cast<std::ptrdiff_t>(offset + count)};
    }

    // max |engine - torch| / max |torch| over the tensor.
    static void expect_close(const float* engine, const std::vector<float>& torch,
                             const std::string& what) {
        double max_diff = 0.0;
        double max_ref = 0.0;
        for (std::size_t i = 0; i < torch.size(); ++i) {
            max_diff = std::max(max_diff, std::fabs(static_cast<double>(engine[i]) - torch[i]));
            max_ref = std::max(max_ref, std::fabs(static_cast<double>(torch[i])));
        }
        EXPECT_LE(max_diff, k_lenet_tolerance * max_ref)
            << what << ": max difference " << max_diff << " against max magnitude " << max_ref;
    }

    nlohmann::json m_index;
    std::vector<float> m_floats;
};

TEST_F(Parity, LeNetMatchesPyTorchForwardBackwardAndSolverSteps) {
    const NetConfig config = load_config(k_dir + "lenet_parity.yaml");
    auto backend = make_backend("cpu", 2);
    Net net(config, Phase::train, *backend, 1);
    Solver solver(config.solver, net, *backend);
    for (const auto& param : net.params()) {
        const auto init = fixture("init." + param.name, param.tensor->shape());
        std::copy(init.begin(), init.end(), param.tensor->data());
    }
    NetInput& input = net.inputs().front();
    const int steps = m_index["steps"].get<int>();
    const int batch = m_index["batch"].get<int>();
    for (int step = 0; step < steps; ++step) {
        const auto images = fixture("input_" + std::to_string(step), {batch, 1, 28, 28});
        const auto labels = fixture("label_" + std::to_string(step), {batch});
        std::copy(images.begin(), images.end(), input.data->data());
        std::copy(labels.begin(), labels.end(), input.labels->data());
        const float loss = net.forward();
        const double torch_loss = m_index["losses"][static_cast<std::size_t>(step)].get<double>();
        EXPECT_NEAR(loss, torch_loss, k_lenet_tolerance * std::fabs(torch_loss)) << "step " << step;
        net.backward();
        if (step == 0) {
            expect_close(net.blob("ip2")->data(), fixture("logits_0", {batch, 10}), "logits");
            for (const auto& param : net.params()) {
                expect_close(param.tensor->diff(),
                             fixture("grad." + param.name, param.tensor->shape()),
                             "gradient of " + param.name);
            }
        }
        solver.apply_update();
    }
    // The updates (final - initial weights), not the weights: a 1e-4 relative check on the
    // weights themselves would miss a small term of the rule such as the weight decay.
    for (const auto& param : net.params()) {
        const auto init = fixture("init." + param.name, param.tensor->shape());
        auto torch_update = fixture("final." + param.name, param.tensor->shape());
        std::vector<float> engine_update(init.size());
        for (std::size_t i = 0; i < init.size(); ++i) {
            torch_update[i] -= init[i];
            engine_update[i] = param.tensor->data()[i] - init[i];
        }
        expect_close(engine_update.data(), torch_update, "update of " + param.name);
    }
}

} // namespace
} // namespace dl
