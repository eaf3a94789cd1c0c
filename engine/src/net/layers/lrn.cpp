// LRN across channels (Caffe's ACROSS_CHANNELS region) or within each channel (WITHIN_CHANNEL:
// a square of local_size x local_size pixels, as cifar10_full uses it). Backward reads x and y,
// so it cannot run in place.

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
        m_within = m_config.norm_region == "within_channel";
        // Caffe builds WITHIN_CHANNEL from an average pooling of x^2 over this window.
        m_square = PoolGeometry{.batch = bottom[0]->dim(0),
                                .channels = bottom[0]->dim(1),
                                .height = bottom[0]->dim(2),
                                .width = bottom[0]->dim(3),
                                .kernel = m_config.local_size,
                                .stride = 1,
                                .pad = (m_config.local_size - 1) / 2};
        const Planned planned = shape_tops(bottom, top);
        m_scale = Buffer(m_backend, planned.buffer * sizeof(float));
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        if (m_within) {
            m_backend.lrn_within_forward(m_square, m_params_lrn, bottom[0]->data(),
                                         m_scale.as<float>(), top[0]->data());
            return;
        }
        m_backend.lrn_forward(m_geometry, m_params_lrn, bottom[0]->data(), m_scale.as<float>(),
                              top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0] && m_within) {
            m_backend.lrn_within_backward(m_square, m_params_lrn, bottom[0]->data(), top[0]->data(),
                                          m_scale.as<float>(), top[0]->diff(), bottom[0]->diff());
        } else if (propagate_down[0]) {
            m_backend.lrn_backward(m_geometry, m_params_lrn, bottom[0]->data(), top[0]->data(),
                                   m_scale.as<float>(), top[0]->diff(), bottom[0]->diff());
        }
    }

private:
    ChannelGeometry m_geometry;
    LrnParams m_params_lrn;
    bool m_within = false;
    PoolGeometry m_square;
    Buffer m_scale;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "lrn_param";
    v.integer(field("local_size", m), l.local_size);
    v.number(field("alpha", m), l.alpha);
    v.number(field("beta", m), l.beta);
    v.number(field("k", m), l.k);
    v.text(field("norm_region", m), l.norm_region);
    v.caffe_ignores({m, "engine"});
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.at_least("local_size", l.local_size, 1);
    c.finite("alpha", l.alpha);
    c.finite("beta", l.beta);
    c.finite("k", l.k);
    c.choice("norm_region", l.norm_region, {"across_channels", "within_channel"});
    if (l.norm_region == "within_channel" && l.k != 1.0F) {
        c.fail("k", fmt::format("{}: k is not used by norm_region within_channel (Caffe's shift "
                                "there is 1): leave it out",
                                c.where()));
    }
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
