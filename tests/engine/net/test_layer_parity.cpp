// Parity with PyTorch for single layers: average pooling, Sigmoid, TanH, grouped convolution,
// LRN, BatchNorm (batch and global statistics, and the running sums it keeps), Scale, Concat
// and Eltwise (sum, prod, max). parity/make_layer_fixture.py wrote the cases with Debian's
// python3-torch, in float64 from the same float32 inputs; the engine must match the top and
// every gradient to 1e-5 of the largest magnitude.

#include "layer_runner.hpp"
#include "test_paths.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

namespace dl {
namespace {

constexpr double k_tolerance = 1e-5;

LayerConfig config_of(const nlohmann::json& json, const std::string& name) {
    LayerConfig config;
    config.name = name;
    config.type = json.at("type").get<std::string>();
    config.pool = json.value("pool", config.pool);
    config.kernel_size = json.value("kernel_size", config.kernel_size);
    config.stride = json.value("stride", config.stride);
    config.pad = json.value("pad", config.pad);
    config.num_output = json.value("num_output", config.num_output);
    config.group = json.value("group", config.group);
    config.local_size = json.value("local_size", config.local_size);
    config.alpha = json.value("alpha", config.alpha);
    config.beta = json.value("beta", config.beta);
    config.k = json.value("k", config.k);
    config.norm_region = json.value("norm_region", config.norm_region);
    config.power = json.value("power", config.power);
    config.loss_weight = json.value("loss_weight", config.loss_weight);
    config.shift = json.value("shift", config.shift);
    config.margin = json.value("margin", config.margin);
    config.legacy_version = json.value("legacy_version", config.legacy_version);
    config.channel_shared = json.value("channel_shared", config.channel_shared);
    config.norm = json.value("norm", config.norm);
    config.crop_offset = json.value("offset", config.crop_offset);
    if (config.type == "Power") {
        config.scale = json.value("scale", config.scale);
    }
    if (json.contains("use_global_stats")) {
        config.use_global_stats = json["use_global_stats"].get<bool>();
    }
    config.eps = json.value("eps", config.eps);
    if (config.type == "Scale") {
        config.bias_term = json.value("bias_term", false);
    }
    config.axis = json.value("axis", config.axis);
    config.operation = json.value("operation", config.operation);
    config.coeff = json.value("coeff", config.coeff);
    return config;
}

void expect_torch_close(const std::vector<float>& engine, const std::vector<float>& torch,
                        const std::string& what) {
    ASSERT_EQ(engine.size(), torch.size()) << what;
    double max_diff = 0.0;
    double max_ref = 1e-3; // an all-zero reference (BatchNorm's statistics) must match exactly
    for (std::size_t i = 0; i < torch.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(engine[i]) - torch[i]));
        max_ref = std::max(max_ref, std::fabs(static_cast<double>(torch[i])));
    }
    EXPECT_LE(max_diff, k_tolerance * max_ref)
        << what << ": max difference " << max_diff << " against max magnitude " << max_ref;
}

nlohmann::json load_cases() {
    std::ifstream in(std::string(DLJOB_SOURCE_DIR) + "/tests/engine/parity/layers.json");
    EXPECT_TRUE(in) << "missing tests/engine/parity/layers.json";
    return nlohmann::json::parse(in)["cases"];
}

TEST(LayerParity, EveryCaffeLayerMatchesPyTorchForwardAndBackward) {
    const nlohmann::json cases = load_cases();
    auto backend = make_backend("cpu", 2);
    std::set<std::string> types;
    for (const auto& c : cases) {
        const std::string name = c["name"].get<std::string>();
        SCOPED_TRACE(name);
        const LayerConfig config = config_of(c["layer"], name);
        types.insert(config.type);
        dl_test::LayerInput input;
        for (const auto& b : c["bottoms"]) {
            input.bottom_shapes.push_back(b["shape"].get<std::vector<int>>());
            input.bottoms.push_back(b["data"].get<std::vector<float>>());
        }
        for (const auto& p : c["params"]) {
            input.params.push_back(p["data"].get<std::vector<float>>());
        }
        input.dy = c["dy"].get<std::vector<float>>();
        const dl_test::LayerRun run = dl_test::run_layer(config, *backend, input);
        EXPECT_EQ(run.top_shape, c["top"]["shape"].get<std::vector<int>>());
        expect_torch_close(run.top, c["top"]["data"].get<std::vector<float>>(), name + " top");
        for (std::size_t b = 0; b < run.dbottoms.size(); ++b) {
            expect_torch_close(run.dbottoms[b], c["dbottoms"][b].get<std::vector<float>>(),
                               name + " d(bottom " + std::to_string(b) + ")");
        }
        ASSERT_EQ(run.dparams.size(), c["dparams"].size());
        for (std::size_t p = 0; p < run.dparams.size(); ++p) {
            expect_torch_close(run.dparams[p], c["dparams"][p].get<std::vector<float>>(),
                               name + " d(param " + std::to_string(p) + ")");
        }
        if (c.contains("params_after")) {
            for (std::size_t p = 0; p < run.params_after.size(); ++p) {
                expect_torch_close(run.params_after[p],
                                   c["params_after"][p].get<std::vector<float>>(),
                                   name + " param " + std::to_string(p) + " after forward");
            }
        }
    }
    // A regenerated fixture that lost a layer would otherwise pass quietly.
    EXPECT_EQ(types, (std::set<std::string>{"Pooling",
                                            "Sigmoid",
                                            "TanH",
                                            "Convolution",
                                            "LRN",
                                            "BatchNorm",
                                            "Scale",
                                            "Concat",
                                            "Eltwise",
                                            "AbsVal",
                                            "BNLL",
                                            "ELU",
                                            "Power",
                                            "EuclideanLoss",
                                            "SigmoidCrossEntropyLoss",
                                            "Softmax",
                                            "ContrastiveLoss",
                                            "PReLU",
                                            "HingeLoss",
                                            "Crop",
                                            "Deconvolution"}));
}

} // namespace
} // namespace dl
