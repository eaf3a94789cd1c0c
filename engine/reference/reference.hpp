#pragma once
// The definition of every op of dl::Backend (dl/backend.hpp): plain loops, one function per op,
// written to be read and believed, never to be fast (no intrinsics, no BLAS, no threads), as
// llm.c keeps train_gpt2.c beside train_gpt2.cu. The CPU backend's optimised kernels (Winograd,
// direct convolution, vector pooling, sgemm) and the CUDA backend are tested against these
// functions (tests/engine/cpu/test_reference.cpp, tests/engine/gpu/test_gpu_reference.cpp);
// dltrain never links them.
//
// Inputs are the float arrays a backend gets; results are doubles, summed in double, so that a
// test sees the backend's rounding and not the reference's. A backward function takes the
// forward pass's inputs and recomputes what it needs (the softmax, the LRN scale, the batch
// statistics, the max pooling winners): each function is the whole definition of its op, where
// the backend's backward reads what its own forward pass kept.
//
// Layouts are the backend's: N x C x H x W row-major, weights M x (C / group) x K x K, inner
// product weights out x in (Caffe's).

#include <dl/backend.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace dl::ref {

using Floats = std::span<const float>;
using Values = std::vector<double>;

// --- Convolution ------------------------------------------------------------------------------
// y (N x M x OH x OW) = b[m] + sum over the channels c of m's group and ki, kj < K of
// x[n][c][oh * stride - pad + ki][ow * stride - pad + kj] * w[m][c - first of group][ki][kj],
// pixels outside the image being 0. b may be empty (no bias).
Values conv_forward(const ConvGeometry& g, Floats x, Floats w, Floats b);
struct ConvGradients {
    Values dx; // N x C x H x W
    Values dw; // M x C/group x K x K
    Values db; // M
};
// The gradients of sum(y * dy) with respect to x, w and b.
ConvGradients conv_backward(const ConvGeometry& g, Floats x, Floats w, Floats dy);

// --- Pooling (Caffe's, with its ceil-mode output size: PoolGeometry) ------------------------
// Window (oh, ow) covers rows [oh * stride - pad, + kernel) clipped to the image, likewise
// columns.
struct MaxPool {
    Values y;                         // N x C x OH x OW
    std::vector<std::int32_t> argmax; // per output, h * W + w of the winner within its plane
};
// The largest pixel of each window; the first one in row-major order wins a tie.
MaxPool max_pool_forward(const PoolGeometry& g, Floats x);
// dx (N x C x H x W) = the sum of dy over the windows each pixel won.
Values max_pool_backward(const PoolGeometry& g, Floats x, Floats dy);
// The window's sum over Caffe's divisor: the window clipped to the image plus its padding
// (not to the image), so padded border windows count the padding as zeros.
Values ave_pool_forward(const PoolGeometry& g, Floats x);
Values ave_pool_backward(const PoolGeometry& g, Floats dy);

// --- InnerProduct -----------------------------------------------------------------------------
// y (rows x out) = x (rows x in) * w^T (w: out x in) + b; b may be empty.
Values inner_product_forward(int rows, int in, int out, Floats x, Floats w, Floats b);
struct InnerProductGradients {
    Values dx; // rows x in
    Values dw; // out x in
    Values db; // out
};
InnerProductGradients inner_product_backward(int rows, int in, int out, Floats x, Floats w,
                                             Floats dy);

