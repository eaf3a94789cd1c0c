#pragma once
// The math a network needs, behind one interface so that a GPU backend can replace the CPU
// reference op by op. Pointers are the backend's memory (host memory for "cpu"); no CUDA type
// appears here. Backends are chosen from an explicit table (make_backend), not self-registered.
//
// Every op overwrites its outputs (parameter gradients included: each parameter is used once).

#include <cstdint>
#include <memory>
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

class Backend {
public:
    virtual ~Backend() = default;
    Backend() = default;
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;
    Backend(Backend&&) = delete;
    Backend& operator=(Backend&&) = delete;

    [[nodiscard]] virtual std::string name() const = 0;
    [[nodiscard]] virtual int threads() const = 0;

    // y = conv(x, w) + b; b may be null.
    virtual void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                              float* y) = 0;
    // dw, db (nullable), dx (nullable: not needed below this layer) from dy.
    virtual void conv_backward(const ConvGeometry& g, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db) = 0;

    // argmax holds, per output, the input index of the max (max pooling only).
    virtual void max_pool_forward(const PoolGeometry& g, const float* x, float* y,
                                  std::int32_t* argmax) = 0;
    virtual void max_pool_backward(const PoolGeometry& g, const float* dy,
                                   const std::int32_t* argmax, float* dx) = 0;
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

    // y = x * mask * scale (mask is 0/1), used forward and backward.
    virtual void masked_scale(std::size_t n, const float* x, const float* mask, float scale,
                              float* y) = 0;

    // Softmax over `classes` per row; returns the mean cross-entropy over rows.
    virtual float softmax_loss_forward(int rows, int classes, const float* logits,
                                       const float* labels, float* prob) = 0;
    virtual void softmax_loss_backward(int rows, int classes, const float* prob,
                                       const float* labels, float scale, float* dlogits) = 0;

    // Solver updates, Caffe's rules (docs/engine.md); g + decay * w is the regularised gradient.
    virtual void sgd_update(std::size_t n, float lr, float momentum, float decay, bool nesterov,
                            const float* g, float* history, float* w) = 0;
    virtual void adam_update(std::size_t n, float lr, float beta1, float beta2, float epsilon,
                             float correction, float decay, const float* g, float* m, float* v,
                             float* w) = 0;
};

/// Names of the backends compiled in ("cpu" always).
std::vector<std::string> backend_names();
/// Throws dl::Error(usage) listing the valid names for an unknown one.
std::unique_ptr<Backend> make_backend(const std::string& name, int threads);

} // namespace dl
