// Slice: one bottom cut along `axis` into as many tops as the layer has, at `slice_point`s (or
// in equal parts without them): Concat's inverse. Forward and backward are block copies, so the
// CPU and CUDA backends share them.

#include "net/layer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

namespace dl::layers {
namespace slice_layer {

// Each top's size along the axis; empty when the points or parts do not fit `extent`.
std::vector<std::int64_t> parts(const LayerConfig& l, std::int64_t extent, std::size_t tops) {
    std::vector<std::int64_t> sizes;
    if (l.slice_point.empty()) {
        if (tops == 0 || extent % static_cast<std::int64_t>(tops) != 0) {
            return {};
        }
        sizes.assign(tops, extent / static_cast<std::int64_t>(tops));
        return sizes;
    }
    if (l.slice_point.size() + 1 != tops) {
        return {};
    }
    std::int64_t previous = 0;
    for (const int point : l.slice_point) {
        if (point <= previous || point >= extent) {
            return {};
        }
        sizes.push_back(point - previous);
        previous = point;
    }
    sizes.push_back(extent - previous);
    return sizes;
}

class SliceLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const std::vector<int>& shape = bottom[0]->shape();
        if (m_config.axis < 0 || m_config.axis >= static_cast<int>(shape.size())) {
            fail(fmt::format("axis {} is not an axis of '{}' from layer '{}' ({})", m_config.axis,
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string()));
        }
        const int extent = shape[static_cast<std::size_t>(m_config.axis)];
        if (parts(m_config, extent, top.size()).empty()) {
            fail(m_config.slice_point.empty()
                     ? fmt::format("'{}' from layer '{}' ({}) has {} along axis {}, not a multiple "
                                   "of its {} tops: give slice_point",
                                   m_config.bottoms[0], producers[0], bottom[0]->shape_string(),
                                   extent, m_config.axis, top.size())
                     : fmt::format("slice_point {} does not cut {} along axis {} into {} tops "
                                   "(one point fewer than tops, rising, inside the axis)",
                                   m_config.slice_point, extent, m_config.axis, top.size()));
        }
        m_rows = 1;
        for (int a = 0; a < m_config.axis; ++a) {
            m_rows *= shape[static_cast<std::size_t>(a)];
        }
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        const std::size_t bottom_row = bottom[0]->count() / static_cast<std::size_t>(m_rows);
        std::size_t offset = 0;
        for (Tensor* t : top) {
            const std::size_t row = t->count() / static_cast<std::size_t>(m_rows);
            m_backend.copy_blocks(m_rows, row, bottom[0]->data() + offset, bottom_row, t->data(),
                                  row);
            offset += row;
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (!propagate_down[0]) {
            return;
        }
        // Every value of the bottom is in exactly one top: the copies fill its gradient (a top
        // nothing reads keeps the zeros it was made with).
        const std::size_t bottom_row = bottom[0]->count() / static_cast<std::size_t>(m_rows);
        std::size_t offset = 0;
        for (const Tensor* t : top) {
            const std::size_t row = t->count() / static_cast<std::size_t>(m_rows);
            m_backend.copy_blocks(m_rows, row, t->diff(), row, bottom[0]->diff() + offset,
                                  bottom_row);
            offset += row;
        }
    }
    [[nodiscard]] std::size_t top_count() const override {
        return std::max<std::size_t>(m_config.tops.size(), 1);
    }

private:
    int m_rows = 1;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    // slice_dim: Caffe's name before axis.
    v.integer(field("axis", "slice_param").or_older("slice_param", "slice_dim"), l.axis);
    v.integers(field("slice_point", "slice_param")
                   .when_set()
                   .expecting("a list of positions along the axis, one fewer than the tops"),
               l.slice_point);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.at_least("axis", l.axis, 0);
    for (const int point : l.slice_point) {
        c.at_least("slice_point", point, 1);
    }
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (l.axis < 0 || static_cast<std::size_t>(l.axis) >= x.size()) {
        return std::nullopt;
    }
    const auto axis = static_cast<std::size_t>(l.axis);
    const auto sizes = parts(l, x[axis], std::max<std::size_t>(l.tops.size(), 1));
    if (sizes.empty()) {
        return std::nullopt;
    }
    Planned made;
    for (const std::int64_t size : sizes) {
        Shape top = x;
        top[axis] = size;
        made.tops.push_back(top);
    }
    return made;
}

} // namespace slice_layer

LayerKind slice() {
    return LayerKind{.type = "Slice",
                     .fields = slice_layer::fields,
                     .check = slice_layer::check,
                     .plan = slice_layer::plan,
                     .make = make_as<slice_layer::SliceLayer>};
}

} // namespace dl::layers
