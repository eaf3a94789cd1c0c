// ReLU, Sigmoid, TanH: elementwise, in place allowed (their backward reads y, not x).

#include "net/layer.hpp"

namespace dl::layers {
namespace activation_layer {

class ActivationLayer final : public Layer {
public:
    ActivationLayer(const LayerConfig& config, Backend& backend, Activation kind)
        : Layer(config, backend), m_kind(kind) {}
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        shape_tops(bottom, top);
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

void relu_fields(FieldVisitor& v, LayerConfig& /*l*/) {
    v.caffe_requires({"relu_param", "negative_slope"}, "0",
                     "negative_slope {} (leaky ReLU) is not supported");
    v.caffe_ignores({"relu_param", "engine"});
}
void sigmoid_fields(FieldVisitor& v, LayerConfig& /*l*/) {
    v.caffe_ignores({"sigmoid_param", "engine"});
}
void tanh_fields(FieldVisitor& v, LayerConfig& /*l*/) {
    v.caffe_ignores({"tanh_param", "engine"});
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back(*bottom[0]);
    return made;
}

template <Activation function>
std::unique_ptr<Layer> make(const LayerConfig& config, Backend& backend) {
    return std::make_unique<ActivationLayer>(config, backend, function);
}

LayerKind kind(const char* type, void (*fields)(FieldVisitor&, LayerConfig&),
               std::unique_ptr<Layer> (*make)(const LayerConfig&, Backend&)) {
    return LayerKind{.type = type, .in_place = true, .fields = fields, .plan = plan, .make = make};
}

} // namespace activation_layer

LayerKind relu() {
    return activation_layer::kind("ReLU", activation_layer::relu_fields,
                                  activation_layer::make<Activation::relu>);
}
LayerKind sigmoid() {
    return activation_layer::kind("Sigmoid", activation_layer::sigmoid_fields,
                                  activation_layer::make<Activation::sigmoid>);
}
LayerKind hyperbolic_tangent() {
    return activation_layer::kind("TanH", activation_layer::tanh_fields,
                                  activation_layer::make<Activation::tanh>);
}

} // namespace dl::layers
