#pragma once
// The checks of tests/engine/cpu/test_reference.cpp and tests/engine/gpu/test_gpu_reference.cpp:
// each runs one op of a Backend on random inputs and compares what it computes with the op's
// definition, dl::ref (engine/reference/reference.hpp). Inputs reach the backend's memory and
// results come back through upload and download, so the same checks hold the CPU and the CUDA
// backend; each test file says its tolerances and why.

#include "reference/reference.hpp"

#include <dl/backend.hpp>
#include <dl/memory.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace dl_test::against_reference {

// A geometry in test messages.
inline std::string describe(const dl::ConvGeometry& g) {
    return std::to_string(g.batch) + " x " + std::to_string(g.channels) + " x " +
           std::to_string(g.height) + " x " + std::to_string(g.width) + " -> " +
           std::to_string(g.outputs) + ", kernel " + std::to_string(g.kernel) + " stride " +
           std::to_string(g.stride) + " pad " + std::to_string(g.pad) + " group " +
           std::to_string(g.group);
}

inline std::string describe(const dl::PoolGeometry& g) {
    return std::to_string(g.batch) + " x " + std::to_string(g.channels) + " x " +
           std::to_string(g.height) + " x " + std::to_string(g.width) + ", kernel " +
           std::to_string(g.kernel) + " stride " + std::to_string(g.stride) + " pad " +
           std::to_string(g.pad);
}

using dl::ref::Values;

/// Per op: |got - want| <= tolerance * max(1, max |want|). Relative to the largest value of the
/// result, not to each element: a float sum's rounding grows with its terms' magnitudes, and a
/// small result that is the sum of large terms carries their error. 0: exact.
struct Tolerances {
    double conv;          // convolution y, dx, dw, db
    double inner_product; // y, dx, dw, db
    double pool;          // average pooling; max pooling's gradient (sums of dy); max y is exact
    double activation;    // ReLU, Sigmoid, TanH, and Dropout's scaling
    double softmax;       // probabilities, loss, gradient
    double channels;      // LRN, BatchNorm (outputs, statistics, running sums), Scale
    double eltwise;       // sum and prod; max and its mask are exact, as are Concat's copies
    double solver;        // weights and histories after a few steps
};

/// An array in a backend's memory, for an op's input or output.
template <typename T> class DeviceArray {
public:
    DeviceArray(dl::Backend& backend, const std::vector<T>& values)
        : m_backend(&backend), m_count(values.size()),
          m_buffer(backend, std::max<std::size_t>(1, values.size()) * sizeof(T)) {
        backend.upload(m_buffer.get(), values.data(), values.size() * sizeof(T));
    }
    /// Filled with `garbage`, so that an output the op does not write shows.
    DeviceArray(dl::Backend& backend, std::size_t count, T garbage)
        : DeviceArray(backend, std::vector<T>(count, garbage)) {}
    [[nodiscard]] T* get() const { return m_buffer.as<T>(); }
    [[nodiscard]] std::vector<T> read() const {
        std::vector<T> values(m_count);
        m_backend->download(values.data(), m_buffer.get(), m_count * sizeof(T));
        return values;
    }

private:
    dl::Backend* m_backend;
    std::size_t m_count;
    dl::Buffer m_buffer;
};
using Device = DeviceArray<float>;
constexpr float k_garbage = 1e30F;

inline void expect_near(const std::vector<float>& got, const Values& want, double tolerance,
                        const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 1.0;
    for (const double v : want) {
        scale = std::max(scale, std::fabs(v));
    }
    double worst = 0.0;
    std::size_t worst_at = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double error = std::fabs(got[i] - want[i]);
        if (!(error <= worst) || std::isnan(error)) { // a NaN is the worst of all
            worst = std::isnan(error) ? INFINITY : error;
            worst_at = i;
        }
    }
    EXPECT_LE(worst, tolerance * scale)
        << what << ": element " << worst_at << " of " << got.size() << " is " << got[worst_at]
        << ", the reference " << want[worst_at] << " (tolerance " << tolerance << " x " << scale
        << ")";
}

inline void expect_near(float got, double want, double tolerance, const std::string& what) {
    expect_near(std::vector<float>{got}, Values{want}, tolerance, what);
}

/// The checks, one per op (or forward/backward pair), on one backend.
class Checks {
public:
    Checks(dl::Backend& backend, const Tolerances& tolerances, unsigned seed)
        : m_backend(backend), m_tol(tolerances), m_rng(seed) {}

    /// Values from [low, high); with `levels` > 0 only that many distinct values, so that ties
    /// occur (max pooling's and Eltwise max's rules, top-k accuracy).
    std::vector<float> random(std::size_t n, float low = -1.0F, float high = 1.0F, int levels = 0) {
        std::uniform_real_distribution<float> uniform(low, high);
        std::uniform_int_distribution<int> level(0, std::max(0, levels - 1));
        std::vector<float> v(n);
        for (float& e : v) {
            e = levels > 0 ? low + (high - low) * static_cast<float>(level(m_rng)) /
                                       static_cast<float>(levels)
                           : uniform(m_rng);
        }
        return v;
    }

