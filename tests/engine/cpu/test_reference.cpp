// The CPU backend, op by op, against the definition (engine/reference/reference.hpp), on random
// inputs over shapes picked to reach each of its code paths (the dispatch in
// engine/src/cpu/cpu_backend.cpp): Winograd, the direct loops and im2col + sgemm for
// convolution; max pooling's 2x2 loop, the 3x3 / stride 2 loops, the phase-split vector loops
// and the plain loops for narrow planes; the sgemm splits of the inner product; and the other
// ops on sizes with vector remainders and parallel slices. Each direct-convolution blocking this
// CPU runs is called by name against the same reference in test_cpu_convolution.cpp.
//
// Tolerances, |cpu - reference| <= t * max(1, max |reference|), the reference summing in double:
// - convolution 2e-5: Winograd's transforms round to about 5e-6 of the largest output for 5x5
//   kernels and up to 1.4e-5 for 3x3 ones over 256 channels (docs/engine.md, "Winograd
//   convolution on the CPU"); im2col and the direct loops, float sums of up to a few thousand
//   products, stay under 7e-7;
// - inner product 2e-6: float sgemm sums of up to a hundred products (3e-7 seen);
// - pooling 1e-6: float sums of at most a window's values (or of the dy of the windows a pixel
//   is in) and one division (1e-7 seen); max pooling's outputs and argmax are exact;
// - activations and dropout 1e-6: one float exp or tanh (a few ulp) or one product each;
// - softmax loss 1e-6: float exp and a sum over the classes per row, the loss summed in double;
// - LRN, BatchNorm and Scale 1e-6: float pow, float means over a channel, one float rounding
//   per result in the rest (1.2e-7 seen);
// - Eltwise sum and prod 1e-6 (at most four float terms); max, its mask and Concat are exact;
// - solvers 1e-6 after three steps of a handful of float operations each (1.6e-7 seen).
// A reference that took a tie, a divisor or a variance the other way fails them by far more.

#include "cpu/direct_conv.hpp"
#include "cpu/pooling.hpp"
#include "cpu/winograd.hpp"
#include "reference_checks.hpp"

