// The CUDA backend, op by op, against the definition (engine/reference/reference.hpp): the
// checks the CPU backend passes in tests/engine/cpu/test_reference.cpp, on the shapes of the
// networks and the edge cases of each op (padding, stride, groups, Caffe's ceil-mode pooling,
// windows over the edge, in-place layers). Suite GpuReference (ctest label gpu) skips, saying
// why, without a CUDA build or a visible GPU.
//
// Tolerances, |gpu - reference| <= t * max(1, max |reference|): cuDNN and cuBLAS sum in other
// orders than a plain loop and nvcc fuses multiply-adds, so results agree to float rounding;
// the bounds are those the GPU has met against the CPU since the backend was written
// (test_gpu_backend.cpp), which the double-precision reference can only tighten: 1e-4 per op,
// 2e-4 for convolution (its gradients sum thousands of products), 1e-5 for the solvers'
// elementwise updates. Max pooling's outputs, Eltwise max and its mask, Concat's copies and
// accuracy (a count) are exact. Max pooling runs on continuous data only: cuDNN's choice among
// tied pixels is its own, and the GPU recomputes the winners instead of keeping an argmax.

#include "engine_test_support.hpp"
#include "reference_checks.hpp"

#include <dl/backend.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace dl {
namespace {
namespace reference_gpu {

using dl_test::against_reference::Checks;
using dl_test::against_reference::Tolerances;

constexpr Tolerances k_gpu{.conv = 2e-4,
                           .inner_product = 1e-4,
                           .pool = 1e-4,
                           .activation = 1e-4,
                           .softmax = 1e-4,
                           .channels = 1e-4,
                           .eltwise = 1e-4,
                           .solver = 1e-5};

class GpuReference : public ::testing::Test {
protected:
    void SetUp() override {
        static const std::string why_not = dl_test::why_no_gpu();
        if (!why_not.empty()) {
            GTEST_SKIP() << "no GPU test: " << why_not;
        }
        m_backend = make_backend("cuda:0", 1);
        m_checks = std::make_unique<Checks>(*m_backend, k_gpu, 20260135);
    }
    std::unique_ptr<Backend> m_backend;
    std::unique_ptr<Checks> m_checks;
};

} // namespace reference_gpu

using reference_gpu::GpuReference;

TEST_F(GpuReference, Convolution) {
    m_checks->convolution({4, 1, 28, 28, 20, 5, 1, 0, 1}, true, "LeNet's conv1");
    m_checks->convolution({9, 20, 12, 12, 50, 5, 1, 0, 1}, true, "LeNet's conv2");
    m_checks->convolution({3, 3, 32, 32, 32, 5, 1, 2, 1}, true, "cifar10_quick's conv1");
    m_checks->convolution({3, 8, 9, 9, 4, 3, 2, 1, 1}, true, "stride 2, padding");
    m_checks->convolution({2, 4, 33, 35, 6, 3, 1, 1, 2}, true, "groups, odd sizes");
    m_checks->convolution({2, 2, 5, 5, 3, 2, 1, 0, 1}, false, "no bias");
}

TEST_F(GpuReference, Pooling) {
    for (const PoolGeometry& g : {
             PoolGeometry{3, 5, 24, 24, 2, 2, 0}, // LeNet's: cuDNN
             PoolGeometry{2, 3, 32, 32, 3, 2, 0}, // Caffe's ceil mode: the backend's own kernel
             PoolGeometry{2, 3, 20, 40, 3, 1, 1}, // padded
             PoolGeometry{2, 2, 17, 45, 5, 3, 2}, // stride 3, a window over the edge
             PoolGeometry{2, 3, 7, 7, 3, 2, 1},   // padded, ceil mode
         }) {
        const std::string what = std::to_string(g.height) + " x " + std::to_string(g.width) +
                                 " kernel " + std::to_string(g.kernel) + " stride " +
                                 std::to_string(g.stride) + " pad " + std::to_string(g.pad);
        m_checks->max_pooling(g, false, 0, what);
        m_checks->average_pooling(g, what);
    }
}

TEST_F(GpuReference, InnerProduct) {
    m_checks->inner_product(5, 12, 7, true);
    m_checks->inner_product(64, 800, 50, true);
    m_checks->inner_product(16, 100, 33, false);
}

TEST_F(GpuReference, AbsValBnllEluAndPower) {
    m_checks->pointwise(Pointwise::absval, {}, 1000);
    m_checks->pointwise(Pointwise::bnll, {}, 1000);
    m_checks->pointwise(Pointwise::elu, {.alpha = 0.7F}, 1000);
    m_checks->pointwise(Pointwise::power, {.power = 2.5F, .scale = 0.5F, .shift = 1.0F}, 1000);
}

TEST_F(GpuReference, EuclideanAndSigmoidCrossEntropyLosses) {
    m_checks->regression_losses(4, 4 * 784);
    m_checks->regression_losses(3, 7);
}

TEST_F(GpuReference, HingeLoss) {
    for (const bool l2 : {false, true}) {
        m_checks->hinge_loss(8, 10, l2);
        m_checks->hinge_loss(3, 1000, l2);
    }
}

TEST_F(GpuReference, ContrastiveLoss) {
    for (const bool legacy : {false, true}) {
        m_checks->contrastive_loss(64, 10, legacy ? 4.0F : 2.0F, legacy);
        m_checks->contrastive_loss(5, 300, 0.5F, legacy); // rows of more values than a block
    }
}

TEST_F(GpuReference, ActivationsInPlaceAndNot) {
    for (const Activation kind : {Activation::relu, Activation::sigmoid, Activation::tanh}) {
        m_checks->activation(kind, 1000, false);
        m_checks->activation(kind, 1000, true);
    }
}

TEST_F(GpuReference, DropoutGivenItsMask) {
    m_checks->dropout(100000, 0.3F);
}

TEST_F(GpuReference, SoftmaxLossAndAccuracy) {
    m_checks->softmax_loss(64, 10, 1.0F / 64.0F);
    m_checks->softmax_loss(7, 100, 0.5F);
    m_checks->accuracy(64, 10, 0);
    m_checks->accuracy(64, 10, 3);
}

TEST_F(GpuReference, LrnBatchNormAndScale) {
    m_checks->lrn({2, 7, 20}, {5, 1.0F, 0.75F, 1.0F});
    m_checks->lrn({2, 3, 6}, {7, 0.5F, 0.75F, 1.0F});
    m_checks->lrn_within(
        {.batch = 2, .channels = 3, .height = 6, .width = 5, .kernel = 3, .pad = 1},
        {3, 0.5F, 0.75F, 1.0F});
    m_checks->lrn_within(
        {.batch = 1, .channels = 2, .height = 3, .width = 7, .kernel = 5, .pad = 2},
        {5, 2.0F, 0.5F, 1.0F});
    for (const bool use_global : {false, true}) {
        m_checks->batch_norm({4, 3, 10}, use_global, false);
        m_checks->batch_norm({4, 3, 10}, use_global, true);
    }
    m_checks->scale({3, 4, 10}, true, false);
    m_checks->scale({2, 5, 7}, false, true);
}

TEST_F(GpuReference, PRelu) {
    for (const bool shared : {false, true}) {
        m_checks->prelu({3, 4, 10}, shared, false);
        m_checks->prelu({2, 5, 300}, shared, true); // channels of more values than a block
    }
}

TEST_F(GpuReference, ConcatAndEltwise) {
    m_checks->concat(2, {12, 20, 4});
    m_checks->eltwise(EltwiseOp::sum, 1000, 3, 0);
    m_checks->eltwise(EltwiseOp::prod, 1000, 3, 0);
    m_checks->eltwise(EltwiseOp::max, 1000, 4, 3);
}

TEST_F(GpuReference, SolverUpdates) {
    for (const std::string rule : {"SGD", "Nesterov", "Adam", "AdaGrad", "RMSProp", "AdaDelta"}) {
        m_checks->solver(rule, {1000, 7, 300}, false);
        m_checks->solver(rule, {1000, 7, 300}, true);
    }
}

} // namespace
} // namespace dl
