// The CUDA kernels of the Caffe layers beyond LeNet against the CPU reference
// (engine/src/cpu/channel_ops.cpp), layer by layer on fresh random inputs: top, every bottom
// gradient, every parameter gradient and BatchNorm's running statistics. Suite GpuLayers: ctest
// label gpu; skips, saying why, without a CUDA build or a visible GPU. Run alone with
// dl_engine_tests --gtest_filter='GpuLayers.*'.
//
// Tolerance: |gpu - cpu| <= 1e-4 * max(1, max |cpu|), as in test_gpu_backend.cpp (the kernels
// sum in the CPU's order, in double per channel; nvcc fuses multiply-adds).

#include "engine_test_support.hpp"
#include "layer_runner.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace dl {
namespace {

using dl_test::why_no_gpu;

void expect_gpu_close(const std::vector<float>& cpu, const std::vector<float>& gpu,
                      const std::string& what) {
    ASSERT_EQ(cpu.size(), gpu.size()) << what;
    float scale = 1.0F;
    for (const float v : cpu) {
        scale = std::max(scale, std::fabs(v));
    }
    int reported = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i) {
        if (!(std::fabs(cpu[i] - gpu[i]) <= 1e-4F * scale) && reported++ < 5) {
            ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << ", gpu " << gpu[i];
        }
    }
}

class GpuLayers : public ::testing::Test {
protected:
    void SetUp() override {
        static const std::string reason = why_no_gpu();
        if (!reason.empty()) {
            GTEST_SKIP() << "no GPU test: " << reason;
        }
        m_cpu = make_backend("cpu", 2);
        m_gpu = make_backend("cuda:0", 1);
    }

    std::vector<float> random(std::size_t n, float low = -1.0F, float high = 1.0F) {
        std::uniform_real_distribution<float> uniform(low, high);
        std::vector<float> values(n);
        for (float& v : values) {
            v = uniform(m_rng);
        }
        return values;
    }

    static std::size_t count(const std::vector<int>& shape) {
        std::size_t n = 1;
        for (const int d : shape) {
            n *= static_cast<std::size_t>(d);
        }
        return n;
    }

    // The same random bottoms, parameters and top gradient through both backends.
    void compare(const LayerConfig& config, const std::vector<std::vector<int>>& shapes,
                 const std::vector<std::vector<float>>& params = {}, bool in_place = false,
                 Phase phase = Phase::train) {
        SCOPED_TRACE(config.name);
        dl_test::LayerInput input;
        input.bottom_shapes = shapes;
        input.in_place = in_place;
        input.phase = phase;
        for (const auto& shape : shapes) {
            input.bottoms.push_back(random(count(shape), -2.0F, 2.0F));
        }
        input.params = params;
        const auto probe = dl_test::run_layer(config, *m_cpu, input);
        input.dy = random(probe.top.size());
        const auto cpu = dl_test::run_layer(config, *m_cpu, input);
        const auto gpu = dl_test::run_layer(config, *m_gpu, input);
        EXPECT_EQ(cpu.top_shape, gpu.top_shape);
        expect_gpu_close(cpu.top, gpu.top, "top");
        for (std::size_t b = 0; b < cpu.dbottoms.size(); ++b) {
            expect_gpu_close(cpu.dbottoms[b], gpu.dbottoms[b],
                             "d(bottom " + std::to_string(b) + ")");
        }
        ASSERT_EQ(cpu.dparams.size(), gpu.dparams.size());
        for (std::size_t p = 0; p < cpu.dparams.size(); ++p) {
            expect_gpu_close(cpu.dparams[p], gpu.dparams[p], "d(param " + std::to_string(p) + ")");
            expect_gpu_close(cpu.params_after[p], gpu.params_after[p],
                             "param " + std::to_string(p) + " after forward");
        }
    }

    static LayerConfig layer(const std::string& name, const std::string& type) {
        LayerConfig config;
        config.name = name;
        config.type = type;
        return config;
    }

    std::mt19937 m_rng{20261126};
    std::unique_ptr<Backend> m_cpu;
    std::unique_ptr<Backend> m_gpu;
};

TEST_F(GpuLayers, LrnMatchesTheCpu) {
    LayerConfig lrn = layer("lrn", "LRN");
    lrn.alpha = 0.5F;
    lrn.k = 2.0F;
    compare(lrn, {{3, 7, 5, 5}});
    lrn.local_size = 3;
    lrn.alpha = 1e-4F; // CaffeNet's values
    lrn.k = 1.0F;
    compare(lrn, {{2, 16, 9, 9}});
    lrn.norm_region = "within_channel"; // cifar10_full's
    lrn.alpha = 0.5F;
    compare(lrn, {{2, 4, 8, 7}});
}

TEST_F(GpuLayers, BatchNormMatchesTheCpuWithBatchAndGlobalStatistics) {
    const LayerConfig bn = layer("bn", "BatchNorm");
    // More values per channel than a block has threads: the strided sums are exercised.
    compare(bn, {{8, 5, 9, 9}}, {random(5), random(5, 0.5F, 2.0F), {3.0F}});
    compare(bn, {{8, 5, 9, 9}}, {random(5), random(5, 0.5F, 2.0F), {3.0F}}, true);
    compare(bn, {{4, 5, 3, 3}}, {random(5), random(5, 0.5F, 2.0F), {3.0F}}, false, Phase::test);
    compare(bn, {{16, 6}}, {random(6), random(6, 0.5F, 2.0F), {1.0F}});
}