    void convolution(const dl::ConvGeometry& g, bool bias, const std::string& what);
    void max_pooling(const dl::PoolGeometry& g, bool compare_argmax, int levels,
                     const std::string& what);
    void average_pooling(const dl::PoolGeometry& g, const std::string& what);
    void inner_product(int rows, int in, int out, bool bias);
    void activation(dl::Activation kind, std::size_t n, bool in_place);
    void pointwise(dl::Pointwise f, const dl::PointwiseParams& p, std::size_t n);
    void regression_losses(int rows, std::size_t n);
    void contrastive_loss(int rows, int dim, float margin, bool legacy);
    void hinge_loss(int rows, int classes, bool l2);
    void dropout(std::size_t n, float ratio);
    void softmax_loss(int rows, int classes, float scale);
    void accuracy(int rows, int classes, int levels);
    void lrn(const dl::ChannelGeometry& g, const dl::LrnParams& p);
    void lrn_within(const dl::PoolGeometry& g, const dl::LrnParams& p);
    void batch_norm(const dl::ChannelGeometry& g, bool use_global, bool in_place);
    void scale(const dl::ChannelGeometry& g, bool bias, bool in_place);
    void concat(int rows, const std::vector<std::size_t>& row_lengths);
    void prelu(const dl::ChannelGeometry& g, bool shared, bool in_place);
    void eltwise(dl::EltwiseOp op, std::size_t n, int inputs, int levels);
    void solver(const std::string& rule, const std::vector<int>& sizes, bool all_at_once);

private:
    dl::Backend& m_backend;
    Tolerances m_tol;
    std::mt19937 m_rng;
};

// Forward with and without bias; backward with dx (a hidden layer) and without it (a first
// layer, which the CPU's direct loops compute on their own).
inline void Checks::convolution(const dl::ConvGeometry& g, bool bias, const std::string& what) {
    const auto x = random(static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width);
    const auto w =
        random(static_cast<std::size_t>(g.outputs) * g.channels / g.group * g.kernel * g.kernel);
    const auto b = random(static_cast<std::size_t>(g.outputs));
    const auto dy =
        random(static_cast<std::size_t>(g.batch) * g.outputs * g.out_height() * g.out_width());
    const std::vector<float> no_bias;
    const Values want_y = dl::ref::conv_forward(g, x, w, bias ? b : no_bias);
    const dl::ref::ConvGradients want = dl::ref::conv_backward(g, x, w, dy);

    const Device x_d(m_backend, x);
    const Device w_d(m_backend, w);
    const Device b_d(m_backend, b);
    const Device dy_d(m_backend, dy);
    const Device y_d(m_backend, dy.size(), k_garbage);
    const Device dx_d(m_backend, x.size(), k_garbage);
    const Device dw_d(m_backend, w.size(), k_garbage);
    const Device db_d(m_backend, b.size(), k_garbage);
    m_backend.conv_forward(g, x_d.get(), w_d.get(), bias ? b_d.get() : nullptr, y_d.get());
    m_backend.conv_backward(g, x_d.get(), w_d.get(), dy_d.get(), dx_d.get(), dw_d.get(),
                            bias ? db_d.get() : nullptr);
    expect_near(y_d.read(), want_y, m_tol.conv, what + ": y");
    expect_near(dx_d.read(), want.dx, m_tol.conv, what + ": dx");
    expect_near(dw_d.read(), want.dw, m_tol.conv, what + ": dw");
    if (bias) {
        expect_near(db_d.read(), want.db, m_tol.conv, what + ": db");
    }
    const Device dw_first(m_backend, w.size(), k_garbage);
    const Device db_first(m_backend, b.size(), k_garbage);
    m_backend.conv_backward(g, x_d.get(), w_d.get(), dy_d.get(), nullptr, dw_first.get(),
                            db_first.get());
    expect_near(dw_first.read(), want.dw, m_tol.conv, what + ": dw without dx");
    expect_near(db_first.read(), want.db, m_tol.conv, what + ": db without dx");
    // dx alone, as Deconvolution's forward pass calls it.
    const Device dx_only(m_backend, x.size(), k_garbage);
    m_backend.conv_backward_data(g, w_d.get(), dy_d.get(), dx_only.get());
    expect_near(dx_only.read(), want.dx, m_tol.conv, what + ": dx alone (conv_backward_data)");
}

// The argmax is the CPU's own record; a GPU recomputes the winners (backend.hpp), so it is
// compared where the backend keeps it as the reference does.
inline void Checks::max_pooling(const dl::PoolGeometry& g, bool compare_argmax, int levels,
                                const std::string& what) {
    const auto x = random(static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width,
                          -1.0F, 1.0F, levels);
    const auto dy =
        random(static_cast<std::size_t>(g.batch) * g.channels * g.out_height() * g.out_width());
    const dl::ref::MaxPool want = dl::ref::max_pool_forward(g, x);
    const Device x_d(m_backend, x);
    const Device y_d(m_backend, dy.size(), k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, x.size(), k_garbage);
    const DeviceArray<std::int32_t> arg_d(m_backend, dy.size(), -7);
    m_backend.max_pool_forward(g, x_d.get(), y_d.get(), arg_d.get());
    m_backend.max_pool_backward(g, x_d.get(), y_d.get(), dy_d.get(), arg_d.get(), dx_d.get());
    expect_near(y_d.read(), want.y, 0.0, what + ": max y");
    if (compare_argmax) {
        EXPECT_EQ(arg_d.read(), want.argmax) << what << ": argmax";
    }
    expect_near(dx_d.read(), dl::ref::max_pool_backward(g, x, dy), m_tol.pool, what + ": max dx");
}

