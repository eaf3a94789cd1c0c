// Accuracy: fraction of rows whose label is among the top_k scores (ties count against).

#include "net/layers/scores.hpp"

namespace dl::layers {
namespace accuracy_layer {

class AccuracyLayer final : public ScoresAndLabelsLayer {
public:
    using ScoresAndLabelsLayer::ScoresAndLabelsLayer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        read_scores_and_labels(bottom, producers);
        if (m_config.top_k < 1 || m_config.top_k > m_classes) {
            fail(fmt::format("top_k {} is not between 1 and the {} classes of '{}' from layer '{}'",
                             m_config.top_k, m_classes, m_config.bottoms[0], producers[0]));
        }
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.accuracy(m_rows, m_classes, m_config.top_k, bottom[0]->data(), bottom[1]->data(),
                           top[0]->data());
    }
    void backward(const Blobs&, const std::vector<bool>&, const Blobs&) override {}
    [[nodiscard]] bool can_backward() const override { return false; }
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.integer(field("top_k", "accuracy_param"), l.top_k);
    v.caffe_requires({"accuracy_param", "axis"}, "1", "axis {} (only 1)");
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.at_least("top_k", l.top_k, 1);
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& /*x*/) {
    Planned made;
    made.tops.push_back({1});
    return made;
}

} // namespace accuracy_layer

LayerKind accuracy() {
    return LayerKind{.type = "Accuracy",
                     .role = LayerRole::metric,
                     .fields = accuracy_layer::fields,
                     .check = accuracy_layer::check,
                     .plan = accuracy_layer::plan,
                     .make = make_as<accuracy_layer::AccuracyLayer>};
}

} // namespace dl::layers
