// LRN across channels (Caffe's ACROSS_CHANNELS region). Backward reads x and y, so it cannot
// run in place.

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {
namespace lrn_layer {

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
        const Planned planned = shape_tops(bottom, top);
        m_scale = Buffer(m_backend, planned.buffer * sizeof(float));
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

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "lrn_param";
    v.integer(field("local_size", m), l.local_size);
    v.number(field("alpha", m), l.alpha);
    v.number(field("beta", m), l.beta);
    v.number(field("k", m), l.k);
    v.caffe_requires({m, "norm_region"}, "ACROSS_CHANNELS", "norm_region {} is not supported");
    v.caffe_ignores({m, "engine"});
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.at_least("local_size", l.local_size, 1);
    c.finite("alpha", l.alpha);
    c.finite("beta", l.beta);
    c.finite("k", l.k);
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back(*bottom[0]);
    made.buffer = count_of(*bottom[0]);
    made.buffer_what = "LRN scale";
    return made;
}

} // namespace lrn_layer

LayerKind lrn() {
    return LayerKind{.type = "LRN",
                     .fields = lrn_layer::fields,
                     .check = lrn_layer::check,
                     .plan = lrn_layer::plan,
                     .make = make_as<lrn_layer::LrnLayer>};
}

} // namespace dl::layers
