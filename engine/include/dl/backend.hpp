#pragma once
// The math a network needs, behind one interface so that a GPU backend can replace the CPU
// backend op by op. Each op's definition is its plain loop in engine/reference/, which the
// tests hold both backends to. A backend is also the Memory its tensors live in: pointers passed to
// the ops are the backend's (host memory for "cpu", GPU memory for "cuda"); no CUDA type appears
// here. Backends are chosen from an explicit table (make_backend), not self-registered.
//
// Ops are ordered like a stream: a device backend may return before the work is done, so host
// code reads results only through Memory::download (Tensor::read_data). Every op overwrites its
// outputs (parameter gradients included: each parameter is used once).

#include <dl/memory.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace dl {

/// Input N x C x H x W, output N x M x OH x OW, weights M x (C/group) x K x K.
struct ConvGeometry {
    int batch = 0;
    int channels = 0;
    int height = 0;
    int width = 0;
    int outputs = 0;
    int kernel = 0;
    int stride = 1;
    int pad = 0;
    int group = 1;
    [[nodiscard]] int out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
    [[nodiscard]] int out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
};

/// Input N x C x H x W, output N x C x OH x OW. Caffe's ceil-mode output size.
struct PoolGeometry {
    int batch = 0;
    int channels = 0;
    int height = 0;
    int width = 0;
    int kernel = 0;
    int stride = 1;
    int pad = 0;
    [[nodiscard]] int out_height() const { return pooled(height); }
    [[nodiscard]] int out_width() const { return pooled(width); }

private:
    [[nodiscard]] int pooled(int size) const {
        int out = (size + 2 * pad - kernel + stride - 1) / stride + 1;
        // Caffe: the last window must start inside the image (not in the padding).
        if (pad > 0 && (out - 1) * stride >= size + pad) {
            --out;
        }
        return out;
    }
};

enum class Activation { relu, sigmoid, tanh };

/// Caffe's other neuron layers, whose backward reads x (engine/reference/elementwise.cpp):
///   absval  y = |x|                                   dx = sign(x) dy
///   bnll    y = log(1 + e^x)                          dx = dy e^x / (1 + e^x)
///   elu     y = x > 0 ? x : alpha (e^x - 1)           dx = dy (x > 0 ? 1 : y + alpha)
///   power   y = (shift + scale x)^power               dx = dy power scale (shift + scale
///   x)^(power-1)
enum class Pointwise { absval, bnll, elu, power };
struct PointwiseParams {
    float alpha = 1.0F; // elu
    float power = 1.0F; // power
    float scale = 1.0F;
    float shift = 0.0F;
};

/// N x C x (spatial) with the spatial dims flattened: the layers that work per channel along
/// axis 1 (LRN, BatchNorm, Scale).
struct ChannelGeometry {
    int batch = 0;
    int channels = 0;
    int spatial = 1; // H * W
    [[nodiscard]] std::size_t count() const {
        return static_cast<std::size_t>(batch) * channels * spatial;
    }
};

/// Caffe's LRN across channels: scale = k + alpha / size * (sum of x^2 over the `size`
/// channels centred on c, clipped to the image's channels); y = x * scale^-beta.
struct LrnParams {
    int size = 5;
    float alpha = 1.0F;
    float beta = 0.75F;
    float k = 1.0F;
};

/// Caffe's adaptive solvers, each with its own history (h; AdaDelta also h2, its updates'):
/// with the regularised gradient g,
///   AdaGrad  h += g^2;                          w -= lr g / (sqrt(h) + delta)
///   RMSProp  h = rate h + (1 - rate) g^2;       w -= lr g / (sqrt(h) + delta)
///   AdaDelta h = rate h + (1 - rate) g^2;       u = g sqrt((h2 + delta) / (h + delta));
///            h2 = rate h2 + (1 - rate) u^2;     w -= lr u
/// where rate is RMSProp's rms_decay and AdaDelta's momentum (adagrad/rmsprop/adadelta_solver.cpp).
enum class AdaptiveRule { adagrad, rmsprop, adadelta };

