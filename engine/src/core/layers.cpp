// Layer types. Shapes are NCHW; the math is the backend's (engine/src/cpu for the reference).

#include "core/layers.hpp"

#include "core/caffe_random.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <cmath>

namespace dl {

void Layer::fail(const std::string& message) const {
    throw Error(ErrorKind::config,
                fmt::format("layer '{}' ({}): {}", m_config.name, m_config.type, message));
}

void Layer::require_images(const Tensor& bottom, const std::string& producer) const {
    if (bottom.shape().size() != 4) {
        fail(fmt::format("needs a 4-D bottom (N x C x H x W) but '{}' from layer '{}' is {}",
                         m_config.bottoms[0], producer, bottom.shape_string()));
    }
}

namespace {

// Data: the trainer copies each batch into the tops; nothing to compute.
class DataLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& /*bottom*/, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        // The image shape is set by the net before setup (from the file or the 'shape' key).
        const std::size_t means = m_config.mean_value.size();
        if (means > 1 && means != static_cast<std::size_t>(top[0]->dim(1))) {
            fail(fmt::format("mean_value has {} values for {} channels (give one per channel, or "
                             "one for all)",
                             means, top[0]->dim(1)));
        }
        if (top.size() > 1) {
            top[1]->reshape({m_config.batch_size});
        }
    }
    void forward(const Blobs& /*bottom*/, const Blobs& /*top*/) override {}
    void backward(const Blobs&, const std::vector<bool>&, const Blobs&) override {}
    [[nodiscard]] bool can_backward() const override { return false; }
    [[nodiscard]] std::size_t min_bottoms() const override { return 0; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 0; }
    [[nodiscard]] std::size_t top_count() const override {
        return m_config.label_source.empty() ? 1 : 2;
    }
};

// Convolution: bottom N x C x H x W -> top N x M x OH x OW; weights M x C/group x K x K.
class ConvolutionLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const Tensor& x = *bottom[0];
        require_images(x, producers[0]);
        m_geometry = ConvGeometry{x.dim(0),
                                  x.dim(1),
                                  x.dim(2),
                                  x.dim(3),
                                  m_config.num_output,
                                  m_config.kernel_size,
                                  m_config.stride,
                                  m_config.pad,
                                  m_config.group};
        if (x.dim(1) % m_config.group != 0 || m_config.num_output % m_config.group != 0) {
            fail(fmt::format("group {} must divide the {} input channels from layer '{}' and "
                             "num_output {}",
                             m_config.group, x.dim(1), producers[0], m_config.num_output));
        }
        if (x.dim(2) + 2 * m_config.pad < m_config.kernel_size ||
            x.dim(3) + 2 * m_config.pad < m_config.kernel_size) {
            fail(fmt::format("kernel_size {} does not fit the {}x{} input from layer '{}' (pad {})",
                             m_config.kernel_size, x.dim(2), x.dim(3), producers[0], m_config.pad));
        }
        top[0]->reshape(
            {x.dim(0), m_config.num_output, m_geometry.out_height(), m_geometry.out_width()});
    }
    [[nodiscard]] std::vector<std::vector<int>> param_shapes() const override {
        std::vector<std::vector<int>> shapes = {{m_config.num_output,
                                                 m_geometry.channels / m_config.group,
                                                 m_config.kernel_size, m_config.kernel_size}};
        if (m_config.bias_term) {
            shapes.push_back({m_config.num_output});
        }
        return shapes;
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.conv_forward(m_geometry, bottom[0]->data(), m_params[0]->data(),
                               m_config.bias_term ? m_params[1]->data() : nullptr, top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        m_backend.conv_backward(m_geometry, bottom[0]->data(), m_params[0]->data(), top[0]->diff(),
                                propagate_down[0] ? bottom[0]->diff() : nullptr,
                                m_params[0]->diff(),
                                m_config.bias_term ? m_params[1]->diff() : nullptr);
    }

private:
    ConvGeometry m_geometry;
};

