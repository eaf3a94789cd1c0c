// Deconvolution (Caffe's, a convolution's transpose: the upsampling of fully convolutional nets):
// bottom N x C x H x W -> top N x M x OH x OW with OH = stride (H - 1) + K - 2 pad; weights
// C x M/group x K x K (Caffe's layout). It is the convolution that maps the top's shape back to
// the bottom's, run the other way: forward is that convolution's input gradient, backward its
// forward pass (for the bottom) and its weight gradient (with the roles of x and dy swapped), so
// the backends need no kernel of their own.

#include "net/layers/convolution_keys.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <vector>

namespace dl::layers {
namespace deconvolution_layer {

class DeconvolutionLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const Tensor& x = *bottom[0];
        require_images(x, producers[0]);
        if (x.dim(1) % m_config.group != 0 || m_config.num_output % m_config.group != 0) {
            fail(fmt::format("group {} must divide the {} input channels from layer '{}' and "
                             "num_output {}",
                             m_config.group, x.dim(1), producers[0], m_config.num_output));
        }
        const Planned planned = shape_tops(bottom, top);
        const std::vector<std::int64_t>& y = planned.tops[0];
        // The convolution from the top's shape to the bottom's.
        m_mirror = ConvGeometry{
            x.dim(0),      static_cast<int>(y[1]), static_cast<int>(y[2]), static_cast<int>(y[3]),
            x.dim(1),      m_config.kernel_size,   m_config.stride,        m_config.pad,
            m_config.group};
        m_channels = ChannelGeometry{x.dim(0), m_config.num_output, static_cast<int>(y[2] * y[3])};
        if (m_config.bias_term) {
            // Adding the bias is Scale's op with a scale of 1; its gradient, Scale's shift one.
            m_ones = Tensor({m_config.num_output}, &m_backend);
            m_ones.drop_gradient();
            const std::vector<float> ones(static_cast<std::size_t>(m_config.num_output), 1.0F);
            m_ones.write_data(ones.data());
            m_scratch =
                Buffer(m_backend, static_cast<std::size_t>(m_config.num_output) * sizeof(float));
        }
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.conv_backward_data(m_mirror, m_params[0]->data(), bottom[0]->data(),
                                     top[0]->data());
        if (m_config.bias_term) {
            m_backend.scale_forward(m_channels, top[0]->data(), m_ones.data(), m_params[1]->data(),
                                    top[0]->data());
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (m_config.bias_term) {
            m_backend.scale_backward(m_channels, top[0]->diff(), m_ones.data(), top[0]->diff(),
                                     nullptr, m_scratch.as<float>(), m_params[1]->diff());
        }
        // The mirror convolution's weight gradient: its input is this layer's top gradient, its
        // output gradient this layer's bottom.
        m_backend.conv_backward(m_mirror, top[0]->diff(), m_params[0]->data(), bottom[0]->data(),
                                nullptr, m_params[0]->diff(), nullptr);
        if (propagate_down[0]) {
            m_backend.conv_forward(m_mirror, top[0]->diff(), m_params[0]->data(), nullptr,
                                   bottom[0]->diff());
        }
    }

private:
    ConvGeometry m_mirror;
    ChannelGeometry m_channels;
    Tensor m_ones;
    Buffer m_scratch;
};

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() != 4 || l.kernel_size < 1 || l.stride < 1 || l.group < 1 || x[1] % l.group != 0 ||
        l.num_output % l.group != 0) {
        return std::nullopt;
    }
    // Caffe's output size; a pad that leaves nothing is no shape.
    const std::int64_t height = l.stride * (x[2] - 1) + l.kernel_size - 2 * std::int64_t{l.pad};
    const std::int64_t width = l.stride * (x[3] - 1) + l.kernel_size - 2 * std::int64_t{l.pad};
    if (height < 1 || width < 1 || height > INT_MAX || width > INT_MAX) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back({x[0], l.num_output, height, width});
    made.params.push_back({x[1], l.num_output / l.group, l.kernel_size, l.kernel_size});
    if (l.bias_term) {
        made.params.push_back({l.num_output});
    }
    return made;
}

} // namespace deconvolution_layer

LayerKind deconvolution() {
    return LayerKind{.type = "Deconvolution",
                     .has_params = true,
                     .fields = convolution_fields, // Caffe's: convolution_param
                     .check = convolution_check,
                     .plan = deconvolution_layer::plan,
                     .make = make_as<deconvolution_layer::DeconvolutionLayer>};
}

} // namespace dl::layers
