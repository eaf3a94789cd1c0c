// Flatten: the axes from `axis` through `end_axis` become one (Caffe's defaults 1 and -1:
// N x C x H x W -> N x CHW). The values do not move, so forward and backward are copies; not in
// place (Caffe's rule: its top shares the bottom's memory under another shape).

#include "net/layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace dl::layers {
namespace flatten_layer {

// The first and last axis flattened, counted from 0; nothing when they are not axes of `axes`
// or the last comes before the first.
std::optional<std::pair<std::size_t, std::size_t>> span(const LayerConfig& l, std::size_t axes) {
    const auto n = static_cast<long long>(axes);
    const long long first = l.axis < 0 ? l.axis + n : l.axis;
    const long long last = l.end_axis < 0 ? l.end_axis + n : l.end_axis;
    if (first < 0 || last >= n || first > last) {
        return std::nullopt;
    }
    return std::pair{static_cast<std::size_t>(first), static_cast<std::size_t>(last)};
}

class FlattenLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        if (!span(m_config, bottom[0]->shape().size())) {
            fail(fmt::format("axis {} through end_axis {} are not axes of '{}' from layer '{}' "
                             "({}), in that order",
                             m_config.axis, m_config.end_axis, m_config.bottoms[0], producers[0],
                             bottom[0]->shape_string()));
        }
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.copy(top[0]->data(), bottom[0]->data(), bottom[0]->count() * sizeof(float));
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (propagate_down[0]) {
            m_backend.copy(bottom[0]->diff(), top[0]->diff(), top[0]->count() * sizeof(float));
        }
    }
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.integer(field("axis", "flatten_param"), l.axis);
    v.integer(field("end_axis", "flatten_param"), l.end_axis);
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    const auto axes = span(l, x.size());
    if (!axes) {
        return std::nullopt;
    }
    Shape top(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(axes->first));
    const std::uint64_t merged =
        count_of(Shape(x.begin() + static_cast<std::ptrdiff_t>(axes->first),
                       x.begin() + static_cast<std::ptrdiff_t>(axes->second) + 1));
    top.push_back(static_cast<std::int64_t>(std::min<std::uint64_t>(merged, INT64_MAX)));
    top.insert(top.end(), x.begin() + static_cast<std::ptrdiff_t>(axes->second) + 1, x.end());
    Planned made;
    made.tops.push_back(top);
    return made;
}

} // namespace flatten_layer

LayerKind flatten() {
    return LayerKind{.type = "Flatten",
                     .fields = flatten_layer::fields,
                     .plan = flatten_layer::plan,
                     .make = make_as<flatten_layer::FlattenLayer>};
}

} // namespace dl::layers