// Pooling, max or ave: N x C x H x W -> N x C x OH x OW (Caffe's ceil mode).
class PoolingLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const Tensor& x = *bottom[0];
        require_images(x, producers[0]);
        m_geometry =
            PoolGeometry{x.dim(0),        x.dim(1),    x.dim(2), x.dim(3), m_config.kernel_size,
                         m_config.stride, m_config.pad};
        if (m_config.pad >= m_config.kernel_size) {
            fail(fmt::format("pad {} must be smaller than kernel_size {}", m_config.pad,
                             m_config.kernel_size));
        }
        if (x.dim(2) + 2 * m_config.pad < m_config.kernel_size ||
            x.dim(3) + 2 * m_config.pad < m_config.kernel_size) {
            fail(fmt::format("kernel_size {} does not fit the {}x{} input from layer '{}'",
                             m_config.kernel_size, x.dim(2), x.dim(3), producers[0]));
        }
        // A kernel smaller than the stride can leave the last window wholly past the image
        // (Caffe's ceil-mode size, 2 wide, kernel 1, stride 2): max pooling would have no pixel
        // to point its argmax at (Caffe writes -1 and its backward pass then writes outside
        // the plane), so such a net is refused here.
        const auto last_start = [&](int out) { return (out - 1) * m_config.stride - m_config.pad; };
        if (last_start(m_geometry.out_height()) >= x.dim(2) ||
            last_start(m_geometry.out_width()) >= x.dim(3)) {
            fail(fmt::format("kernel_size {} with stride {} leaves the last window past the {}x{} "
                             "input from layer '{}' (make kernel_size at least the stride, or "
                             "crop the input)",
                             m_config.kernel_size, m_config.stride, x.dim(2), x.dim(3),
                             producers[0]));
        }
        top[0]->reshape({x.dim(0), x.dim(1), m_geometry.out_height(), m_geometry.out_width()});
        m_argmax = Buffer(m_backend, top[0]->count() * sizeof(std::int32_t));
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        if (m_config.pool == "max") {
            m_backend.max_pool_forward(m_geometry, bottom[0]->data(), top[0]->data(),
                                       m_argmax.as<std::int32_t>());
        } else {
            m_backend.ave_pool_forward(m_geometry, bottom[0]->data(), top[0]->data());
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (!propagate_down[0]) {
            return;
        }
        if (m_config.pool == "max") {
            m_backend.max_pool_backward(m_geometry, bottom[0]->data(), top[0]->data(),
                                        top[0]->diff(), m_argmax.as<std::int32_t>(),
                                        bottom[0]->diff());
        } else {
            m_backend.ave_pool_backward(m_geometry, top[0]->diff(), bottom[0]->diff());
        }
    }

private:
    PoolGeometry m_geometry;
    Buffer m_argmax; // int32 per output, in backend memory
};

// InnerProduct: bottom N x (everything else) -> N x num_output; weights num_output x in.
class InnerProductLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        m_rows = bottom[0]->dim(0);
        m_in = static_cast<int>(bottom[0]->inner());
        top[0]->reshape({m_rows, m_config.num_output});
    }
    [[nodiscard]] std::vector<std::vector<int>> param_shapes() const override {
        std::vector<std::vector<int>> shapes = {{m_config.num_output, m_in}};
        if (m_config.bias_term) {
            shapes.push_back({m_config.num_output});
        }
        return shapes;
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.inner_product_forward(
            m_rows, m_in, m_config.num_output, bottom[0]->data(), m_params[0]->data(),
            m_config.bias_term ? m_params[1]->data() : nullptr, top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        m_backend.inner_product_backward(
            m_rows, m_in, m_config.num_output, bottom[0]->data(), m_params[0]->data(),
            top[0]->diff(), propagate_down[0] ? bottom[0]->diff() : nullptr, m_params[0]->diff(),
            m_config.bias_term ? m_params[1]->diff() : nullptr);
    }

private:
    int m_rows = 0;
    int m_in = 0;
};