// --- ReLU, Sigmoid, TanH, Dropout -------------------------------------------------------------
// relu: max(x, 0) (the backend has no negative_slope); sigmoid: 1 / (1 + e^-x); tanh.
Values activation_forward(Activation kind, Floats x);
// dy times the derivative at x; ReLU's passes dy where x > 0 and gives 0 elsewhere (at 0 too).
Values activation_backward(Activation kind, Floats x, Floats dy);
Values pointwise_forward(Pointwise f, const PointwiseParams& p, Floats x);
/// EuclideanLoss: sum((a - b)^2) / (2 rows); SigmoidCrossEntropyLoss by its definition with
/// the logistic function, over `rows`; and its gradient, scale * (s(x) - t).
double euclidean_loss(int rows, Floats a, Floats b);
double sigmoid_cross_entropy(int rows, Floats x, Floats t);
Values sigmoid_cross_entropy_backward(double scale, Floats x, Floats t);
/// HingeLoss: sum over rows and classes of h = max(0, 1 + s * (j == label ? -1 : 1)) (L2: h^2),
/// divided by rows; its gradient times `scale`: L1 the sign of h, L2 2h, negated at the label.
double hinge_loss(int rows, int classes, bool l2, Floats scores, Floats labels);
Values hinge_loss_backward(int rows, int classes, bool l2, double scale, Floats scores,
                           Floats labels);
/// ContrastiveLoss over `rows` pairs of a, b with similarity y (non-zero: alike), d the pair's
/// distance: sum(y ? d^2 : max(margin - d, 0)^2) / (2 rows), legacy max(margin - d^2, 0); and
/// the gradient of a times `scale` (b's is its negative), Caffe's: d + 1e-4 in the
/// denominator.
double contrastive_loss(int rows, double margin, bool legacy, Floats a, Floats b, Floats y);
Values contrastive_loss_backward(int rows, double margin, bool legacy, double scale, Floats a,
                                 Floats b, Floats y);
Values pointwise_backward(Pointwise f, const PointwiseParams& p, Floats x, Floats dy);
// Dropout given its 0/1 keep mask: y = x * mask * scale (scale = 1 / (1 - ratio)); the same
// function is the backward pass (dx = dy * mask * scale). An empty mask keeps everything.
Values dropout(Floats x, Floats mask, double scale);

// --- SoftmaxWithLoss and Accuracy -------------------------------------------------------------
// A label is a class index stored as a float; one outside [0, classes) counts nothing (the loss
// adds nothing, the gradient has no -1, the row is not correct), as both backends do. The
// backend has no ignore_label and one normalisation, the batch mean (Caffe's VALID, FULL and
// BATCH_SIZE agree without ignore_label).
struct SoftmaxLoss {
    Values prob; // rows x classes: e^z / sum e^z per row
    double loss; // mean over rows of -log(max(prob[label], FLT_MIN)) (Caffe clips at FLT_MIN)
};
SoftmaxLoss softmax_loss_forward(int rows, int classes, Floats logits, Floats labels);
// dlogits = scale * (prob - onehot(label)); the layer passes scale = loss_weight / rows.
Values softmax_loss_backward(int rows, int classes, Floats logits, Floats labels, double scale);
// The fraction of rows whose label has fewer than top_k scores strictly above its own
// (Caffe's AccuracyLayer: a tie does not push the label out of the top k).
double accuracy(int rows, int classes, int top_k, Floats scores, Floats labels);

// --- LRN (ACROSS_CHANNELS), BatchNorm, Scale: per channel of N x C x spatial -----------------
// scale = k + alpha / size * sum of x^2 over the channels [c - (size - 1) / 2, c + size / 2]
// clipped to [0, C); y = x * scale^-beta (Caffe's LRNLayer).
Values lrn_forward(const ChannelGeometry& g, const LrnParams& p, Floats x);
Values lrn_backward(const ChannelGeometry& g, const LrnParams& p, Floats x, Floats dy);
Values lrn_within_forward(const PoolGeometry& g, const LrnParams& p, Floats x);
Values lrn_within_backward(const PoolGeometry& g, const LrnParams& p, Floats x, Floats dy);

// Caffe's BatchNormLayer: y = (x - mean[c]) / sqrt(var[c] + eps), with the batch's mean and
// biased variance over N x spatial, or (use_global) the running sums divided by their factor
// (a factor of 0, before any step, gives mean and variance 0). Running sums are updated only with
// batch statistics: factor' = factor * maf + 1, mean' = mean + maf * mean_sum, var' = var *
// m / (m - 1) + maf * var_sum (the unbiased variance, m = N x spatial).
struct BatchNormRunning {
    Values mean_sum; // C
    Values var_sum;  // C
    double factor = 0.0;
};
struct BatchNorm {
    Values y;
    Values inv_std; // C: 1 / sqrt(var + eps), the statistics used
    BatchNormRunning running;
};
BatchNorm batch_norm_forward(const ChannelGeometry& g, bool use_global, double eps,
                             double moving_average_fraction, Floats x, Floats mean_sum,
                             Floats var_sum, double factor);
