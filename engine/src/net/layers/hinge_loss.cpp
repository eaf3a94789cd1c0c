// HingeLoss (Caffe's one-vs-all hinge, an SVM's objective): scores N x classes and N labels;
// every score is pushed below -1 and the label's above 1, the loss the sum of the hinges (L1) or
// of their squares (L2) over the batch, divided by N.

#include "net/layers/scores.hpp"

namespace dl::layers {
namespace hinge_loss_layer {

class HingeLossLayer final : public ScoresAndLabelsLayer {
public:
    using ScoresAndLabelsLayer::ScoresAndLabelsLayer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        read_scores_and_labels(bottom, producers);
        m_diff = Buffer(m_backend, bottom[0]->count() * sizeof(float));
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.hinge_loss_forward(m_rows, m_classes, m_config.norm == "l2", bottom[0]->data(),
                                     bottom[1]->data(), m_diff.as<float>(), top[0]->data());
    }
    void backward(const Blobs& /*top*/, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.hinge_loss_backward(m_rows, m_classes, m_config.norm == "l2",
                                          m_config.loss_weight / static_cast<float>(m_rows),
                                          bottom[1]->data(), m_diff.as<float>(), bottom[0]->diff());
        }
    }
    [[nodiscard]] bool is_loss() const override { return true; }

private:
    Buffer m_diff;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.text(field("norm", "hinge_loss_param"), l.norm);
    v.number(field("loss_weight", ""), l.loss_weight);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.choice("norm", l.norm, {"l1", "l2"});
    c.finite("loss_weight", l.loss_weight);
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back({1});
    made.buffer = count_of(*bottom[0]);
    made.buffer_what = "hinges";
    return made;
}

} // namespace hinge_loss_layer

LayerKind hinge_loss() {
    return LayerKind{.type = "HingeLoss",
                     .role = LayerRole::loss,
                     .fields = hinge_loss_layer::fields,
                     .check = hinge_loss_layer::check,
                     .plan = hinge_loss_layer::plan,
                     .make = make_as<hinge_loss_layer::HingeLossLayer>};
}

} // namespace dl::layers
