// ContrastiveLoss (Caffe's, for siamese nets): two feature bottoms of N x D and a similarity of
// N (non-zero: the pair is alike). Alike pairs are pulled together by their squared distance,
// others pushed apart until `margin`; the loss is the sum over pairs / (2 N). The gradient flows
// to both features (a's with +, b's with -), never to the similarity.

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {
namespace contrastive_loss_layer {

class ContrastiveLossLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        if (bottom[0]->shape() != bottom[1]->shape()) {
            fail(fmt::format("'{}' from layer '{}' is {} but '{}' from layer '{}' is {}: the two "
                             "features of a pair must have one shape",
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string(),
                             m_config.bottoms[1], producers[1], bottom[1]->shape_string()));
        }
        if (bottom[2]->count() != static_cast<std::size_t>(bottom[0]->dim(0))) {
            fail(fmt::format("the similarity '{}' from layer '{}' is {}: one value per pair ({}) "
                             "is expected",
                             m_config.bottoms[2], producers[2], bottom[2]->shape_string(),
                             bottom[0]->dim(0)));
        }
        m_diff = Buffer(m_backend, bottom[0]->count() * sizeof(float));
        m_dist_sq = Buffer(m_backend, static_cast<std::size_t>(bottom[0]->dim(0)) * sizeof(float));
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.contrastive_loss_forward(rows(bottom), dim(bottom), m_config.margin,
                                           m_config.legacy_version, bottom[0]->data(),
                                           bottom[1]->data(), bottom[2]->data(), m_diff.as<float>(),
                                           m_dist_sq.as<float>(), top[0]->data());
    }
    void backward(const Blobs& /*top*/, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        const float scale = m_config.loss_weight / static_cast<float>(rows(bottom));
        for (std::size_t i = 0; i < 2; ++i) {
            if (propagate_down[i]) {
                m_backend.contrastive_loss_backward(
                    rows(bottom), dim(bottom), m_config.margin, m_config.legacy_version,
                    i == 0 ? scale : -scale, bottom[2]->data(), m_diff.as<float>(),
                    m_dist_sq.as<float>(), bottom[i]->diff());
            }
        }
    }
    [[nodiscard]] bool is_loss() const override { return true; }
    [[nodiscard]] bool backpropagates_to(std::size_t i) const override { return i < 2; }
    [[nodiscard]] std::size_t min_bottoms() const override { return 3; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 3; }

private:
    static int rows(const Blobs& bottom) { return bottom[0]->dim(0); }
    static int dim(const Blobs& bottom) { return static_cast<int>(bottom[0]->inner()); }
    Buffer m_diff;
    Buffer m_dist_sq;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("margin", "contrastive_loss_param"), l.margin);
    v.flag(field("legacy_version", "contrastive_loss_param"), l.legacy_version);
    v.number(field("loss_weight", ""), l.loss_weight);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.finite("margin", l.margin);
    c.finite("loss_weight", l.loss_weight);
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back({1});
    made.buffer = count_of(*bottom[0]) + static_cast<std::uint64_t>((*bottom[0])[0]);
    made.buffer_what = "differences and distances";
    return made;
}

} // namespace contrastive_loss_layer

LayerKind contrastive_loss() {
    return LayerKind{.type = "ContrastiveLoss",
                     .role = LayerRole::loss,
                     .fields = contrastive_loss_layer::fields,
                     .check = contrastive_loss_layer::check,
                     .plan = contrastive_loss_layer::plan,
                     .make = make_as<contrastive_loss_layer::ContrastiveLossLayer>};
}

} // namespace dl::layers
