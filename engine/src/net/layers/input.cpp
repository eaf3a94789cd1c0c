// Input: a top of the shape the layer gives (Caffe's input_param { shape { dim: ... } }), which
// whoever runs the net fills: a deploy net's batch of images. It reads nothing, and nothing flows
// back through it. A net whose only input it is has no Data layer, so `dltrain train` refuses it
// ("no Data layer in the train phase"); `dltrain check` shapes it.

#include "net/layer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dl::layers {
namespace input_layer {

class InputLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        shape_tops(bottom, top);
    }
    void forward(const Blobs& /*bottom*/, const Blobs& /*top*/) override {}
    void backward(const Blobs& /*top*/, const std::vector<bool>& /*propagate_down*/,
                  const Blobs& /*bottom*/) override {}
    [[nodiscard]] std::size_t min_bottoms() const override { return 0; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 0; }
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.integers(field("shape", "input_param").expecting("[batch, channels, height, width]"),
               l.shape);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    if (l.shape.empty() || l.shape.size() > 8 ||
        std::any_of(l.shape.begin(), l.shape.end(), [](int d) { return d < 1; })) {
        c.fail("shape", fmt::format("{} needs its top's shape, 1 to 8 sizes of at least 1 "
                                    "(input_param {{ shape {{ dim: 10 dim: 3 dim: 227 dim: 227 "
                                    "}} }})",
                                    c.where()));
    }
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& /*bottom*/) {
    Planned made;
    made.tops.emplace_back(l.shape.begin(), l.shape.end());
    return made;
}

} // namespace input_layer

LayerKind input() {
    return LayerKind{.type = "Input",
                     .no_bottoms = true,
                     .fields = input_layer::fields,
                     .check = input_layer::check,
                     .plan = input_layer::plan,
                     .make = make_as<input_layer::InputLayer>};
}

} // namespace dl::layers
