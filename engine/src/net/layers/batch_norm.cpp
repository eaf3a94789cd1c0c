// BatchNorm (Caffe's: no scale and shift of its own, a Scale layer follows). Its three
// parameters are the running mean sum, variance sum and their factor, which the solver leaves
// alone; the test net reads the train net's.

#include "net/layer.hpp"

#include <fmt/format.h>

#include <cmath>

namespace dl::layers {
namespace batch_norm_layer {

class BatchNormLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        require_channels(*bottom[0], producers[0]);
        m_geometry = channels_of(*bottom[0]);
        m_use_global = m_config.use_global_stats.value_or(m_phase == Phase::test);
        shape_tops(bottom, top);
        m_y.setup(m_backend, bottom[0], top[0]);
        m_inv_std =
            Buffer(m_backend, static_cast<std::size_t>(m_geometry.channels) * sizeof(float));
    }
    [[nodiscard]] FillerConfig param_filler(std::size_t /*i*/) const override {
        return FillerConfig{"constant", 0.0F};
    }
    [[nodiscard]] bool learnable(std::size_t /*i*/) const override { return false; }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.batch_norm_forward(m_geometry, m_use_global, m_config.eps,
                                     m_config.moving_average_fraction, bottom[0]->data(),
                                     m_params[0]->data(), m_params[1]->data(), m_params[2]->data(),
                                     m_inv_std.as<float>(), top[0]->data());
        m_y.save(m_backend, *top[0]);
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.batch_norm_backward(m_geometry, m_use_global, m_y.of(*top[0]),
                                          m_inv_std.as<float>(), top[0]->diff(), bottom[0]->diff());
        }
    }

private:
    ChannelGeometry m_geometry;
    bool m_use_global = false;
    Buffer m_inv_std;
    InPlaceCopy m_y; // backward reads y, which the Scale after it overwrites in place
};

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "batch_norm_param";
    v.flag(field("use_global_stats", m).when_set(), l.use_global_stats);
    v.number(field("moving_average_fraction", m), l.moving_average_fraction);
    v.number(field("eps", m), l.eps);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    for (const ParamSpec& spec : l.params) {
        if (spec.lr_mult != 0.0F) {
            // Its parameters are running statistics, never learned (Caffe forces lr_mult 0).
            c.fail("param", fmt::format("key 'param' in {}: BatchNorm's parameters are its "
                                        "running statistics and take no lr_mult but 0",
                                        c.where()));
        }
    }
    if (!(std::isfinite(l.eps) && l.eps > 0.0F)) {
        c.fail("eps", fmt::format("key 'eps' in {} must be > 0 (got {})", c.where(), l.eps));
    }
    if (!(l.moving_average_fraction >= 0.0F && l.moving_average_fraction <= 1.0F)) {
        c.fail("moving_average_fraction",
               fmt::format("key 'moving_average_fraction' in {} must be in [0, 1] (got {})",
                           c.where(), l.moving_average_fraction));
    }
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() < 2) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back(x);
    made.params = {{x[1]}, {x[1]}, {1}};
    made.buffer = count_of(x); // the copy an in-place layer keeps for backward
    made.buffer_what = "saved input";
    return made;
}

void from_caffe(LayerConfig& l) {
    // Caffe sets these parameters' lr_mult to 0 itself; old prototxts say so explicitly.
    for (auto& spec : l.params) {
        spec.lr_mult = 0.0F;
        spec.decay_mult = 0.0F;
    }
}

} // namespace batch_norm_layer

LayerKind batch_norm() {
    return LayerKind{.type = "BatchNorm",
                     .in_place = true,
                     .has_params = true,
                     .fields = batch_norm_layer::fields,
                     .check = batch_norm_layer::check,
                     .plan = batch_norm_layer::plan,
                     .make = make_as<batch_norm_layer::BatchNormLayer>,
                     .from_caffe = batch_norm_layer::from_caffe};
}

} // namespace dl::layers