#include <dl/backend.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace dl {
namespace {
namespace reference_cpu {

using dl_test::against_reference::Checks;
using dl_test::against_reference::Tolerances;

constexpr Tolerances k_cpu{.conv = 2e-5,
                           .inner_product = 2e-6,
                           .pool = 1e-6,
                           .activation = 1e-6,
                           .softmax = 1e-6,
                           .channels = 1e-6,
                           .eltwise = 1e-6,
                           .solver = 1e-6};

// Two threads: the backend's task splits and their ordered reductions are on the path.
class ReferenceCpu : public ::testing::Test {
protected:
    std::unique_ptr<Backend> m_backend = make_backend("cpu", 2);
    Checks m_checks{*m_backend, k_cpu, 20260135};
};

} // namespace reference_cpu

using dl_test::against_reference::describe;
using reference_cpu::ReferenceCpu;

TEST_F(ReferenceCpu, ConvolutionOnTheWinogradPath) {
    for (const ConvGeometry& g : {
             // LeNet's conv2 on 9 images: a whole group of 8 and one image in the next.
             ConvGeometry{9, 20, 12, 12, 50, 5, 1, 0, 1},
             // Padding; 9 x 7 outputs: the last tile row and column hang over the edge.
             ConvGeometry{3, 8, 11, 9, 6, 5, 1, 2, 1},
             // 20 x 20 outputs: 25 tile positions, several blocks of 8.
             ConvGeometry{2, 9, 24, 24, 4, 5, 1, 0, 1},
             // F(6x6, 3x3): ResNet-20's first stage (6x6 tiles over 32 x 32), a full group of
             // 8 and one more, and odd sizes without padding.
             ConvGeometry{3, 16, 32, 32, 16, 3, 1, 1, 1},
             ConvGeometry{9, 32, 16, 16, 32, 3, 1, 1, 1},
             ConvGeometry{2, 8, 13, 11, 6, 3, 1, 0, 1},
         }) {
        ASSERT_TRUE(cpu::winograd::applies(g)) << describe(g);
        m_checks.convolution(g, true, describe(g));
    }
    m_checks.convolution({3, 8, 8, 8, 3, 5, 1, 1, 1}, false, "Winograd without bias");
}

// The forward pass and the weight gradient run the direct loops; dx too (as the forward
// convolution of dy with the flipped kernels) where they take that adjoint convolution, else
// im2col's col2im.
TEST_F(ReferenceCpu, ConvolutionOnTheDirectPath) {
    for (const ConvGeometry& g : {
             ConvGeometry{3, 3, 32, 32, 32, 5, 1, 2, 1}, // cifar10_quick's conv1
             ConvGeometry{4, 1, 28, 28, 20, 5, 1, 0, 1}, // LeNet's conv1: a partial last vector
             ConvGeometry{5, 4, 19, 37, 7, 3, 1, 1, 1},  // odd sizes, a partial block; direct dx
             ConvGeometry{2, 3, 24, 24, 4, 9, 1, 4, 1},  // 243 taps, a partial gradient block
             ConvGeometry{3, 6, 32, 32, 6, 3, 1, 1, 1},  // 3x3, few channels: direct dx
             ConvGeometry{2, 6, 20, 22, 5, 3, 1, 0, 1},  // no padding: dx's adjoint pads by 2
         }) {
        ASSERT_TRUE(cpu::direct_conv::applies(g) && !cpu::winograd::applies(g)) << describe(g);
        m_checks.convolution(g, true, describe(g));
    }
}

TEST_F(ReferenceCpu, ConvolutionOnTheIm2colPath) {
    for (const ConvGeometry& g : {
             ConvGeometry{4, 1, 18, 18, 20, 5, 1, 0, 1}, // outputs too narrow for the direct loops
             ConvGeometry{3, 8, 9, 9, 4, 3, 2, 1, 1},    // stride 2
             ConvGeometry{2, 8, 8, 8, 4, 5, 1, 1, 2},    // groups
             ConvGeometry{2, 6, 24, 24, 4, 7, 1, 3, 1},  // 294 taps: past the direct loops
             ConvGeometry{2, 16, 38, 38, 8, 7, 1, 0, 1}, // one image per sgemm (32 x 32 outputs)
             ConvGeometry{2, 4, 33, 35, 6, 3, 1, 1, 2},  // one image per sgemm, odd, grouped
         }) {
        ASSERT_FALSE(cpu::direct_conv::applies(g) || cpu::winograd::applies(g)) << describe(g);
        m_checks.convolution(g, true, describe(g));
    }
    m_checks.convolution({2, 2, 5, 5, 3, 2, 1, 0, 1}, false, "im2col without bias");
}

// Continuous data, then data of 4 levels, whose ties the first maximum in row-major order wins.
TEST_F(ReferenceCpu, PoolingOnEveryLoop) {
    for (const PoolGeometry& g : {
             PoolGeometry{3, 5, 24, 24, 2, 2, 0}, // LeNet's 2x2 / 2 loop
             PoolGeometry{2, 3, 32, 32, 3, 2, 0}, // 3x3 / 2 (cifar10_quick's pool1): ceil mode
             PoolGeometry{2, 4, 16, 16, 3, 2, 0}, // 3x3 / 2: planes 16 wide, two to a vector
             PoolGeometry{2, 5, 8, 8, 3, 2, 0},   // 3x3 / 2: planes 8 wide, four to a vector
             PoolGeometry{1, 2, 35, 35, 3, 2, 0}, // 3x3 / 2: 17 columns, past whole vectors
             PoolGeometry{2, 3, 6, 6, 3, 2, 0},   // Caffe's ceil mode: a window over the edge
             PoolGeometry{2, 3, 20, 40, 3, 1, 1}, // phase-split vector loops, padded
             PoolGeometry{2, 2, 17, 45, 5, 3, 2}, // phases of stride 3, a partial vector
             PoolGeometry{2, 3, 7, 7, 3, 2, 1},   // plain loops: padded, narrow
             PoolGeometry{2, 3, 9, 9, 2, 2, 0},   // plain loops: 2x2 on odd sizes
         }) {
        const bool vectors = cpu::pool_vectors_pay(g);
        const std::string what = describe(g) + (vectors ? " (vector loops)" : " (plain loops)");
        m_checks.max_pooling(g, true, 0, what);
        m_checks.max_pooling(g, true, 4, what + " with ties");
        m_checks.average_pooling(g, what);
    }
}

TEST_F(ReferenceCpu, InnerProductOverItsTaskSplits) {
    m_checks.inner_product(5, 12, 7, true);
    m_checks.inner_product(3, 2, 3, true); // fewer outputs and inputs than the 4 tasks
    m_checks.inner_product(16, 100, 33, false);
    m_checks.inner_product(64, 50, 10, true);
}

TEST_F(ReferenceCpu, AbsValBnllEluAndPower) {
    using dl::Pointwise;
    for (const std::size_t n : {std::size_t{37}, std::size_t{1000}}) {
        m_checks.pointwise(Pointwise::absval, {}, n);
        m_checks.pointwise(Pointwise::bnll, {}, n);
        m_checks.pointwise(Pointwise::elu, {.alpha = 0.7F}, n);
        m_checks.pointwise(Pointwise::power, {.power = 2.5F, .scale = 0.5F, .shift = 1.0F}, n);
        m_checks.pointwise(Pointwise::power, {.power = 1.0F, .scale = -3.0F, .shift = 2.0F}, n);
    }
}

TEST_F(ReferenceCpu, EuclideanAndSigmoidCrossEntropyLosses) {
    m_checks.regression_losses(4, 4 * 784);
    m_checks.regression_losses(3, 7);
}

TEST_F(ReferenceCpu, HingeLoss) {
    for (const bool l2 : {false, true}) {
        m_checks.hinge_loss(8, 10, l2);
        m_checks.hinge_loss(3, 1000, l2);
    }
}

TEST_F(ReferenceCpu, ContrastiveLoss) {
    for (const bool legacy : {false, true}) {
        m_checks.contrastive_loss(64, 10, legacy ? 4.0F : 2.0F, legacy); // the siamese net's
        m_checks.contrastive_loss(5, 3, 0.5F, legacy);                   // none pushed (legacy)
    }
}

TEST_F(ReferenceCpu, ActivationsInPlaceAndNot) {
    for (const Activation kind : {Activation::relu, Activation::sigmoid, Activation::tanh}) {
        for (const std::size_t n : {std::size_t{37}, std::size_t{1000}}) { // vector remainders
            m_checks.activation(kind, n, false);
            m_checks.activation(kind, n, true);
        }
    }
}

TEST_F(ReferenceCpu, DropoutGivenItsMask) {
    m_checks.dropout(20000, 0.3F);
}

TEST_F(ReferenceCpu, SoftmaxLossAndAccuracy) {
    m_checks.softmax_loss(64, 10, 1.0F / 64.0F);
    m_checks.softmax_loss(7, 100, 0.5F);
    m_checks.accuracy(64, 10, 0);
    m_checks.accuracy(64, 10, 3); // ties
}

TEST_F(ReferenceCpu, LrnAcrossChannels) {
    m_checks.lrn({2, 7, 20}, {5, 1.0F, 0.75F, 1.0F});
    m_checks.lrn({3, 4, 9}, {3, 2.0F, 0.5F, 2.0F});
    m_checks.lrn({2, 3, 6}, {7, 0.5F, 0.75F, 1.0F}); // a window wider than the channels
}

TEST_F(ReferenceCpu, LrnWithinChannels) {
    // cifar10_full's: local_size 3, alpha 5e-5 (here larger, so the scale is far from 1).
    m_checks.lrn_within({.batch = 2, .channels = 3, .height = 6, .width = 5, .kernel = 3, .pad = 1},
                        {3, 0.5F, 0.75F, 1.0F});
    // A square wider than the image (clipped on every side), and a non-square image.
    m_checks.lrn_within({.batch = 1, .channels = 2, .height = 3, .width = 7, .kernel = 5, .pad = 2},
                        {5, 2.0F, 0.5F, 1.0F});
}

TEST_F(ReferenceCpu, BatchNormWithBatchAndGlobalStatistics) {
    for (const bool use_global : {false, true}) {
        for (const bool in_place : {false, true}) {
            m_checks.batch_norm({4, 3, 10}, use_global, in_place);
        }
        m_checks.batch_norm({6, 5, 1}, use_global, false); // after an inner product
        // 52,800 values: past the size from which channels run as parallel tasks.
        m_checks.batch_norm({8, 6, 1100}, use_global, false);
    }
}

TEST_F(ReferenceCpu, ScaleWithAndWithoutBias) {
    m_checks.scale({3, 4, 10}, false, false);
    m_checks.scale({3, 4, 10}, true, false);
    m_checks.scale({2, 5, 7}, true, true);
    m_checks.scale({4, 5, 2001}, true, false); // channels in parallel tasks
}

TEST_F(ReferenceCpu, PRelu) {
    for (const bool shared : {false, true}) {
        m_checks.prelu({3, 4, 10}, shared, false);
        m_checks.prelu({2, 5, 7}, shared, true);
    }
}

TEST_F(ReferenceCpu, ConcatAndEltwise) {
    m_checks.concat(2, {12, 20, 4}); // axis 1 of 2 x C x 2 x 2 inputs
    m_checks.concat(1, {5, 7});      // axis 0
    m_checks.eltwise(EltwiseOp::sum, 1000, 2, 0);
    m_checks.eltwise(EltwiseOp::sum, 1000, 3, 0);
    m_checks.eltwise(EltwiseOp::prod, 1000, 3, 0);
    m_checks.eltwise(EltwiseOp::max, 1000, 2, 3);  // ties between the first two
    m_checks.eltwise(EltwiseOp::max, 1000, 4, 3);  // and with later inputs
    m_checks.eltwise(EltwiseOp::sum, 40001, 2, 0); // in parallel slices
    m_checks.eltwise(EltwiseOp::max, 40001, 3, 3);
}

// BatchNorm's and Scale's per-channel sums run in tasks over channels; each channel's sum is one
// task's, in one order: 1 and 3 threads give the same bits.
TEST(CpuChannelOps, BitIdenticalWhateverTheThreadCount) {
    const ChannelGeometry g{8, 6, 1100};
    std::mt19937 rng(20261130);
    std::normal_distribution<float> normal(0.5F, 2.0F);
    std::vector<float> x(g.count());
    std::vector<float> dy(g.count());
    for (float& v : x) {
        v = normal(rng);
    }
    for (float& v : dy) {
        v = normal(rng);
    }
    const std::vector<float> gamma = {0.5F, -1.0F, 2.0F, 1.5F, 0.25F, -0.75F};
    const auto run = [&](int threads) {
        std::unique_ptr<Backend> backend = make_backend("cpu", threads);
        std::vector<float> mean(6, 0.1F);
        std::vector<float> var(6, 0.2F);
        std::vector<float> factor = {1.0F};
        std::vector<float> inv_std(6);
        std::vector<float> y(g.count());
        std::vector<float> dx(g.count());
        std::vector<float> scaled(g.count());
        std::vector<float> dgamma(6);
        std::vector<float> dbeta(6);
        backend->batch_norm_forward(g, false, 1e-5F, 0.999F, x.data(), mean.data(), var.data(),
                                    factor.data(), inv_std.data(), y.data());
        backend->batch_norm_backward(g, false, y.data(), inv_std.data(), dy.data(), dx.data());
        backend->scale_forward(g, y.data(), gamma.data(), gamma.data(), scaled.data());
        backend->scale_backward(g, y.data(), gamma.data(), dy.data(), dx.data(), dgamma.data(),
                                dbeta.data());
        return std::vector<std::vector<float>>{mean,   var, factor, inv_std, y,
                                               scaled, dx,  dgamma, dbeta};
    };
    const auto one = run(1);
    const auto two = run(2);
    for (std::size_t i = 0; i < one.size(); ++i) {
        ASSERT_EQ(one[i].size(), two[i].size());
        EXPECT_EQ(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(float)), 0)
            << "output " << i;
    }
}

// 40000 values: past the size from which an update is split into parallel slices.
TEST_F(ReferenceCpu, SolverUpdates) {
    for (const std::string rule : {"SGD", "Nesterov", "Adam", "AdaGrad", "RMSProp", "AdaDelta"}) {
        m_checks.solver(rule, {1000, 7, 40000}, false);
        m_checks.solver(rule, {1000, 7, 40000}, true);
    }
}

} // namespace
} // namespace dl