// ReLU, Sigmoid, TanH: elementwise, in place allowed (top == bottom).
class ActivationLayer final : public Layer {
public:
    ActivationLayer(const LayerConfig& config, Backend& backend, Activation kind)
        : Layer(config, backend), m_kind(kind) {}
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        if (top[0] != bottom[0]) {
            top[0]->reshape(bottom[0]->shape());
        }
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.activation_forward(m_kind, bottom[0]->count(), bottom[0]->data(), top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.activation_backward(m_kind, top[0]->count(), top[0]->data(), top[0]->diff(),
                                          bottom[0]->diff());
        }
    }

private:
    Activation m_kind;
};

// Dropout: in training, keeps each value with probability 1 - ratio and scales by 1/(1 - ratio);
// identity in the test net (Caffe's convention).
class DropoutLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        if (top[0] != bottom[0]) {
            top[0]->reshape(bottom[0]->shape());
        }
        m_count = bottom[0]->count();
        m_mask = Buffer(m_backend, m_count * sizeof(float));
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        const bool train = m_phase == Phase::train;
        if (train) {
            m_backend.dropout_mask(m_count, m_config.dropout_ratio, *m_rng, m_mask.as<float>());
        }
        const float scale = train ? 1.0F / (1.0F - m_config.dropout_ratio) : 1.0F;
        if (train || top[0] != bottom[0]) {
            m_backend.masked_scale(m_count, bottom[0]->data(), train ? m_mask.as<float>() : nullptr,
                                   scale, top[0]->data());
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.masked_scale(m_count, top[0]->diff(), m_mask.as<float>(),
                                   1.0F / (1.0F - m_config.dropout_ratio), bottom[0]->diff());
        }
    }

private:
    std::size_t m_count = 0;
    Buffer m_mask; // 0/1 per value, in backend memory
};

// N x C x (anything): the geometry of the per-channel layers, from a bottom of 2 or more axes.
ChannelGeometry channels_of(const Tensor& x) {
    return ChannelGeometry{x.dim(0), x.dim(1),
                           x.dim(1) == 0 ? 0 : static_cast<int>(x.inner() / x.dim(1))};
}

// LRN across channels (Caffe's ACROSS_CHANNELS region). Backward reads x and y, so it cannot
// run in place (layer_types).
class LrnLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        require_images(*bottom[0], producers[0]);
        if (m_config.local_size % 2 == 0) {
            fail(fmt::format("local_size {} must be odd (Caffe's rule)", m_config.local_size));
        }
        m_geometry = channels_of(*bottom[0]);
        m_params_lrn = LrnParams{m_config.local_size, m_config.alpha, m_config.beta, m_config.k};
        top[0]->reshape(bottom[0]->shape());
        m_scale = Buffer(m_backend, bottom[0]->count() * sizeof(float));
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.lrn_forward(m_geometry, m_params_lrn, bottom[0]->data(), m_scale.as<float>(),
                              top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.lrn_backward(m_geometry, m_params_lrn, bottom[0]->data(), top[0]->data(),
                                   m_scale.as<float>(), top[0]->diff(), bottom[0]->diff());
        }
    }

private:
    ChannelGeometry m_geometry;
    LrnParams m_params_lrn;
    Buffer m_scale;
};

