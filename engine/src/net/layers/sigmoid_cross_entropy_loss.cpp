// SigmoidCrossEntropyLoss: logits and targets in [0, 1] of one count -> the logistic loss of
// every value, summed and divided by the batch (Caffe's default BATCH_SIZE normalization),
// shape 1. No gradient reaches the targets (Caffe refuses one).

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {
namespace sigmoid_cross_entropy_layer {

class SigmoidCrossEntropyLossLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        if (bottom[0]->count() != bottom[1]->count()) {
            fail(fmt::format("logits '{}' from layer '{}' are {} but targets '{}' from layer '{}' "
                             "are {}: one target per logit",
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string(),
                             m_config.bottoms[1], producers[1], bottom[1]->shape_string()));
        }
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.sigmoid_cross_entropy_forward(bottom[0]->dim(0), bottom[0]->count(),
                                                bottom[0]->data(), bottom[1]->data(),
                                                top[0]->data());
    }
    void backward(const Blobs& /*top*/, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.sigmoid_cross_entropy_backward(
                bottom[0]->count(), m_config.loss_weight / static_cast<float>(bottom[0]->dim(0)),
                bottom[0]->data(), bottom[1]->data(), bottom[0]->diff());
        }
    }
    [[nodiscard]] bool is_loss() const override { return true; }
    [[nodiscard]] std::size_t min_bottoms() const override { return 2; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 2; }
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("loss_weight", ""), l.loss_weight);
    v.caffe_requires({"loss_param", "normalization"}, "BATCH_SIZE",
                     "loss normalization {} is not supported here (the sum over the values is "
                     "divided by the batch size, Caffe's default for this loss)");
    v.caffe_requires({"loss_param", "normalize"}, "false",
                     "loss normalize: {} is not supported here (the sum over the values is "
                     "divided by the batch size, Caffe's default for this loss)");
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.finite("loss_weight", l.loss_weight);
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& /*b*/) {
    Planned made;
    made.tops.push_back({1});
    return made;
}

} // namespace sigmoid_cross_entropy_layer

LayerKind sigmoid_cross_entropy_loss() {
    return LayerKind{.type = "SigmoidCrossEntropyLoss",
                     .role = LayerRole::loss,
                     .fields = sigmoid_cross_entropy_layer::fields,
                     .check = sigmoid_cross_entropy_layer::check,
                     .plan = sigmoid_cross_entropy_layer::plan,
                     .make = make_as<sigmoid_cross_entropy_layer::SigmoidCrossEntropyLossLayer>};
}

} // namespace dl::layers
