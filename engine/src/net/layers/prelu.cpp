// PReLU (Caffe's, He et al. 2015): y = max(x, 0) + a_c * min(x, 0) with a learnt slope a_c per
// channel (one for all with channel_shared), starting at 0.25. In place as Caffe allows it: the
// layer then keeps a copy of its input for the backward pass, as Scale does.

#include "net/layer.hpp"

namespace dl::layers {
namespace prelu_layer {

class PReluLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        require_channels(*bottom[0], producers[0]);
        m_geometry = channels_of(*bottom[0]);
        shape_tops(bottom, top);
        m_x.setup(m_backend, bottom[0], top[0]);
    }
    [[nodiscard]] FillerConfig param_filler(std::size_t /*i*/) const override {
        return m_config.slope_filler;
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_x.save(m_backend, *bottom[0]);
        m_backend.prelu_forward(m_geometry, m_config.channel_shared, bottom[0]->data(),
                                m_params[0]->data(), top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        m_backend.prelu_backward(
            m_geometry, m_config.channel_shared, m_x.of(*bottom[0]), m_params[0]->data(),
            top[0]->diff(), propagate_down[0] ? bottom[0]->diff() : nullptr, m_params[0]->diff());
    }

private:
    ChannelGeometry m_geometry;
    InPlaceCopy m_x; // backward reads x
};

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "prelu_param";
    v.params(l.params, false);
    v.filler(field("filler", m).keeping_default(), l.slope_filler);
    v.flag(field("channel_shared", m), l.channel_shared);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.filler("filler", l.slope_filler);
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() < 2) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back(x);
    made.params.push_back({l.channel_shared ? 1 : x[1]});
    made.buffer = count_of(x); // the copy an in-place layer keeps for backward
    made.buffer_what = "saved input";
    return made;
}

} // namespace prelu_layer

LayerKind prelu() {
    return LayerKind{.type = "PReLU",
                     .in_place = true,
                     .has_params = true,
                     .fields = prelu_layer::fields,
                     .check = prelu_layer::check,
                     .plan = prelu_layer::plan,
                     .make = make_as<prelu_layer::PReluLayer>};
}

} // namespace dl::layers