// BatchNorm (Caffe's: no scale and shift of its own, a Scale layer follows). Its three
// parameters are the running mean sum, variance sum and their factor, which the solver leaves
// alone; the test net reads the train net's.
class BatchNormLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        if (bottom[0]->shape().size() < 2) {
            fail(fmt::format("needs a bottom with channels (N x C x ...) but '{}' from layer '{}' "
                             "is {}",
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string()));
        }
        m_geometry = channels_of(*bottom[0]);
        m_use_global = m_config.use_global_stats.value_or(m_phase == Phase::test);
        if (top[0] != bottom[0]) {
            top[0]->reshape(bottom[0]->shape());
        } else {
            // In place, the blob may be changed by the next in-place layer (Scale) before this
            // one's backward reads its output: keep a copy (Caffe's x_norm_).
            m_saved = Buffer(m_backend, bottom[0]->count() * sizeof(float));
        }
        m_inv_std =
            Buffer(m_backend, static_cast<std::size_t>(m_geometry.channels) * sizeof(float));
    }
    [[nodiscard]] std::vector<std::vector<int>> param_shapes() const override {
        return {{m_geometry.channels}, {m_geometry.channels}, {1}};
    }
    [[nodiscard]] FillerConfig param_filler(std::size_t /*i*/) const override {
        return FillerConfig{"constant", 0.0F};
    }
    [[nodiscard]] bool learnable(std::size_t /*i*/) const override { return false; }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.batch_norm_forward(m_geometry, m_use_global, m_config.eps,
                                     m_config.moving_average_fraction, bottom[0]->data(),
                                     m_params[0]->data(), m_params[1]->data(), m_params[2]->data(),
                                     m_inv_std.as<float>(), top[0]->data());
        if (m_saved.get() != nullptr) {
            m_backend.copy(m_saved.get(), top[0]->data(), top[0]->count() * sizeof(float));
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            const float* y = m_saved.get() != nullptr ? m_saved.as<float>() : top[0]->data();
            m_backend.batch_norm_backward(m_geometry, m_use_global, y, m_inv_std.as<float>(),
                                          top[0]->diff(), bottom[0]->diff());
        }
    }

private:
    ChannelGeometry m_geometry;
    bool m_use_global = false;
    Buffer m_inv_std;
    Buffer m_saved;
};

// Scale: y = x * gamma[c] (+ beta[c]), one gamma per channel of axis 1 (Caffe's default axis
// and num_axes; a second bottom as the scale is not supported).
class ScaleLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        if (bottom[0]->shape().size() < 2) {
            fail(fmt::format("needs a bottom with channels (N x C x ...) but '{}' from layer '{}' "
                             "is {}",
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string()));
        }
        m_geometry = channels_of(*bottom[0]);
        if (top[0] != bottom[0]) {
            top[0]->reshape(bottom[0]->shape());
        } else {
            m_saved = Buffer(m_backend, bottom[0]->count() * sizeof(float)); // x, for dgamma
        }
    }
    [[nodiscard]] std::vector<std::vector<int>> param_shapes() const override {
        std::vector<std::vector<int>> shapes = {{m_geometry.channels}};
        if (m_config.bias_term) {
            shapes.push_back({m_geometry.channels});
        }
        return shapes;
    }
    [[nodiscard]] FillerConfig param_filler(std::size_t i) const override {
        return i == 0 ? m_config.filler : m_config.bias_filler;
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        if (m_saved.get() != nullptr) {
            m_backend.copy(m_saved.get(), bottom[0]->data(), bottom[0]->count() * sizeof(float));
        }
        m_backend.scale_forward(m_geometry, bottom[0]->data(), m_params[0]->data(),
                                m_config.bias_term ? m_params[1]->data() : nullptr, top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        const float* x = m_saved.get() != nullptr ? m_saved.as<float>() : bottom[0]->data();
        m_backend.scale_backward(m_geometry, x, m_params[0]->data(), top[0]->diff(),
                                 propagate_down[0] ? bottom[0]->diff() : nullptr,
                                 m_params[0]->diff(),
                                 m_config.bias_term ? m_params[1]->diff() : nullptr);
    }

private:
    ChannelGeometry m_geometry;
    Buffer m_saved;
};

