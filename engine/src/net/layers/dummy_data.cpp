// DummyData: a top of the layer's `shape` filled by its `data_filler` (Caffe's pycaffe examples
// and tests use it for data from nowhere). The values are drawn once, when the net is built:
// Caffe draws a random filler's anew at every forward, which a recorded step (a CUDA graph)
// could not replay. No bottoms, nothing flows back.

#include "net/layer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dl::layers {
namespace dummy_data_layer {

class DummyDataLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        shape_tops(bottom, top);
        std::mt19937 fallback(m_config.line > 0 ? static_cast<unsigned>(m_config.line) : 1U);
        fill(m_config.data_filler, *top[0], m_rng != nullptr ? *m_rng : fallback);
    }
    void forward(const Blobs& /*bottom*/, const Blobs& /*top*/) override {}
    void backward(const Blobs& /*top*/, const std::vector<bool>& /*propagate_down*/,
                  const Blobs& /*bottom*/) override {}
    [[nodiscard]] bool can_backward() const override { return false; }
    [[nodiscard]] std::size_t min_bottoms() const override { return 0; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 0; }
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.integers(field("shape", "dummy_data_param").expecting("[dims...] of the top"), l.shape);
    v.filler(field("data_filler", "dummy_data_param"), l.data_filler);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    if (l.shape.empty() || l.shape.size() > 8 ||
        std::any_of(l.shape.begin(), l.shape.end(), [](int d) { return d < 1; })) {
        c.fail("shape", fmt::format("{} needs its top's shape, 1 to 8 sizes of at least 1 "
                                    "(dummy_data_param {{ shape {{ dim: 10 dim: 3 }} }})",
                                    c.where()));
    }
    c.filler("data_filler", l.data_filler);
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& /*bottom*/) {
    Planned made;
    made.tops.emplace_back(l.shape.begin(), l.shape.end());
    return made;
}

} // namespace dummy_data_layer

LayerKind dummy_data() {
    return LayerKind{.type = "DummyData",
                     .no_bottoms = true,
                     .fields = dummy_data_layer::fields,
                     .check = dummy_data_layer::check,
                     .plan = dummy_data_layer::plan,
                     .make = make_as<dummy_data_layer::DummyDataLayer>};
}

} // namespace dl::layers