// The gradient through the statistics used: with batch statistics they depend on x too.
Values batch_norm_backward(const ChannelGeometry& g, bool use_global, double eps, Floats x,
                           Floats mean_sum, Floats var_sum, double factor, Floats dy);

// Caffe's ScaleLayer along axis 1: y = x * gamma[c] + beta[c] (beta may be empty).
Values scale_forward(const ChannelGeometry& g, Floats x, Floats gamma, Floats beta);
struct ScaleGradients {
    Values dx;
    Values dgamma; // C
    Values dbeta;  // C
};
ScaleGradients scale_backward(const ChannelGeometry& g, Floats x, Floats gamma, Floats dy);

// PReLU: y = x > 0 ? x : slope[c] * x (slope[0] for all when `shared`); backward: dslope as the
// sum of dy * x where x <= 0 (one value when shared), dx = dy where x > 0, else dy * slope.
Values prelu_forward(const ChannelGeometry& g, bool shared, Floats x, Floats slope);
struct PReluGradients {
    Values dx;
    Values dslope;
};
PReluGradients prelu_backward(const ChannelGeometry& g, bool shared, Floats x, Floats slope,
                              Floats dy);

// --- Concat and Eltwise -----------------------------------------------------------------------
// Concat: every input is `rows` rows (the product of the axes before the concat axis) of its own
// row length; the output row is the inputs' rows one after the other. The backward pass cuts
// dy's rows back into the inputs' (row_lengths: each input's).
Values concat_forward(int rows, const std::vector<Floats>& inputs);
std::vector<Values> concat_backward(int rows, const std::vector<std::size_t>& row_lengths,
                                    Floats dy);

// Caffe's EltwiseLayer over two or more inputs of one size. sum: sum of coeffs[i] * x[i];
// prod: the product; max: the largest, mask = the input that gave it, where the second input
// wins a tie with the first and a later input must be strictly larger (Caffe's loop).
struct Eltwise {
    Values y;
    std::vector<std::int32_t> mask; // max only
};
Eltwise eltwise_forward(EltwiseOp op, const std::vector<Floats>& x,
                        const std::vector<float>& coeffs);
// dx of input `index`: sum: coeff * dy; prod: dy * the product of the other inputs (Caffe's
// stable_prod_grad, which also holds where x[index] is 0); max: dy where `index` won.
Values eltwise_backward(EltwiseOp op, int index, const std::vector<Floats>& x, double coeff,
                        Floats dy);

// --- Solver updates (Caffe's rules, docs/engine.md "Update rules"): one step, state in place
// lr is the step's rate times the parameter's lr_mult; decay is weight_decay * decay_mult.
// SGD with Caffe's momentum: h = momentum * h + lr * (g + decay * w); w -= h. Nesterov (Caffe's
// NesterovSolver): w -= (1 + momentum) * h - momentum * h_previous.
void sgd_update(double lr, double momentum, double decay, bool nesterov, Floats g, Values& history,
                Values& w);
// Adam (Kingma and Ba, Algorithm 1, as Caffe's AdamSolver): m = beta1 m + (1 - beta1) g',
// v = beta2 v + (1 - beta2) g'^2, w -= lr * correction * m / (sqrt(v) + epsilon), with
// g' = g + decay * w and correction = sqrt(1 - beta2^t) / (1 - beta1^t).
void adaptive_update(AdaptiveRule rule, double lr, double rate, double delta, double decay,
                     Floats g, Values& h, Values& h2, Values& w);
void adam_update(double lr, double correction, double beta1, double beta2, double epsilon,
                 double decay, Floats g, Values& m, Values& v, Values& w);

} // namespace dl::ref