// Concat along `axis`: every other axis must agree.
class ConcatLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const std::vector<int>& first = bottom[0]->shape();
        const int axes = static_cast<int>(first.size());
        if (m_config.axis < 0 || m_config.axis >= axes) {
            fail(fmt::format("axis {} is not an axis of '{}' from layer '{}' ({})", m_config.axis,
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string()));
        }
        const auto axis = static_cast<std::size_t>(m_config.axis);
        std::vector<int> shape = first;
        for (std::size_t b = 1; b < bottom.size(); ++b) {
            const std::vector<int>& other = bottom[b]->shape();
            bool fits = other.size() == first.size();
            for (std::size_t a = 0; fits && a < first.size(); ++a) {
                fits = a == axis || other[a] == first[a];
            }
            if (!fits) {
                fail(fmt::format("'{}' from layer '{}' is {} but '{}' from layer '{}' is {}: "
                                 "only axis {} may differ",
                                 m_config.bottoms[b], producers[b], bottom[b]->shape_string(),
                                 m_config.bottoms[0], producers[0], bottom[0]->shape_string(),
                                 m_config.axis));
            }
            shape[axis] += other[axis];
        }
        m_rows = 1;
        for (std::size_t a = 0; a < axis; ++a) {
            m_rows *= first[a];
        }
        top[0]->reshape(shape);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        const std::size_t top_row = top[0]->count() / static_cast<std::size_t>(m_rows);
        std::size_t offset = 0;
        for (const Tensor* b : bottom) {
            const std::size_t row = b->count() / static_cast<std::size_t>(m_rows);
            m_backend.copy_blocks(m_rows, row, b->data(), row, top[0]->data() + offset, top_row);
            offset += row;
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        const std::size_t top_row = top[0]->count() / static_cast<std::size_t>(m_rows);
        std::size_t offset = 0;
        for (std::size_t i = 0; i < bottom.size(); ++i) {
            const std::size_t row = bottom[i]->count() / static_cast<std::size_t>(m_rows);
            if (propagate_down[i]) {
                m_backend.copy_blocks(m_rows, row, top[0]->diff() + offset, top_row,
                                      bottom[i]->diff(), row);
            }
            offset += row;
        }
    }
    [[nodiscard]] std::size_t max_bottoms() const override { return 64; }

private:
    int m_rows = 1;
};

// Eltwise: sum (with coefficients), prod or max of same-shaped bottoms.
class EltwiseLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        for (std::size_t b = 0; b < bottom.size(); ++b) {
            if (bottom[b]->shape() != bottom[0]->shape()) {
                fail(fmt::format("'{}' from layer '{}' is {} but '{}' from layer '{}' is {}",
                                 m_config.bottoms[b], producers[b], bottom[b]->shape_string(),
                                 m_config.bottoms[0], producers[0], bottom[0]->shape_string()));
            }
        }
        if (m_config.operation == "prod") {
            m_op = EltwiseOp::prod;
        } else if (m_config.operation == "max") {
            m_op = EltwiseOp::max;
        } else {
            m_op = EltwiseOp::sum;
        }
        m_coeffs = m_config.coeff;
        if (m_coeffs.empty()) {
            m_coeffs.assign(bottom.size(), 1.0F);
        } else if (m_coeffs.size() != bottom.size()) {
            fail(fmt::format("has {} coeff values for {} bottoms", m_coeffs.size(), bottom.size()));
        } else if (m_op != EltwiseOp::sum) {
            fail("coeff applies to operation sum only");
        }
        top[0]->reshape(bottom[0]->shape());
        if (m_op == EltwiseOp::max) {
            m_mask = Buffer(m_backend, top[0]->count() * sizeof(std::int32_t));
        }
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.eltwise_forward(m_op, top[0]->count(), inputs(bottom), m_coeffs, top[0]->data(),
                                  m_mask.as<std::int32_t>());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        const auto x = inputs(bottom);
        for (std::size_t i = 0; i < bottom.size(); ++i) {
            if (propagate_down[i]) {
                m_backend.eltwise_backward(m_op, top[0]->count(), static_cast<int>(i), x,
                                           m_coeffs[i], top[0]->diff(), m_mask.as<std::int32_t>(),
                                           bottom[i]->diff());
            }
        }
    }
    [[nodiscard]] std::size_t min_bottoms() const override { return 2; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 64; }

