// SoftmaxWithLoss: logits and labels -> mean cross-entropy, shape 1.

#include "net/layers/scores.hpp"

namespace dl::layers {
namespace softmax_loss_layer {

class SoftmaxWithLossLayer final : public ScoresAndLabelsLayer {
public:
    using ScoresAndLabelsLayer::ScoresAndLabelsLayer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        read_scores_and_labels(bottom, producers);
        m_prob = Tensor(bottom[0]->shape(), &m_backend);
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.softmax_loss_forward(m_rows, m_classes, bottom[0]->data(), bottom[1]->data(),
                                       m_prob.data(), top[0]->data());
    }
    void backward(const Blobs& /*top*/, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.softmax_loss_backward(m_rows, m_classes, m_prob.data(), bottom[1]->data(),
                                            m_config.loss_weight / static_cast<float>(m_rows),
                                            bottom[0]->diff());
        }
    }
    [[nodiscard]] bool is_loss() const override { return true; }

private:
    Tensor m_prob;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("loss_weight", ""), l.loss_weight);
    v.caffe_requires({"softmax_param", "axis"}, "1", "softmax axis {} (only 1)");
    v.caffe_ignores({"softmax_param", "engine"});
    // Without ignore_label, FULL, VALID and BATCH_SIZE are all the batch mean.
    v.caffe_refuses({"loss_param", "normalization"}, "NONE",
                    "loss normalization {} is not supported (the loss is the mean over the "
                    "batch)");
    v.caffe_refuses({"loss_param", "normalize"}, "false",
                    "loss normalize: {} is not supported (the loss is the mean over the batch)");
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.finite("loss_weight", l.loss_weight);
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back({1});
    made.buffer = count_of(*bottom[0]); // the probabilities, a Tensor with its gradient
    made.buffer_copies = 2;
    made.buffer_what = "probabilities";
    return made;
}

} // namespace softmax_loss_layer

LayerKind softmax_with_loss() {
    return LayerKind{.type = "SoftmaxWithLoss",
                     .role = LayerRole::loss,
                     .fields = softmax_loss_layer::fields,
                     .check = softmax_loss_layer::check,
                     .plan = softmax_loss_layer::plan,
                     .make = make_as<softmax_loss_layer::SoftmaxWithLossLayer>};
}

} // namespace dl::layers
