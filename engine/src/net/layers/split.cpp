// Split: one bottom to N tops, the same values in each; backward sums the tops' gradients. The
// net inserts one where a blob feeds several layers that backpropagate (net/splits.cpp, Caffe's
// InsertSplits), so each writes a gradient of its own and the sum is the blob's; a prototxt may
// also name one.

#include "net/layer.hpp"

namespace dl::layers {
namespace split_layer {

class SplitLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        shape_tops(bottom, top);
        m_ones.assign(top.size(), 1.0F);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        for (Tensor* t : top) {
            m_backend.copy(t->data(), bottom[0]->data(), bottom[0]->count() * sizeof(float));
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (!propagate_down[0]) {
            return;
        }
        // A top whose reader does not backpropagate keeps the zeros it was made with.
        std::vector<const float*> diffs;
        diffs.reserve(top.size());
        for (const Tensor* t : top) {
            diffs.push_back(t->diff());
        }
        m_backend.eltwise_forward(EltwiseOp::sum, bottom[0]->count(), diffs, m_ones,
                                  bottom[0]->diff(), nullptr);
    }
    [[nodiscard]] std::size_t top_count() const override {
        return std::max<std::size_t>(m_config.tops.size(), 1);
    }

private:
    std::vector<float> m_ones;
};

void fields(FieldVisitor& /*v*/, LayerConfig& /*l*/) {}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.assign(std::max<std::size_t>(l.tops.size(), 1), *bottom[0]);
    return made;
}

} // namespace split_layer

LayerKind split() {
    return LayerKind{.type = "Split",
                     .fields = split_layer::fields,
                     .plan = split_layer::plan,
                     .make = make_as<split_layer::SplitLayer>};
}

} // namespace dl::layers