private:
    static std::vector<const float*> inputs(const Blobs& bottom) {
        std::vector<const float*> x;
        x.reserve(bottom.size());
        for (const Tensor* b : bottom) {
            x.push_back(b->data());
        }
        return x;
    }
    EltwiseOp m_op = EltwiseOp::sum;
    std::vector<float> m_coeffs;
    Buffer m_mask; // max only: the winning bottom per value, in backend memory
};

// SoftmaxWithLoss and Accuracy read scores N x classes (x 1 x 1) and N labels.
class ScoresAndLabelsLayer : public Layer {
public:
    using Layer::Layer;
    [[nodiscard]] std::size_t min_bottoms() const override { return 2; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 2; }

protected:
    /// Rows and classes of the scores; one label per row, or a config error naming both layers.
    void read_scores_and_labels(const Blobs& bottom, const std::vector<std::string>& producers) {
        m_rows = bottom[0]->dim(0);
        m_classes = static_cast<int>(bottom[0]->inner());
        if (bottom[1]->count() != static_cast<std::size_t>(m_rows)) {
            fail(fmt::format("'{}' from layer '{}' has {} rows but '{}' from layer '{}' has {} "
                             "labels",
                             m_config.bottoms[0], producers[0], m_rows, m_config.bottoms[1],
                             producers[1], bottom[1]->count()));
        }
    }
    [[nodiscard]] int label_classes() const override { return m_classes; }
    int m_rows = 0;
    int m_classes = 0;
};

// SoftmaxWithLoss: logits and labels -> mean cross-entropy, shape 1.
class SoftmaxWithLossLayer final : public ScoresAndLabelsLayer {
public:
    using ScoresAndLabelsLayer::ScoresAndLabelsLayer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        read_scores_and_labels(bottom, producers);
        m_prob = Tensor(bottom[0]->shape(), &m_backend);
        top[0]->reshape({1});
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.softmax_loss_forward(m_rows, m_classes, bottom[0]->data(), bottom[1]->data(),
                                       m_prob.data(), top[0]->data());
    }
    void backward(const Blobs& /*top*/, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.softmax_loss_backward(m_rows, m_classes, m_prob.data(), bottom[1]->data(),
                                            m_config.loss_weight / static_cast<float>(m_rows),
                                            bottom[0]->diff());
        }
    }
    [[nodiscard]] bool is_loss() const override { return true; }

private:
    Tensor m_prob;
};

// Accuracy: fraction of rows whose label is among the top_k scores (ties count against).
class AccuracyLayer final : public ScoresAndLabelsLayer {
public:
    using ScoresAndLabelsLayer::ScoresAndLabelsLayer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        read_scores_and_labels(bottom, producers);
        if (m_config.top_k < 1 || m_config.top_k > m_classes) {
            fail(fmt::format("top_k {} is not between 1 and the {} classes of '{}' from layer '{}'",
                             m_config.top_k, m_classes, m_config.bottoms[0], producers[0]));
        }
        top[0]->reshape({1});
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.accuracy(m_rows, m_classes, m_config.top_k, bottom[0]->data(), bottom[1]->data(),
                           top[0]->data());
    }
    void backward(const Blobs&, const std::vector<bool>&, const Blobs&) override {}
    [[nodiscard]] bool can_backward() const override { return false; }
};

} // namespace