/// Caffe's EltwiseParameter operations, in its enum order.
enum class EltwiseOp { prod, sum, max };

/// Batches on their way from the host to the backend, `slots` deep: the host fills a slot's
/// host buffers, upload() starts copying them (asynchronously on a GPU, on a copy stream), and
/// consume() copies them into the net's input tensors, ordered before the ops that follow. With
/// two slots the next batch travels while the current step computes.
class InputStage {
public:
    virtual ~InputStage() = default;
    InputStage() = default;
    InputStage(const InputStage&) = delete;
    InputStage& operator=(const InputStage&) = delete;
    InputStage(InputStage&&) = delete;
    InputStage& operator=(InputStage&&) = delete;

    /// Host memory (pinned on a GPU) of `buffer` in `slot`; free to write once the slot's
    /// previous consume() was issued.
    virtual float* host(int slot, std::size_t buffer) = 0;
    virtual void upload(int slot) = 0;
    /// dst[i] (backend memory) receives buffer i of the slot.
    virtual void consume(int slot, const std::vector<float*>& dst) = 0;
};

/// Backend work recorded once and replayed as one launch (a CUDA graph). Replays see the same
/// pointers; values that change per step (the learning rate) must live in backend memory.
class Recording {
public:
    virtual ~Recording() = default;
    Recording() = default;
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
    Recording(Recording&&) = delete;
    Recording& operator=(Recording&&) = delete;
    virtual void replay() = 0;
};

/// One parameter in a solver update over all parameters (plain data: a device backend copies
/// the list to its memory once and reads it there).
struct UpdateTarget {
    std::size_t count = 0;
    float lr_mult = 1.0F;
    float decay = 0.0F; // weight_decay * decay_mult
    const float* grad = nullptr;
    float* history = nullptr;  // momentum, Adam's m, or an adaptive rule's h
    float* history2 = nullptr; // Adam's v, or AdaDelta's h2
    float* weights = nullptr;
};

class Backend : public Memory {
public:
    [[nodiscard]] virtual std::string name() const = 0;
    /// What it runs on, for logs: "cpu (2 threads)", "cuda:0 (NVIDIA H100 80GB HBM3)".
    [[nodiscard]] virtual std::string device_name() const = 0;
    [[nodiscard]] virtual int threads() const = 0;
    /// Waits until every op issued so far is done (per-layer timings).
    virtual void synchronize() {}

    /// The generic stage: plain host buffers, consume() uploads synchronously.
    virtual std::unique_ptr<InputStage> make_input_stage(const std::vector<std::size_t>& floats,
                                                         int slots);
    /// Records work() without running it, or returns null when this backend does not record
    /// (then the caller runs work() itself each time). Everything work() touches must have been
    /// set up by an earlier, unrecorded run (descriptors, workspaces, scratch).
    virtual std::unique_ptr<Recording> record(const std::function<void()>& work);

