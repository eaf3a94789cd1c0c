// EuclideanLoss: sum((a - b)^2) / (2 N) over two bottoms of one count per image, shape 1; the
// gradient flows to both sides (Caffe's rule), a's with +, b's with -.

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {
namespace euclidean_loss_layer {

class EuclideanLossLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        if (bottom[0]->count() != bottom[1]->count() || bottom[0]->dim(0) != bottom[1]->dim(0)) {
            fail(fmt::format("'{}' from layer '{}' is {} but '{}' from layer '{}' is {}: the two "
                             "sides must have the same images and values per image",
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string(),
                             m_config.bottoms[1], producers[1], bottom[1]->shape_string()));
        }
        m_diff = Buffer(m_backend, bottom[0]->count() * sizeof(float));
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.euclidean_loss_forward(bottom[0]->dim(0), bottom[0]->count(), bottom[0]->data(),
                                         bottom[1]->data(), m_diff.as<float>(), top[0]->data());
    }
    void backward(const Blobs& /*top*/, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        const float scale = m_config.loss_weight / static_cast<float>(bottom[0]->dim(0));
        for (std::size_t i = 0; i < 2; ++i) {
            if (propagate_down[i]) {
                m_backend.scaled_copy(bottom[i]->count(), i == 0 ? scale : -scale,
                                      m_diff.as<float>(), bottom[i]->diff());
            }
        }
    }
    [[nodiscard]] bool is_loss() const override { return true; }
    [[nodiscard]] bool backpropagates_to(std::size_t /*i*/) const override { return true; }
    [[nodiscard]] std::size_t min_bottoms() const override { return 2; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 2; }

private:
    Buffer m_diff;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("loss_weight", ""), l.loss_weight);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.finite("loss_weight", l.loss_weight);
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back({1});
    made.buffer = count_of(*bottom[0]);
    made.buffer_what = "differences";
    return made;
}

} // namespace euclidean_loss_layer

LayerKind euclidean_loss() {
    return LayerKind{.type = "EuclideanLoss",
                     .role = LayerRole::loss,
                     .fields = euclidean_loss_layer::fields,
                     .check = euclidean_loss_layer::check,
                     .plan = euclidean_loss_layer::plan,
                     .make = make_as<euclidean_loss_layer::EuclideanLossLayer>};
}

} // namespace dl::layers