namespace {

template <typename L> std::unique_ptr<Layer> make(const LayerConfig& config, Backend& backend) {
    return std::make_unique<L>(config, backend);
}
template <Activation kind>
std::unique_ptr<Layer> make_activation(const LayerConfig& config, Backend& backend) {
    return std::make_unique<ActivationLayer>(config, backend, kind);
}

struct LayerType {
    const char* name;
    // Whether a top may be the layer's own bottom. Only where forward and backward never read a
    // value they have overwritten: the activations (their backward reads y), Dropout (its mask),
    // and BatchNorm and Scale (which keep a copy of what their backward needs). The others read
    // their input while they write their output (a convolution's or inner product's output is a
    // sum over many inputs, a pooling window overlaps the next, the loss and accuracy shape
    // their top as one value), so in place they compute garbage or write past the blob.
    bool in_place;
    std::unique_ptr<Layer> (*make)(const LayerConfig&, Backend&);
};

// The explicit table of layer types (docs/engine.md, "Config format").
const std::vector<LayerType>& layer_types() {
    static const std::vector<LayerType> types = {
        {"Data", false, make<DataLayer>},
        {"Convolution", false, make<ConvolutionLayer>},
        {"Pooling", false, make<PoolingLayer>},
        {"InnerProduct", false, make<InnerProductLayer>},
        {"ReLU", true, make_activation<Activation::relu>},
        {"Sigmoid", true, make_activation<Activation::sigmoid>},
        {"TanH", true, make_activation<Activation::tanh>},
        {"Dropout", true, make<DropoutLayer>},
        {"LRN", false, make<LrnLayer>},
        {"BatchNorm", true, make<BatchNormLayer>},
        {"Scale", true, make<ScaleLayer>},
        {"Concat", false, make<ConcatLayer>},
        {"Eltwise", false, make<EltwiseLayer>},
        {"SoftmaxWithLoss", false, make<SoftmaxWithLossLayer>},
        {"Accuracy", false, make<AccuracyLayer>},
    };
    return types;
}

const LayerType* find_type(const std::string& type) {
    for (const LayerType& entry : layer_types()) {
        if (type == entry.name) {
            return &entry;
        }
    }
    return nullptr;
}

} // namespace

std::unique_ptr<Layer> make_layer(const LayerConfig& config, Backend& backend) {
    const LayerType* type = find_type(config.type);
    if (type == nullptr) {
        throw Error(ErrorKind::config, fmt::format("unknown layer type '{}'", config.type));
    }
    return type->make(config, backend);
}

bool may_run_in_place(const std::string& type) {
    const LayerType* found = find_type(type);
    return found != nullptr && found->in_place;
}

std::vector<std::string> in_place_types() {
    std::vector<std::string> names;
    for (const LayerType& entry : layer_types()) {
        if (entry.in_place) {
            names.emplace_back(entry.name);
        }
    }
    return names;
}

void fill(const FillerConfig& filler, Tensor& tensor, std::mt19937& rng) {
    const std::size_t count = tensor.count();
    std::vector<float> values(count);
    float* w = values.data();
    const float fan_in = static_cast<float>(count) / static_cast<float>(tensor.dim(0));
    const float fan_out = static_cast<float>(count) / static_cast<float>(tensor.dim(1));
    float n = fan_in;
    if (filler.variance_norm == "fan_out") {
        n = fan_out;
    } else if (filler.variance_norm == "average") {
        n = (fan_in + fan_out) / 2.0F;
    }
    if (filler.type == "constant") {
        std::fill(w, w + count, filler.value);
    } else if (filler.type == "uniform" || filler.type == "xavier") {
        const float limit = std::sqrt(3.0F / n);
        const float low = filler.type == "xavier" ? -limit : filler.min;
        const float high = filler.type == "xavier" ? limit : filler.max;
        caffe_uniform(rng, low, high, w, count);
    } else {
        const float mean = filler.type == "msra" ? 0.0F : filler.mean;
        const float stddev = filler.type == "msra" ? std::sqrt(2.0F / n) : filler.std;
        caffe_gaussian(rng, mean, stddev, w, count);
    }
    tensor.write_data(values.data());
}

} // namespace dl