inline void Checks::average_pooling(const dl::PoolGeometry& g, const std::string& what) {
    const auto x = random(static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width);
    const auto dy =
        random(static_cast<std::size_t>(g.batch) * g.channels * g.out_height() * g.out_width());
    const Device x_d(m_backend, x);
    const Device y_d(m_backend, dy.size(), k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, x.size(), k_garbage);
    m_backend.ave_pool_forward(g, x_d.get(), y_d.get());
    m_backend.ave_pool_backward(g, dy_d.get(), dx_d.get());
    expect_near(y_d.read(), dl::ref::ave_pool_forward(g, x), m_tol.pool, what + ": ave y");
    expect_near(dx_d.read(), dl::ref::ave_pool_backward(g, dy), m_tol.pool, what + ": ave dx");
}

inline void Checks::inner_product(int rows, int in, int out, bool bias) {
    const std::string what = "inner product " + std::to_string(rows) + " x " + std::to_string(in) +
                             " -> " + std::to_string(out);
    const auto x = random(static_cast<std::size_t>(rows) * in);
    const auto w = random(static_cast<std::size_t>(out) * in);
    const auto b = random(static_cast<std::size_t>(out));
    const auto dy = random(static_cast<std::size_t>(rows) * out);
    const std::vector<float> no_bias;
    const Device x_d(m_backend, x);
    const Device w_d(m_backend, w);
    const Device b_d(m_backend, b);
    const Device dy_d(m_backend, dy);
    const Device y_d(m_backend, dy.size(), k_garbage);
    const Device dx_d(m_backend, x.size(), k_garbage);
    const Device dw_d(m_backend, w.size(), k_garbage);
    const Device db_d(m_backend, b.size(), k_garbage);
    m_backend.inner_product_forward(rows, in, out, x_d.get(), w_d.get(), bias ? b_d.get() : nullptr,
                                    y_d.get());
    m_backend.inner_product_backward(rows, in, out, x_d.get(), w_d.get(), dy_d.get(), dx_d.get(),
                                     dw_d.get(), bias ? db_d.get() : nullptr);
    const auto want = dl::ref::inner_product_backward(rows, in, out, x, w, dy);
    expect_near(y_d.read(), dl::ref::inner_product_forward(rows, in, out, x, w, bias ? b : no_bias),
                m_tol.inner_product, what + ": y");
    expect_near(dx_d.read(), want.dx, m_tol.inner_product, what + ": dx");
    expect_near(dw_d.read(), want.dw, m_tol.inner_product, what + ": dw");
    if (bias) {
        expect_near(db_d.read(), want.db, m_tol.inner_product, what + ": db");
    }
}

// In place, as Caffe's ReLU runs: x and y one array, dy and dx another.
inline void Checks::activation(dl::Activation kind, std::size_t n, bool in_place) {
    const std::string what =
        "activation " + std::to_string(static_cast<int>(kind)) + (in_place ? " in place" : "");
    const auto x = random(n, -4.0F, 4.0F);
    const auto dy = random(n);
    const Device x_d(m_backend, x);
    const Device y_d(m_backend, n, k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, n, k_garbage);
    float* y = in_place ? x_d.get() : y_d.get();
    float* dx = in_place ? dy_d.get() : dx_d.get();
    m_backend.activation_forward(kind, n, x_d.get(), y);
    m_backend.activation_backward(kind, n, y, dy_d.get(), dx);
    expect_near((in_place ? x_d : y_d).read(), dl::ref::activation_forward(kind, x),
                m_tol.activation, what + ": y");
    expect_near((in_place ? dy_d : dx_d).read(), dl::ref::activation_backward(kind, x, dy),
                m_tol.activation, what + ": dx");
}

// x in [-4, 4] (Power: its base shift + scale x kept positive, as a fractional power needs).
inline void Checks::pointwise(dl::Pointwise f, const dl::PointwiseParams& p, std::size_t n) {
    const std::string what = "pointwise " + std::to_string(static_cast<int>(f));
    const auto x = f == dl::Pointwise::power ? random(n, 0.1F, 4.0F) : random(n, -4.0F, 4.0F);
    const auto dy = random(n);
    const Device x_d(m_backend, x);
    const Device y_d(m_backend, n, k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, n, k_garbage);
    m_backend.pointwise_forward(f, p, n, x_d.get(), y_d.get());
    m_backend.pointwise_backward(f, p, n, x_d.get(), y_d.get(), dy_d.get(), dx_d.get());
    expect_near(y_d.read(), dl::ref::pointwise_forward(f, p, x), m_tol.activation, what + ": y");
    expect_near(dx_d.read(), dl::ref::pointwise_backward(f, p, x, dy), m_tol.activation,
                what + ": dx");
}