TEST_F(GpuLayers, ScaleMatchesTheCpuWithAndWithoutBiasAndInPlace) {
    LayerConfig scale = layer("scale", "Scale");
    compare(scale, {{4, 6, 5, 5}}, {random(6)});
    scale.bias_term = true;
    compare(scale, {{4, 6, 5, 5}}, {random(6), random(6)});
    compare(scale, {{4, 6, 5, 5}}, {random(6), random(6)}, true);
}

TEST_F(GpuLayers, ConcatMatchesTheCpuOnChannelsAndBatch) {
    LayerConfig concat = layer("concat", "Concat");
    compare(concat, {{2, 3, 4, 4}, {2, 5, 4, 4}, {2, 1, 4, 4}});
    concat.axis = 0;
    compare(concat, {{2, 3, 4, 4}, {3, 3, 4, 4}});
}

TEST_F(GpuLayers, EltwiseSumProdAndMaxMatchTheCpu) {
    LayerConfig eltwise = layer("eltwise", "Eltwise");
    eltwise.coeff = {0.5F, -2.0F, 1.5F};
    compare(eltwise, {{2, 4, 5, 5}, {2, 4, 5, 5}, {2, 4, 5, 5}});
    eltwise.coeff.clear();
    eltwise.operation = "prod";
    compare(eltwise, {{2, 4, 5, 5}, {2, 4, 5, 5}, {2, 4, 5, 5}});
    eltwise.operation = "max";
    compare(eltwise, {{2, 4, 5, 5}, {2, 4, 5, 5}, {2, 4, 5, 5}});
}

TEST_F(GpuLayers, SoftmaxMatchesTheCpu) {
    compare(layer("prob", "Softmax"), {{8, 10}});
    compare(layer("prob", "Softmax"), {{2, 6, 4, 5}}); // every pixel of a map
    compare(layer("prob", "Softmax"), {{2, 30, 2, 2}});
}

TEST_F(GpuLayers, AbsValBnllEluPowerAndReshapeMatchTheCpu) {
    compare(layer("abs", "AbsVal"), {{2, 3, 4, 4}});
    compare(layer("bnll", "BNLL"), {{2, 3, 4, 4}});
    LayerConfig elu = layer("elu", "ELU");
    elu.alpha = 0.7F;
    compare(elu, {{2, 3, 4, 4}});
    LayerConfig power = layer("power", "Power");
    power.power = 2.0F; // an integer power: the random inputs may make the base negative
    power.scale = 0.5F;
    power.shift = 1.0F;
    compare(power, {{2, 3, 4, 4}});
    LayerConfig reshape = layer("reshape", "Reshape");
    reshape.shape = {0, -1};
    compare(reshape, {{2, 3, 4, 4}});
}

TEST_F(GpuLayers, FlattenMatchesTheCpu) {
    LayerConfig flat = layer("flat", "Flatten");
    compare(flat, {{3, 4, 5, 5}});
    flat.axis = 2;
    compare(flat, {{3, 4, 5, 5}});
}

TEST_F(GpuLayers, PReluCropAndDeconvolutionMatchTheCpu) {
    LayerConfig prelu = layer("prelu", "PReLU");
    compare(prelu, {{4, 6, 5, 5}}, {random(6, -0.5F, 0.5F)});
    compare(prelu, {{2, 3, 40, 40}}, {random(3, -0.5F, 0.5F)}, true); // in place, long channels
    prelu.channel_shared = true;
    compare(prelu, {{4, 6, 5, 5}}, {random(1, -0.5F, 0.5F)});
    LayerConfig crop = layer("crop", "Crop");
    crop.axis = 2;
    crop.crop_offset = {1, 2};
    compare(crop, {{2, 3, 7, 8}, {2, 1, 4, 5}});
    LayerConfig deconv = layer("deconv", "Deconvolution");
    deconv.num_output = 6;
    deconv.kernel_size = 4;
    deconv.stride = 2;
    deconv.pad = 1;
    deconv.group = 2;
    compare(deconv, {{2, 4, 5, 5}}, {random(4 * 3 * 4 * 4), random(6)});
}

TEST_F(GpuLayers, ContrastiveAndHingeLossesMatchTheCpu) {
    // Similarities and labels from the same random draw: a similarity's integer part (-1, 0 or
    // 1) decides alike or not on both backends; a label outside the classes counts every score
    // as another class's on both.
    LayerConfig contrastive = layer("contrastive", "ContrastiveLoss");
    contrastive.margin = 2.0F;
    compare(contrastive, {{64, 10}, {64, 10}, {64}});
    contrastive.legacy_version = true;
    compare(contrastive, {{5, 300}, {5, 300}, {5}});
    LayerConfig hinge = layer("hinge", "HingeLoss");
    compare(hinge, {{8, 10}, {8}});
    hinge.norm = "l2";
    compare(hinge, {{3, 1000}, {3}});
}

} // namespace
} // namespace dl
