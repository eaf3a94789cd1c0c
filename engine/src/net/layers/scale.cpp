// Scale: y = x * gamma[c] (+ beta[c]), one gamma per channel of axis 1 (Caffe's default axis
// and num_axes; a second bottom as the scale is not supported).

#include "net/layer.hpp"

namespace dl::layers {
namespace scale_layer {

class ScaleLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        require_channels(*bottom[0], producers[0]);
        m_geometry = channels_of(*bottom[0]);
        shape_tops(bottom, top);
        m_x.setup(m_backend, bottom[0], top[0]);
    }
    [[nodiscard]] FillerConfig param_filler(std::size_t i) const override {
        return i == 0 ? m_config.filler : m_config.bias_filler;
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_x.save(m_backend, *bottom[0]);
        m_backend.scale_forward(m_geometry, bottom[0]->data(), m_params[0]->data(),
                                m_config.bias_term ? m_params[1]->data() : nullptr, top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        m_backend.scale_backward(m_geometry, m_x.of(*bottom[0]), m_params[0]->data(),
                                 top[0]->diff(), propagate_down[0] ? bottom[0]->diff() : nullptr,
                                 m_params[0]->diff(),
                                 m_config.bias_term ? m_params[1]->diff() : nullptr);
    }

private:
    ChannelGeometry m_geometry;
    InPlaceCopy m_x; // dgamma reads x
};

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "scale_param";
    v.params(l.params, false);
    v.flag(field("bias_term", m), l.bias_term);
    // Caffe's Scale without a filler starts at 1, not at FillerParameter's constant 0.
    v.filler(field("filler", m).keeping_default(), l.filler);
    v.filler(field("bias_filler", m), l.bias_filler);
    v.caffe_requires({m, "axis"}, "1", "axis {} (only 1)");
    v.caffe_requires({m, "num_axes"}, "1", "num_axes {} (only 1)");
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.filler("filler", l.filler);
    c.filler("bias_filler", l.bias_filler);
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() < 2) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back(x);
    made.params.push_back({x[1]});
    if (l.bias_term) {
        made.params.push_back({x[1]});
    }
    made.buffer = count_of(x); // the copy an in-place layer keeps for backward
    made.buffer_what = "saved input";
    return made;
}

void defaults(LayerConfig& l) {
    l.bias_term = false; // Caffe's ScaleParameter default
}

} // namespace scale_layer

LayerKind scale() {
    return LayerKind{.type = "Scale",
                     .in_place = true,
                     .has_params = true,
                     .fields = scale_layer::fields,
                     .check = scale_layer::check,
                     .plan = scale_layer::plan,
                     .make = make_as<scale_layer::ScaleLayer>,
                     .defaults = scale_layer::defaults};
}

} // namespace dl::layers