// EuclideanLoss and SigmoidCrossEntropyLoss: the loss and the gradient the layers compute from
// it (scaled_copy of the differences, the logistic gradient); targets in [0, 1].
inline void Checks::regression_losses(int rows, std::size_t n) {
    const std::string what = "losses over " + std::to_string(n) + " values";
    const auto a = random(n, -3.0F, 3.0F);
    const auto b = random(n, 0.0F, 1.0F);
    const Device a_d(m_backend, a);
    const Device b_d(m_backend, b);
    const Device diff_d(m_backend, n, k_garbage);
    const Device loss_d(m_backend, 1, k_garbage);
    const Device dx_d(m_backend, n, k_garbage);
    m_backend.euclidean_loss_forward(rows, n, a_d.get(), b_d.get(), diff_d.get(), loss_d.get());
    expect_near(loss_d.read(), Values{dl::ref::euclidean_loss(rows, a, b)}, m_tol.channels,
                what + ": Euclidean loss");
    m_backend.scaled_copy(n, -0.5F, diff_d.get(), dx_d.get());
    Values want(n);
    for (std::size_t i = 0; i < n; ++i) {
        want[i] = -0.5 * (static_cast<double>(a[i]) - b[i]);
    }
    expect_near(dx_d.read(), want, m_tol.channels, what + ": Euclidean gradient");
    m_backend.sigmoid_cross_entropy_forward(rows, n, a_d.get(), b_d.get(), loss_d.get());
    expect_near(loss_d.read(), Values{dl::ref::sigmoid_cross_entropy(rows, a, b)}, m_tol.channels,
                what + ": sigmoid cross-entropy");
    m_backend.sigmoid_cross_entropy_backward(n, 0.25F, a_d.get(), b_d.get(), dx_d.get());
    expect_near(dx_d.read(), dl::ref::sigmoid_cross_entropy_backward(0.25, a, b), m_tol.channels,
                what + ": sigmoid cross-entropy gradient");
}

// HingeLoss: the loss and the scores' gradient, labels in range.
inline void Checks::hinge_loss(int rows, int classes, bool l2) {
    const std::string what = "hinge loss " + std::string(l2 ? "L2" : "L1") + " over " +
                             std::to_string(rows) + " x " + std::to_string(classes);
    const std::size_t n = static_cast<std::size_t>(rows) * classes;
    const auto scores = random(n, -2.0F, 2.0F);
    std::vector<float> labels(static_cast<std::size_t>(rows));
    for (std::size_t r = 0; r < labels.size(); ++r) {
        labels[r] = static_cast<float>(m_rng() % static_cast<unsigned>(classes));
    }
    const Device scores_d(m_backend, scores);
    const Device labels_d(m_backend, labels);
    const Device diff_d(m_backend, n, k_garbage);
    const Device loss_d(m_backend, 1, k_garbage);
    const Device dx_d(m_backend, n, k_garbage);
    m_backend.hinge_loss_forward(rows, classes, l2, scores_d.get(), labels_d.get(), diff_d.get(),
                                 loss_d.get());
    expect_near(loss_d.read(), Values{dl::ref::hinge_loss(rows, classes, l2, scores, labels)},
                m_tol.channels, what + ": loss");
    m_backend.hinge_loss_backward(rows, classes, l2, 0.5F, labels_d.get(), diff_d.get(),
                                  dx_d.get());
    expect_near(dx_d.read(), dl::ref::hinge_loss_backward(rows, classes, l2, 0.5, scores, labels),
                m_tol.channels, what + ": gradient");
}

// ContrastiveLoss: the loss and both features' gradients, half the pairs alike.
inline void Checks::contrastive_loss(int rows, int dim, float margin, bool legacy) {
    const std::string what = "contrastive loss over " + std::to_string(rows) + " pairs of " +
                             std::to_string(dim) + (legacy ? " (legacy)" : "");
    const std::size_t n = static_cast<std::size_t>(rows) * dim;
    const auto a = random(n, -1.0F, 1.0F);
    const auto b = random(n, -1.0F, 1.0F);
    std::vector<float> y(static_cast<std::size_t>(rows));
    for (std::size_t r = 0; r < y.size(); ++r) {
        y[r] = r % 2 == 0 ? 1.0F : 0.0F;
    }
    const Device a_d(m_backend, a);
    const Device b_d(m_backend, b);
    const Device y_d(m_backend, y);
    const Device diff_d(m_backend, n, k_garbage);
    const Device dist_d(m_backend, static_cast<std::size_t>(rows), k_garbage);
    const Device loss_d(m_backend, 1, k_garbage);
    const Device dx_d(m_backend, n, k_garbage);
    m_backend.contrastive_loss_forward(rows, dim, margin, legacy, a_d.get(), b_d.get(), y_d.get(),
                                       diff_d.get(), dist_d.get(), loss_d.get());
    expect_near(loss_d.read(), Values{dl::ref::contrastive_loss(rows, margin, legacy, a, b, y)},
                m_tol.channels, what + ": loss");
    for (const float scale : {0.25F, -0.25F}) {
        m_backend.contrastive_loss_backward(rows, dim, margin, legacy, scale, y_d.get(),
                                            diff_d.get(), dist_d.get(), dx_d.get());
        expect_near(dx_d.read(),
                    dl::ref::contrastive_loss_backward(rows, margin, legacy, scale, a, b, y),
                    m_tol.channels, what + ": gradient");
    }
}

