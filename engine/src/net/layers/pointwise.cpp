// AbsVal, BNLL, ELU and Power: Caffe's neuron layers whose gradient reads x (dl/backend.hpp:
// Pointwise), so none runs in place, unlike ReLU, Sigmoid and TanH (activation.cpp).

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {
namespace pointwise_layer {

class PointwiseLayer final : public Layer {
public:
    PointwiseLayer(const LayerConfig& config, Backend& backend, Pointwise f)
        : Layer(config, backend),
          m_f(f), m_params{config.alpha, config.power, config.scale, config.shift} {}
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.pointwise_forward(m_f, m_params, bottom[0]->count(), bottom[0]->data(),
                                    top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.pointwise_backward(m_f, m_params, top[0]->count(), bottom[0]->data(),
                                         top[0]->data(), top[0]->diff(), bottom[0]->diff());
        }
    }

private:
    Pointwise m_f;
    PointwiseParams m_params;
};

void no_fields(FieldVisitor& /*v*/, LayerConfig& /*l*/) {}

void elu_fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("alpha", "elu_param"), l.alpha);
}

void power_fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("power", "power_param"), l.power);
    v.number(field("scale", "power_param"), l.scale);
    v.number(field("shift", "power_param"), l.shift);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    if (l.type == "ELU") {
        c.finite("alpha", l.alpha);
        if (l.alpha < 0.0F) {
            c.fail("alpha", fmt::format("{}: alpha {} must be at least 0", c.where(), l.alpha));
        }
    }
    if (l.type == "Power") {
        c.finite("power", l.power);
        c.finite("scale", l.scale);
        c.finite("shift", l.shift);
    }
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back(*bottom[0]);
    return made;
}

template <Pointwise f> std::unique_ptr<Layer> make(const LayerConfig& config, Backend& backend) {
    return std::make_unique<PointwiseLayer>(config, backend, f);
}

LayerKind kind(const char* type, void (*fields)(FieldVisitor&, LayerConfig&),
               std::unique_ptr<Layer> (*made)(const LayerConfig&, Backend&)) {
    return LayerKind{.type = type, .fields = fields, .check = check, .plan = plan, .make = made};
}

} // namespace pointwise_layer

LayerKind absval() {
    return pointwise_layer::kind("AbsVal", pointwise_layer::no_fields,
                                 pointwise_layer::make<Pointwise::absval>);
}
LayerKind bnll() {
    return pointwise_layer::kind("BNLL", pointwise_layer::no_fields,
                                 pointwise_layer::make<Pointwise::bnll>);
}
LayerKind elu() {
    return pointwise_layer::kind("ELU", pointwise_layer::elu_fields,
                                 pointwise_layer::make<Pointwise::elu>);
}
LayerKind power() {
    return pointwise_layer::kind("Power", pointwise_layer::power_fields,
                                 pointwise_layer::make<Pointwise::power>);
}

} // namespace dl::layers
