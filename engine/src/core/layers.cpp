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
        if (m_config.top_k > m_classes) {
            fail(fmt::format("top_k {} is more than the {} classes of '{}' from layer '{}'",
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

std::unique_ptr<Layer> make_layer(const LayerConfig& config, Backend& backend) {
    const std::string& type = config.type;
    if (type == "Data") {
        return std::make_unique<DataLayer>(config, backend);
    }
    if (type == "Convolution") {
        return std::make_unique<ConvolutionLayer>(config, backend);
    }
    if (type == "Pooling") {
        return std::make_unique<PoolingLayer>(config, backend);
    }
    if (type == "InnerProduct") {
        return std::make_unique<InnerProductLayer>(config, backend);
    }
    if (type == "ReLU") {
        return std::make_unique<ActivationLayer>(config, backend, Activation::relu);
    }
    if (type == "Sigmoid") {
        return std::make_unique<ActivationLayer>(config, backend, Activation::sigmoid);
    }
    if (type == "TanH") {
        return std::make_unique<ActivationLayer>(config, backend, Activation::tanh);
    }
    if (type == "Dropout") {
        return std::make_unique<DropoutLayer>(config, backend);
    }
    if (type == "SoftmaxWithLoss") {
        return std::make_unique<SoftmaxWithLossLayer>(config, backend);
    }
    if (type == "Accuracy") {
        return std::make_unique<AccuracyLayer>(config, backend);
    }
    throw Error(ErrorKind::config, fmt::format("unknown layer type '{}'", type));
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