// The mask is the backend's own draw (its generator is not the reference's business): 0 or 1,
// and kept at about 1 - ratio. The scaling is then checked given that mask, forward (train and
// test phase) and backward, as the Dropout layer calls it.
inline void Checks::dropout(std::size_t n, float ratio) {
    const Device mask_d(m_backend, n, k_garbage);
    std::mt19937 layer_rng(m_rng()); // the net's generator, which the layer hands to the op
    m_backend.dropout_mask(n, ratio, layer_rng, mask_d.get());
    const std::vector<float> mask = mask_d.read();
    double kept = 0.0;
    for (const float m : mask) {
        ASSERT_TRUE(m == 0.0F || m == 1.0F) << "dropout mask value " << m;
        kept += m;
    }
    // Binomial(n, 1 - ratio): 6 standard deviations of the kept share.
    EXPECT_NEAR(kept / static_cast<double>(n), 1.0 - ratio,
                6.0 * std::sqrt(ratio * (1.0 - ratio) / static_cast<double>(n)));
    const float scale = 1.0F / (1.0F - ratio);
    const auto x = random(n);
    const auto dy = random(n);
    const Device x_d(m_backend, x);
    const Device dy_d(m_backend, dy);
    const Device y_d(m_backend, n, k_garbage);
    const Device dx_d(m_backend, n, k_garbage);
    const Device test_d(m_backend, n, k_garbage);
    m_backend.masked_scale(n, x_d.get(), mask_d.get(), scale, y_d.get());
    m_backend.masked_scale(n, dy_d.get(), mask_d.get(), scale, dx_d.get());
    m_backend.masked_scale(n, x_d.get(), nullptr, 1.0F, test_d.get());
    expect_near(y_d.read(), dl::ref::dropout(x, mask, scale), m_tol.activation, "dropout y");
    expect_near(dx_d.read(), dl::ref::dropout(dy, mask, scale), m_tol.activation, "dropout dx");
    expect_near(test_d.read(), dl::ref::dropout(x, {}, 1.0), 0.0, "dropout in the test phase");
}

// Labels include one past the classes and a -1: such rows count nothing, in both backends.
inline void Checks::softmax_loss(int rows, int classes, float scale) {
    const auto logits = random(static_cast<std::size_t>(rows) * classes, -6.0F, 6.0F);
    std::vector<float> labels(static_cast<std::size_t>(rows));
    for (float& label : labels) {
        label = static_cast<float>(m_rng() % static_cast<unsigned>(classes));
    }
    labels[0] = static_cast<float>(classes);
    labels[rows / 2] = -1.0F;
    const Device logits_d(m_backend, logits);
    const Device labels_d(m_backend, labels);
    const Device prob_d(m_backend, logits.size(), k_garbage);
    const Device loss_d(m_backend, 1, k_garbage);
    const Device dlogits_d(m_backend, logits.size(), k_garbage);
    m_backend.softmax_loss_forward(rows, classes, logits_d.get(), labels_d.get(), prob_d.get(),
                                   loss_d.get());
    m_backend.softmax_loss_backward(rows, classes, prob_d.get(), labels_d.get(), scale,
                                    dlogits_d.get());
    const dl::ref::SoftmaxLoss want = dl::ref::softmax_loss_forward(rows, classes, logits, labels);
    const std::string what =
        "softmax loss " + std::to_string(rows) + " x " + std::to_string(classes);
    expect_near(prob_d.read(), want.prob, m_tol.softmax, what + ": prob");
    expect_near(loss_d.read()[0], want.loss, m_tol.softmax, what + ": loss");
    expect_near(dlogits_d.read(),
                dl::ref::softmax_loss_backward(rows, classes, logits, labels, scale), m_tol.softmax,
                what + ": dlogits");
}

// A count over the rows: exact. With `levels`, scores tie often (a tie does not count above).
inline void Checks::accuracy(int rows, int classes, int levels) {
    const auto scores = random(static_cast<std::size_t>(rows) * classes, -1.0F, 1.0F, levels);
    std::vector<float> labels(static_cast<std::size_t>(rows));
    for (float& label : labels) {
        label = static_cast<float>(m_rng() % static_cast<unsigned>(classes));
    }
    labels[1] = static_cast<float>(classes + 2); // past the scores: counted wrong
    const Device scores_d(m_backend, scores);
    const Device labels_d(m_backend, labels);
    for (const int top_k : {1, 2, 5, classes}) {
        const Device accuracy_d(m_backend, 1, k_garbage);
        m_backend.accuracy(rows, classes, top_k, scores_d.get(), labels_d.get(), accuracy_d.get());
        EXPECT_EQ(accuracy_d.read()[0],
                  static_cast<float>(dl::ref::accuracy(rows, classes, top_k, scores, labels)))
            << "top " << top_k << " of " << classes << ", " << levels << " levels";
    }
}

inline void Checks::lrn(const dl::ChannelGeometry& g, const dl::LrnParams& p) {
    const std::string what =
        "LRN size " + std::to_string(p.size) + " over " + std::to_string(g.channels) + " channels";
    const auto x = random(g.count(), -2.0F, 2.0F);
    const auto dy = random(g.count());
    const Device x_d(m_backend, x);
    const Device scale_d(m_backend, g.count(), k_garbage);
    const Device y_d(m_backend, g.count(), k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, g.count(), k_garbage);
    m_backend.lrn_forward(g, p, x_d.get(), scale_d.get(), y_d.get());
    m_backend.lrn_backward(g, p, x_d.get(), y_d.get(), scale_d.get(), dy_d.get(), dx_d.get());
    expect_near(y_d.read(), dl::ref::lrn_forward(g, p, x), m_tol.channels, what + ": y");
    expect_near(dx_d.read(), dl::ref::lrn_backward(g, p, x, dy), m_tol.channels, what + ": dx");
}

