#pragma once
// A layer of a net: it checks its bottoms' shapes at setup, shapes its tops by its kind's shape
// rule (net/layer_kind.hpp) and calls the backend. Each type is one file in net/layers/.

#include "net/layer_kind.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/tensor.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace dl {

using Blobs = std::vector<Tensor*>;

class Layer {
public:
    Layer(const LayerConfig& config, Backend& backend) : m_config(config), m_backend(backend) {}
    virtual ~Layer() = default;
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;
    Layer(Layer&&) = delete;
    Layer& operator=(Layer&&) = delete;

    /// Checks bottom shapes, shapes the tops; `producers` name the layer of each bottom for
    /// messages. Throws dl::Error(config).
    virtual void setup(const Blobs& bottom, const Blobs& top,
                       const std::vector<std::string>& producers) = 0;
    /// Shapes of the parameters (weights, bias), known after setup.
    [[nodiscard]] const std::vector<std::vector<int>>& param_shapes() const {
        return m_param_shapes;
    }
    /// How parameter i starts: the weight filler for the first, the bias filler for the rest.
    [[nodiscard]] virtual FillerConfig param_filler(std::size_t i) const {
        return i == 0 ? m_config.weight_filler : m_config.bias_filler;
    }
    /// False for state kept in a parameter that the solver must not move (BatchNorm's running
    /// statistics): the net gives it lr_mult 0 and decay_mult 0 whatever the config says.
    [[nodiscard]] virtual bool learnable(std::size_t /*i*/) const { return true; }
    virtual void forward(const Blobs& bottom, const Blobs& top) = 0;
    virtual void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                          const Blobs& bottom) = 0;
    [[nodiscard]] virtual bool is_loss() const { return false; }
    /// Whether a gradient flows to bottom i: not to a loss's labels or targets (bottom 1),
    /// unless the loss says so (EuclideanLoss's two sides).
    [[nodiscard]] virtual bool backpropagates_to(std::size_t i) const {
        return !(is_loss() && i == 1);
    }
    /// For a layer that indexes a row of scores by the label in bottom 1 (loss, accuracy): the
    /// number of scores per row, known after setup; a label must be below it. 0: reads no label.
    [[nodiscard]] virtual int label_classes() const { return 0; }
    [[nodiscard]] virtual bool can_backward() const { return true; }
    [[nodiscard]] virtual std::size_t min_bottoms() const { return 1; }
    [[nodiscard]] virtual std::size_t max_bottoms() const { return 1; }
    [[nodiscard]] virtual std::size_t top_count() const { return 1; }

    [[nodiscard]] const LayerConfig& config() const { return m_config; }
    std::vector<std::shared_ptr<Tensor>>& params() { return m_params; }

    void set_phase(Phase phase) { m_phase = phase; }
    void set_rng(std::mt19937* rng) { m_rng = rng; }

protected:
    [[noreturn]] void fail(const std::string& message) const;
    /// Convolution and pooling read images: a bottom that is not N x C x H x W is a config error
    /// naming it and the layer that made it.
    void require_images(const Tensor& bottom, const std::string& producer) const;
    /// The per-channel layers (BatchNorm, Scale) need N x C x ...: a config error otherwise.
    void require_channels(const Tensor& bottom, const std::string& producer) const;
    /// Shapes the tops (those that are not also a bottom: in place, the shape is the bottom's)
    /// and keeps the parameter shapes, by the kind's shape rule: the memory plan's rule too.
    /// Returns what the rule planned (a layer's own buffers are sized from it).
    Planned shape_tops(const Blobs& bottom, const Blobs& top);
    std::vector<std::vector<int>> m_param_shapes;
    std::vector<std::shared_ptr<Tensor>> m_params;
    const LayerConfig& m_config;
    Backend& m_backend;
    Phase m_phase = Phase::train;
    std::mt19937* m_rng = nullptr;
};

/// The copy an in-place layer keeps of a blob its backward reads but that is overwritten before
/// then: its input, by the layer itself (PReLU, Scale), or its output, by the next in-place layer
/// (BatchNorm's, by the Scale after it; Caffe's x_norm_). A layer that does not run in place
/// keeps none and its backward reads the blob itself.
class InPlaceCopy {
public:
    /// Keeps a copy only when the layer runs in place (`top` is `bottom`).
    void setup(Backend& backend, const Tensor* bottom, const Tensor* top) {
        if (top == bottom) {
            m_copy = Buffer(backend, bottom->count() * sizeof(float));
        }
    }
    /// In forward, before the blob is overwritten: copied when a copy is kept.
    void save(Backend& backend, const Tensor& blob) const {
        if (m_copy.get() != nullptr) {
            backend.copy(m_copy.get(), blob.data(), blob.count() * sizeof(float));
        }
    }
    /// What backward reads: the copy, or the blob itself.
    [[nodiscard]] const float* of(const Tensor& blob) const {
        return m_copy.get() != nullptr ? m_copy.as<float>() : blob.data();
    }

private:
    Buffer m_copy;
};

/// The layer class as a kind's `make`.
template <typename L> std::unique_ptr<Layer> make_as(const LayerConfig& config, Backend& backend) {
    return std::make_unique<L>(config, backend);
}

/// The values of a shape, saturating at 2^64 - 1 instead of wrapping.
std::uint64_t count_of(const Shape& shape);
/// "64x1x28x28", for messages.
std::string shape_text(const Shape& shape);
/// A size padded by the layer's pad on both sides; a config error past 2^31 - 1 (the layers'
/// window arithmetic is int).
std::int64_t padded(const LayerConfig& layer, std::int64_t size);
/// N x C x (anything): the geometry of the per-channel layers, from a bottom of 2 or more axes.
ChannelGeometry channels_of(const Tensor& x);

/// Fills a parameter the way Caffe does (fan_in = count / shape[0], fan_out = count / shape[1]).
void fill(const FillerConfig& filler, Tensor& tensor, std::mt19937& rng);

} // namespace dl
