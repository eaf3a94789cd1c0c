// Dropout: in training, keeps each value with probability 1 - ratio and scales by 1/(1 - ratio);
// identity in the test net (Caffe's convention).

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {
namespace dropout_layer {

class DropoutLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        const Planned planned = shape_tops(bottom, top);
        m_count = bottom[0]->count();
        m_mask = Buffer(m_backend, planned.buffer * sizeof(float));
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        const bool train = m_phase == Phase::train;
        if (train) {
            m_backend.dropout_mask(m_count, m_config.dropout_ratio, *m_rng, m_mask.as<float>());
        }
        const float scale = train ? 1.0F / (1.0F - m_config.dropout_ratio) : 1.0F;
        if (train || top[0] != bottom[0]) {
            m_backend.masked_scale(m_count, bottom[0]->data(), train ? m_mask.as<float>() : nullptr,
                                   scale, top[0]->data());
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.masked_scale(m_count, top[0]->diff(), m_mask.as<float>(),
                                   1.0F / (1.0F - m_config.dropout_ratio), bottom[0]->diff());
        }
    }

private:
    std::size_t m_count = 0;
    Buffer m_mask; // 0/1 per value, in backend memory
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.number(field("dropout_ratio", "dropout_param"), l.dropout_ratio);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    if (!(l.dropout_ratio >= 0.0F && l.dropout_ratio < 1.0F)) {
        c.fail("dropout_ratio", fmt::format("key 'dropout_ratio' in {} must be in [0, 1) (got {})",
                                            c.where(), l.dropout_ratio));
    }
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back(*bottom[0]);
    made.buffer = count_of(*bottom[0]);
    made.buffer_what = "dropout mask";
    return made;
}

} // namespace dropout_layer

LayerKind dropout() {
    return LayerKind{.type = "Dropout",
                     .in_place = true,
                     .fields = dropout_layer::fields,
                     .check = dropout_layer::check,
                     .plan = dropout_layer::plan,
                     .make = make_as<dropout_layer::DropoutLayer>};
}

} // namespace dl::layers