inline void Checks::lrn_within(const dl::PoolGeometry& g, const dl::LrnParams& p) {
    const std::string what = "LRN within channels, size " + std::to_string(p.size) + " over " +
                             std::to_string(g.height) + "x" + std::to_string(g.width);
    const std::size_t count = static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width;
    const auto x = random(count, -2.0F, 2.0F);
    const auto dy = random(count);
    const Device x_d(m_backend, x);
    const Device scale_d(m_backend, count, k_garbage);
    const Device y_d(m_backend, count, k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, count, k_garbage);
    m_backend.lrn_within_forward(g, p, x_d.get(), scale_d.get(), y_d.get());
    m_backend.lrn_within_backward(g, p, x_d.get(), y_d.get(), scale_d.get(), dy_d.get(),
                                  dx_d.get());
    expect_near(y_d.read(), dl::ref::lrn_within_forward(g, p, x), m_tol.channels, what + ": y");
    expect_near(dx_d.read(), dl::ref::lrn_within_backward(g, p, x, dy), m_tol.channels,
                what + ": dx");
}

// Running sums from an earlier step (factor 1 + maf), so that both the update and the global
// statistics are of numbers other than zero. In place: x and y one array, dy and dx another, as
// the ResNet idiom runs it.
inline void Checks::batch_norm(const dl::ChannelGeometry& g, bool use_global, bool in_place) {
    const std::string what = std::string("BatchNorm, ") + (use_global ? "global" : "batch") +
                             " statistics" + (in_place ? ", in place" : "");
    const auto channels = static_cast<std::size_t>(g.channels);
    const float maf = 0.9F;
    const auto x = random(g.count(), -1.0F, 3.0F);
    const auto mean_sum = random(channels, 0.5F, 2.0F);
    const auto var_sum = random(channels, 0.5F, 4.0F);
    const float factor = 1.0F + maf;
    const auto dy = random(g.count());
    const Device x_d(m_backend, x);
    const Device mean_d(m_backend, mean_sum);
    const Device var_d(m_backend, var_sum);
    const Device factor_d(m_backend, std::vector<float>{factor});
    const Device inv_std_d(m_backend, channels, k_garbage);
    const Device y_d(m_backend, g.count(), k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, g.count(), k_garbage);
    const Device& y_out = in_place ? x_d : y_d;
    const Device& dx_out = in_place ? dy_d : dx_d;
    m_backend.batch_norm_forward(g, use_global, 1e-5F, maf, x_d.get(), mean_d.get(), var_d.get(),
                                 factor_d.get(), inv_std_d.get(), y_out.get());
    m_backend.batch_norm_backward(g, use_global, y_out.get(), inv_std_d.get(), dy_d.get(),
                                  dx_out.get());
    const dl::ref::BatchNorm want =
        dl::ref::batch_norm_forward(g, use_global, 1e-5, maf, x, mean_sum, var_sum, factor);
    expect_near(y_out.read(), want.y, m_tol.channels, what + ": y");
    expect_near(inv_std_d.read(), want.inv_std, m_tol.channels, what + ": inv_std");
    expect_near(mean_d.read(), want.running.mean_sum, m_tol.channels, what + ": mean sum");
    expect_near(var_d.read(), want.running.var_sum, m_tol.channels, what + ": variance sum");
    expect_near(factor_d.read()[0], want.running.factor, m_tol.channels, what + ": factor");
    expect_near(dx_out.read(),
                dl::ref::batch_norm_backward(g, use_global, 1e-5, x, mean_sum, var_sum, factor, dy),
                m_tol.channels, what + ": dx");
}

// In place the layer keeps x's copy for the backward pass, and dy and dx are one array.
inline void Checks::scale(const dl::ChannelGeometry& g, bool bias, bool in_place) {
    const std::string what =
        std::string("Scale") + (bias ? " with bias" : "") + (in_place ? ", in place" : "");
    const auto channels = static_cast<std::size_t>(g.channels);
    const auto x = random(g.count());
    const auto gamma = random(channels, 0.5F, 2.0F);
    const auto beta = random(channels);
    const auto dy = random(g.count());
    const std::vector<float> no_bias;
    const Device x_d(m_backend, x);
    const Device x_kept(m_backend, x);
    const Device gamma_d(m_backend, gamma);
    const Device beta_d(m_backend, beta);
    const Device y_d(m_backend, g.count(), k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, g.count(), k_garbage);
    const Device dgamma_d(m_backend, channels, k_garbage);
    const Device dbeta_d(m_backend, channels, k_garbage);
    const Device& y_out = in_place ? x_d : y_d;
    const Device& dx_out = in_place ? dy_d : dx_d;
    m_backend.scale_forward(g, x_d.get(), gamma_d.get(), bias ? beta_d.get() : nullptr,
                            y_out.get());
    m_backend.scale_backward(g, x_kept.get(), gamma_d.get(), dy_d.get(), dx_out.get(),
                             dgamma_d.get(), bias ? dbeta_d.get() : nullptr);
    const dl::ref::ScaleGradients want = dl::ref::scale_backward(g, x, gamma, dy);
    expect_near(y_out.read(), dl::ref::scale_forward(g, x, gamma, bias ? beta : no_bias),
                m_tol.channels, what + ": y");
    expect_near(dx_out.read(), want.dx, m_tol.channels, what + ": dx");
    expect_near(dgamma_d.read(), want.dgamma, m_tol.channels, what + ": dgamma");
    if (bias) {
        expect_near(dbeta_d.read(), want.dbeta, m_tol.channels, what + ": dbeta");
    }
}

