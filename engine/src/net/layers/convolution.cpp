// Convolution: bottom N x C x H x W -> top N x M x OH x OW; weights M x C/group x K x K.

#include "net/layers/convolution_keys.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <climits>

namespace dl::layers {
namespace convolution_layer {

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
        shape_tops(bottom, top);
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

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() != 4 || l.kernel_size < 1 || l.stride < 1) {
        return std::nullopt;
    }
    const std::int64_t height = padded(l, x[2]);
    const std::int64_t width = padded(l, x[3]);
    if (height < l.kernel_size || width < l.kernel_size || l.group < 1 || x[1] % l.group != 0 ||
        l.num_output % l.group != 0) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back({x[0], l.num_output, (height - l.kernel_size) / l.stride + 1,
                         (width - l.kernel_size) / l.stride + 1});
    made.params.push_back({l.num_output, x[1] / l.group, l.kernel_size, l.kernel_size});
    if (l.bias_term) {
        made.params.push_back({l.num_output});
    }
    return made;
}

} // namespace convolution_layer

void convolution_fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "convolution_param";
    v.params(l.params, true);
    v.integer(field("num_output", m), l.num_output);
    v.flag(field("bias_term", m), l.bias_term);
    v.filler(field("weight_filler", m), l.weight_filler);
    v.filler(field("bias_filler", m), l.bias_filler);
    v.integer(field("kernel_size", m), l.kernel_size);
    v.integer(field("stride", m), l.stride);
    v.integer(field("pad", m), l.pad);
    v.integer(field("group", m), l.group);
    v.caffe_requires({m, "axis"}, "1", "axis {} (only 1)");
    v.caffe_ignores({m, "engine"});
}

void convolution_check(const LayerConfig& l, const LayerChecks& c) {
    c.required_at_least("num_output", l.num_output, 1);
    c.filler("weight_filler", l.weight_filler);
    c.filler("bias_filler", l.bias_filler);
    c.window();
    c.at_least("group", l.group, 1);
}

LayerKind convolution() {
    return LayerKind{.type = "Convolution",
                     .has_params = true,
                     .fields = convolution_fields,
                     .check = convolution_check,
                     .plan = convolution_layer::plan,
                     .make = make_as<convolution_layer::ConvolutionLayer>};
}

} // namespace dl::layers