    // y = conv(x, w) + b; b may be null.
    virtual void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                              float* y) = 0;
    // dw, db (nullable), dx (nullable: not needed below this layer) from dy.
    virtual void conv_backward(const ConvGeometry& g, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db) = 0;
    // dx alone: conv_backward's input gradient, without the weight gradient's work. A
    // deconvolution's forward pass (a convolution's transpose) is this op.
    virtual void conv_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                                    float* dx) = 0;

    // argmax holds, per output, the input index of the max (the CPU backend's record of it;
    // cuDNN recomputes it from x and y).
    virtual void max_pool_forward(const PoolGeometry& g, const float* x, float* y,
                                  std::int32_t* argmax) = 0;
    virtual void max_pool_backward(const PoolGeometry& g, const float* x, const float* y,
                                   const float* dy, const std::int32_t* argmax, float* dx) = 0;
    virtual void ave_pool_forward(const PoolGeometry& g, const float* x, float* y) = 0;
    virtual void ave_pool_backward(const PoolGeometry& g, const float* dy, float* dx) = 0;

    // x: rows x in, w: out x in (Caffe's layout), y: rows x out.
    virtual void inner_product_forward(int rows, int in, int out, const float* x, const float* w,
                                       const float* b, float* y) = 0;
    virtual void inner_product_backward(int rows, int in, int out, const float* x, const float* w,
                                        const float* dy, float* dx, float* dw, float* db) = 0;

    virtual void activation_forward(Activation kind, std::size_t n, const float* x, float* y) = 0;
    // Uses the output y (all three derivatives are functions of it); x == y for in-place layers.
    virtual void activation_backward(Activation kind, std::size_t n, const float* y,
                                     const float* dy, float* dx) = 0;

    // AbsVal, BNLL, ELU, Power (Pointwise above); backward may not run in place.
    // EuclideanLoss: diff = a - b over n values; loss[0] = sum(diff^2) / (2 rows). Its backward
    // is scaled_copy of diff.
    virtual void euclidean_loss_forward(int rows, std::size_t n, const float* a, const float* b,
                                        float* diff, float* loss) = 0;
    // y = scale * x.
    virtual void scaled_copy(std::size_t n, float scale, const float* x, float* y) = 0;
    // ContrastiveLoss (Caffe's) over `rows` pairs of `dim` values a, b with similarity y
    // (non-zero: similar): diff = a - b, dist_sq[r] = |diff_r|^2, loss[0] = sum over rows of
    // (y ? dist_sq : max(margin - dist, 0)^2) / (2 rows); `legacy`: max(margin - dist_sq, 0).
    virtual void contrastive_loss_forward(int rows, int dim, float margin, bool legacy,
                                          const float* a, const float* b, const float* y,
                                          float* diff, float* dist_sq, float* loss) = 0;
    // The gradient of a (scale = loss_weight / rows) or of b (its negative).
    virtual void contrastive_loss_backward(int rows, int dim, float margin, bool legacy,
                                           float scale, const float* y, const float* diff,
                                           const float* dist_sq, float* dx) = 0;
    // SigmoidCrossEntropyLoss over n logits x with targets t: loss[0] = -sum(t log s(x) + (1 - t)
    // log(1 - s(x))) / rows, in Caffe's stable form; backward dx = scale * (s(x) - t).
    virtual void sigmoid_cross_entropy_forward(int rows, std::size_t n, const float* x,
                                               const float* t, float* loss) = 0;
    virtual void sigmoid_cross_entropy_backward(std::size_t n, float scale, const float* x,
                                                const float* t, float* dx) = 0;
    virtual void pointwise_forward(Pointwise f, const PointwiseParams& p, std::size_t n,
                                   const float* x, float* y) = 0;
    virtual void pointwise_backward(Pointwise f, const PointwiseParams& p, std::size_t n,
                                    const float* x, const float* y, const float* dy, float* dx) = 0;
    // Dropout's keep mask (1 with probability 1 - ratio, else 0). The CPU draws it from the
    // net's rng (bit-for-bit repeatable); a device draws it from a counter-based generator
    // seeded from that rng, so that a recorded step draws a fresh mask on every replay.
    virtual void dropout_mask(std::size_t n, float ratio, std::mt19937& rng, float* mask) = 0;
    // A device's dropout draw counter (the counter-based generator's position; each mask
    // advances it by one), set before a step: a data-parallel rank r > 0 sets it from the
    // iteration, so that its masks follow (seed, rank, iteration) in a replayed recording too.
    // The CPU draws from the rng itself: nothing to set.
    virtual void set_dropout_counter(std::uint64_t /*value*/) {}
    // y = x * mask * scale (mask is 0/1, or null for none), used forward and backward.
    virtual void masked_scale(std::size_t n, const float* x, const float* mask, float scale,
                              float* y) = 0;

    // HingeLoss (Caffe's one-vs-all): diff[r][j] = max(0, 1 + s[r][j] * (j == label ? -1 : 1));
    // loss[0] = sum(diff) / rows (L1) or sum(diff^2) / rows (`l2`). A label outside
    // [0, classes) counts every score as another class's. Backward: dx = scale * (L1: the sign
    // of diff, L2: 2 diff), negated at the label.
    virtual void hinge_loss_forward(int rows, int classes, bool l2, const float* scores,
                                    const float* labels, float* diff, float* loss) = 0;
    virtual void hinge_loss_backward(int rows, int classes, bool l2, float scale,
                                     const float* labels, const float* diff, float* dx) = 0;
    // Softmax over `classes` per row; loss[0] = the mean cross-entropy over rows.
    virtual void softmax_loss_forward(int rows, int classes, const float* logits,
                                      const float* labels, float* prob, float* loss) = 0;
    virtual void softmax_loss_backward(int rows, int classes, const float* prob,
                                       const float* labels, float scale, float* dlogits) = 0;
    // accuracy[0] = fraction of rows whose label has fewer than top_k scores above it.
    virtual void accuracy(int rows, int classes, int top_k, const float* scores,
                          const float* labels, float* accuracy) = 0;

    // --- Caffe layers beyond LeNet (definitions: engine/reference/channels.cpp) -------------
    // LRN across channels; `scale` (g.count() values) is kept for the backward pass.
    virtual void lrn_forward(const ChannelGeometry& g, const LrnParams& p, const float* x,
                             float* scale, float* y) = 0;
    virtual void lrn_backward(const ChannelGeometry& g, const LrnParams& p, const float* x,
                              const float* y, const float* scale, const float* dy, float* dx) = 0;
    // LRN within each channel (Caffe's WITHIN_CHANNEL): scale = 1 + alpha / size^2 * (sum of
    // x^2 over the size x size square centred on the pixel, zero outside the image); y = x *
    // scale^-beta. g is that square as a pooling window (kernel size, stride 1, pad (size-1)/2);
    // p.k is not used (Caffe's shift is 1).
    virtual void lrn_within_forward(const PoolGeometry& g, const LrnParams& p, const float* x,
                                    float* scale, float* y) = 0;
    virtual void lrn_within_backward(const PoolGeometry& g, const LrnParams& p, const float* x,
                                     const float* y, const float* scale, const float* dy,
                                     float* dx) = 0;
    // BatchNorm, Caffe's: y = (x - mean[c]) * inv_std[c], inv_std = 1 / sqrt(var + eps). With
    // batch statistics (use_global false) the running sums are updated: factor = factor * maf
    // + 1, mean_sum = mean + maf * mean_sum, var_sum = var * m / (m - 1) + maf * var_sum (m
    // = batch * spatial); with global statistics mean and var are the sums divided by factor.
    // running = {mean_sum (C), var_sum (C), factor (1)}; inv_std (C) is written for backward.
    // x may equal y.
    virtual void batch_norm_forward(const ChannelGeometry& g, bool use_global, float eps,
                                    float moving_average_fraction, const float* x,
                                    float* running_mean, float* running_var, float* running_factor,
                                    float* inv_std, float* y) = 0;
    // y is the normalised output of the forward pass; dy may equal dx.
    virtual void batch_norm_backward(const ChannelGeometry& g, bool use_global, const float* y,
                                     const float* inv_std, const float* dy, float* dx) = 0;
    // Scale: y = x * gamma[c] (+ beta[c] when beta is not null).
    virtual void scale_forward(const ChannelGeometry& g, const float* x, const float* gamma,
                               const float* beta, float* y) = 0;
    // dgamma, dbeta (nullable) and dx (nullable); dy may equal dx (in place).
    virtual void scale_backward(const ChannelGeometry& g, const float* x, const float* gamma,
                                const float* dy, float* dx, float* dgamma, float* dbeta) = 0;
    // PReLU (Caffe's): y = max(x, 0) + slope[c] * min(x, 0), slope[0] for every channel when
    // `shared`. Backward: dslope[c] = sum of dy * x where x <= 0 (over everything when shared),
    // then, where dx is given, dx = dy * (x > 0 ? 1 : slope[c]).
    virtual void prelu_forward(const ChannelGeometry& g, bool shared, const float* x,
                               const float* slope, float* y) = 0;
    virtual void prelu_backward(const ChannelGeometry& g, bool shared, const float* x,
                                const float* slope, const float* dy, float* dx, float* dslope) = 0;
    // Concat's copies: dst[r * dst_stride + i] = src[r * src_stride + i] for i < block.
    virtual void copy_blocks(int rows, std::size_t block, const float* src, std::size_t src_stride,
                             float* dst, std::size_t dst_stride) = 0;
    // Eltwise over x.size() >= 2 inputs of n values. sum: y = sum coeffs[i] * x[i]; prod; max,
    // with mask[j] = the input that won (Caffe's tie rule).
    virtual void eltwise_forward(EltwiseOp op, std::size_t n, const std::vector<const float*>& x,
                                 const std::vector<float>& coeffs, float* y,
                                 std::int32_t* mask) = 0;
    // dx of input `index`: sum: coeff * dy; prod: dy * the product of the other inputs; max:
    // dy where mask == index, else 0.
    virtual void eltwise_backward(EltwiseOp op, std::size_t n, int index,
                                  const std::vector<const float*>& x, float coeff, const float* dy,
                                  const std::int32_t* mask, float* dx) = 0;

    // Solver updates, Caffe's rules (docs/engine.md); g + decay * w is the regularised gradient.
    // step[0] is this iteration's learning rate and step[1] Adam's bias correction, in backend
    // memory (so that a recorded step reads the current values); the rate used is
    // step[0] * lr_mult.
    virtual void sgd_update(std::size_t n, const float* step, float lr_mult, float momentum,
                            float decay, bool nesterov, const float* g, float* history,
                            float* w) = 0;
    virtual void adam_update(std::size_t n, const float* step, float lr_mult, float beta1,
                             float beta2, float epsilon, float decay, const float* g, float* m,
                             float* v, float* w) = 0;
    virtual void adaptive_update(AdaptiveRule rule, std::size_t n, const float* step, float lr_mult,
                                 float rate, float delta, float decay, const float* g, float* h,
                                 float* h2, float* w) = 0;
    // Every parameter at once (one launch on a GPU instead of one per parameter). By default,
    // and on the CPU, sgd_update / adam_update per target in order.
    virtual void sgd_update_all(const std::vector<UpdateTarget>& targets, const float* step,
                                float momentum, bool nesterov);
    virtual void adam_update_all(const std::vector<UpdateTarget>& targets, const float* step,
                                 float beta1, float beta2, float epsilon);
    /// adaptive_update per target (history, history2), in order.
    void adaptive_update_all(AdaptiveRule rule, const std::vector<UpdateTarget>& targets,
                             const float* step, float rate, float delta);
};

/// Names of the backends compiled in ("cpu" always, "cuda" when built with it).
std::vector<std::string> backend_names();
/// The device dltrain uses without --device: "cuda:0" when built with CUDA and a GPU is
/// visible (CUDA_VISIBLE_DEVICES applies), else "cpu".
std::string default_device();
/// device: "cpu", "cuda" (= cuda:0) or "cuda:N" (N-th visible GPU); threads: the CPU pool
/// (0: the CPUs in this process's affinity mask). Throws dl::Error(usage) for an unknown name,
/// listing the valid ones, and dl::Error(device) when the GPU cannot be used.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads);

} // namespace dl