// PReLU as the layer calls it: in place, backward reads the layer's copy of x and writes dx over
// dy.
inline void Checks::prelu(const dl::ChannelGeometry& g, bool shared, bool in_place) {
    const std::string what =
        std::string("PReLU") + (shared ? " shared" : "") + (in_place ? ", in place" : "");
    const std::size_t slopes = shared ? 1 : static_cast<std::size_t>(g.channels);
    const auto x = random(g.count());
    const auto slope = random(slopes, -0.5F, 0.5F);
    const auto dy = random(g.count());
    const Device x_d(m_backend, x);
    const Device x_kept(m_backend, x);
    const Device slope_d(m_backend, slope);
    const Device y_d(m_backend, g.count(), k_garbage);
    const Device dy_d(m_backend, dy);
    const Device dx_d(m_backend, g.count(), k_garbage);
    const Device dslope_d(m_backend, slopes, k_garbage);
    const Device& y_out = in_place ? x_d : y_d;
    const Device& dx_out = in_place ? dy_d : dx_d;
    m_backend.prelu_forward(g, shared, x_d.get(), slope_d.get(), y_out.get());
    m_backend.prelu_backward(g, shared, x_kept.get(), slope_d.get(), dy_d.get(), dx_out.get(),
                             dslope_d.get());
    const dl::ref::PReluGradients want = dl::ref::prelu_backward(g, shared, x, slope, dy);
    expect_near(y_out.read(), dl::ref::prelu_forward(g, shared, x, slope), m_tol.channels,
                what + ": y");
    expect_near(dx_out.read(), want.dx, m_tol.channels, what + ": dx");
    expect_near(dslope_d.read(), want.dslope, m_tol.channels, what + ": dslope");
}

// copy_blocks called as the Concat layer calls it: each input into its columns of the output
// rows, and back.
inline void Checks::concat(int rows, const std::vector<std::size_t>& row_lengths) {
    std::size_t top_row = 0;
    std::vector<std::vector<float>> inputs;
    for (const std::size_t length : row_lengths) {
        inputs.push_back(random(static_cast<std::size_t>(rows) * length));
        top_row += length;
    }
    const auto dy = random(static_cast<std::size_t>(rows) * top_row);
    const Device y_d(m_backend, dy.size(), k_garbage);
    const Device dy_d(m_backend, dy);
    std::vector<Device> dx_d;
    std::size_t offset = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const Device x_d(m_backend, inputs[i]);
        m_backend.copy_blocks(rows, row_lengths[i], x_d.get(), row_lengths[i], y_d.get() + offset,
                              top_row);
        dx_d.emplace_back(m_backend, inputs[i].size(), k_garbage);
        m_backend.copy_blocks(rows, row_lengths[i], dy_d.get() + offset, top_row, dx_d.back().get(),
                              row_lengths[i]);
        offset += row_lengths[i];
    }
    const std::vector<dl::ref::Floats> spans(inputs.begin(), inputs.end());
    expect_near(y_d.read(), dl::ref::concat_forward(rows, spans), 0.0, "concat y");
    const std::vector<Values> want_dx = dl::ref::concat_backward(rows, row_lengths, dy);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        expect_near(dx_d[i].read(), want_dx[i], 0.0, "concat dx " + std::to_string(i));
    }
}

inline void Checks::eltwise(dl::EltwiseOp op, std::size_t n, int inputs, int levels) {
    const std::string what = "eltwise " + std::to_string(static_cast<int>(op)) + " of " +
                             std::to_string(inputs) + (levels > 0 ? " with ties" : "");
    std::vector<std::vector<float>> x;
    std::vector<float> coeffs;
    std::vector<Device> x_d;
    std::vector<const float*> pointers;
    for (int i = 0; i < inputs; ++i) {
        x.push_back(random(n, -2.0F, 2.0F, levels));
        coeffs.push_back(op == dl::EltwiseOp::sum ? 1.5F - static_cast<float>(i) : 1.0F);
        x_d.emplace_back(m_backend, x.back());
        pointers.push_back(x_d.back().get());
    }
    const auto dy = random(n);
    const Device y_d(m_backend, n, k_garbage);
    const Device dy_d(m_backend, dy);
    const DeviceArray<std::int32_t> mask_d(m_backend, n, -7);
    m_backend.eltwise_forward(op, n, pointers, coeffs, y_d.get(), mask_d.get());
    const std::vector<dl::ref::Floats> spans(x.begin(), x.end());
    const dl::ref::Eltwise want = dl::ref::eltwise_forward(op, spans, coeffs);
    const bool exact = op == dl::EltwiseOp::max;
    expect_near(y_d.read(), want.y, exact ? 0.0 : m_tol.eltwise, what + ": y");
    if (exact) {
        EXPECT_EQ(mask_d.read(), want.mask) << what << ": mask";
    }
    for (int i = 0; i < inputs; ++i) {
        const Device dx_d(m_backend, n, k_garbage);
        m_backend.eltwise_backward(op, n, i, pointers, coeffs[static_cast<std::size_t>(i)],
                                   dy_d.get(), mask_d.get(), dx_d.get());
        expect_near(
            dx_d.read(),
            dl::ref::eltwise_backward(op, i, spans, coeffs[static_cast<std::size_t>(i)], dy),
            exact ? 0.0 : m_tol.eltwise, what + ": dx " + std::to_string(i));
    }
}

// Three steps from zero history with per-parameter lr_mult and decay, as the solver passes
// them, one parameter at a time or all in one call (one launch on a GPU). step[1] is Adam's
// bias correction for t = 1, 2, 3 (train/solver.cpp).
inline void Checks::solver(const std::string& rule, const std::vector<int>& sizes,
                           bool all_at_once) {
    const float momentum = 0.9F;
    const float beta2 = 0.999F;
    const float epsilon = 1e-8F;
    const bool adam = rule == "Adam";
    const std::optional<dl::AdaptiveRule> adaptive =
        rule == "AdaGrad"    ? std::optional(dl::AdaptiveRule::adagrad)
        : rule == "RMSProp"  ? std::optional(dl::AdaptiveRule::rmsprop)
        : rule == "AdaDelta" ? std::optional(dl::AdaptiveRule::adadelta)
                             : std::nullopt;
    // RMSProp's rms_decay or AdaDelta's momentum; AdaDelta's delta is its examples' 1e-6.
    const float rate = rule == "RMSProp" ? 0.98F : 0.95F;
    const float delta = rule == "AdaDelta" ? 1e-6F : epsilon;
    std::vector<Values> w_ref;
    std::vector<Values> h_ref;
    std::vector<Values> v_ref;
    std::vector<Device> w_d;
    std::vector<Device> h_d;
    std::vector<Device> v_d;
    for (const int size : sizes) {
        const auto w = random(static_cast<std::size_t>(size));
        w_ref.emplace_back(w.begin(), w.end());
        h_ref.emplace_back(w.size(), 0.0);
        v_ref.emplace_back(w.size(), 0.0);
        w_d.emplace_back(m_backend, w);
        h_d.emplace_back(m_backend, w.size(), 0.0F);
        v_d.emplace_back(m_backend, w.size(), 0.0F);
    }
    for (int t = 1; t <= 3; ++t) {
        const float lr = 0.01F / static_cast<float>(t);
        const float correction = adam ? std::sqrt(1.0F - std::pow(beta2, static_cast<float>(t))) /
                                            (1.0F - std::pow(momentum, static_cast<float>(t)))
                                      : 1.0F;
        const Device step_d(m_backend, std::vector<float>{lr, correction});
        std::vector<Device> g_d;
        std::vector<dl::UpdateTarget> targets;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const float lr_mult = i == 1 ? 2.0F : 1.0F;
            const float decay = i == 1 ? 0.0F : 5e-4F;
            const auto g = random(w_ref[i].size());
            g_d.emplace_back(m_backend, g);
            targets.push_back({g.size(), lr_mult, decay, g_d.back().get(), h_d[i].get(),
                               v_d[i].get(), w_d[i].get()});
            if (adaptive) {
                dl::ref::adaptive_update(*adaptive, static_cast<double>(lr) * lr_mult, rate, delta,
                                         decay, g, h_ref[i], v_ref[i], w_ref[i]);
            } else if (adam) {
                dl::ref::adam_update(static_cast<double>(lr) * lr_mult, correction, momentum, beta2,
                                     epsilon, decay, g, h_ref[i], v_ref[i], w_ref[i]);
            } else {
                dl::ref::sgd_update(static_cast<double>(lr) * lr_mult, momentum, decay,
                                    rule == "Nesterov", g, h_ref[i], w_ref[i]);
            }
        }
        for (std::size_t i = 0; !all_at_once && i < targets.size(); ++i) {
            const dl::UpdateTarget& p = targets[i];
            if (adaptive) {
                m_backend.adaptive_update(*adaptive, p.count, step_d.get(), p.lr_mult, rate, delta,
                                          p.decay, p.grad, p.history, p.history2, p.weights);
            } else if (adam) {
                m_backend.adam_update(p.count, step_d.get(), p.lr_mult, momentum, beta2, epsilon,
                                      p.decay, p.grad, p.history, p.history2, p.weights);
            } else {
                m_backend.sgd_update(p.count, step_d.get(), p.lr_mult, momentum, p.decay,
                                     rule == "Nesterov", p.grad, p.history, p.weights);
            }
        }
        if (all_at_once && adaptive) {
            m_backend.adaptive_update_all(*adaptive, targets, step_d.get(), rate, delta);
        } else if (all_at_once && adam) {
            m_backend.adam_update_all(targets, step_d.get(), momentum, beta2, epsilon);
        } else if (all_at_once) {
            m_backend.sgd_update_all(targets, step_d.get(), momentum, rule == "Nesterov");
        }
    }
    const std::string what = rule + (all_at_once ? ", all at once" : "") + ": parameter ";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        expect_near(w_d[i].read(), w_ref[i], m_tol.solver, what + std::to_string(i) + " w");
        expect_near(h_d[i].read(), h_ref[i], m_tol.solver, what + std::to_string(i) + " history");
        if (adam || rule == "AdaDelta") {
            expect_near(v_d[i].read(), v_ref[i], m_tol.solver, what + std::to_string(i) + " v");
        }
    }
}

} // namespace dl_test::against_reference
