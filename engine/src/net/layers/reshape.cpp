// Reshape: the same values under another shape (Caffe's reshape_param): `shape`'s dims replace
// the bottom's axes from `axis` (0) over `num_axes` of them (-1: to the end); a dim of 0 copies
// the bottom's, one of -1 is inferred from the count. Forward and backward are copies, as
// Flatten's.

#include "net/layer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

namespace dl::layers {
namespace reshape_layer {

/// The top's shape, or why not.
struct Reshaped {
    Shape shape;
    std::string problem;
};

Reshaped reshaped(const LayerConfig& l, const Shape& x) {
    const auto axes = static_cast<std::int64_t>(x.size());
    // Caffe counts a negative axis from the end, -1 being "after the last axis".
    const std::int64_t start = l.reshape_axis < 0 ? l.reshape_axis + axes + 1 : l.reshape_axis;
    const std::int64_t end = l.num_axes < 0 ? axes : start + l.num_axes;
    if (start < 0 || start > axes || l.num_axes < -1 || end > axes) {
        return {{},
                fmt::format("axis {} and num_axes {} are not axes of the bottom", l.reshape_axis,
                            l.num_axes)};
    }
    Shape top(x.begin(), x.begin() + start);
    std::int64_t inferred = -1;
    for (std::size_t i = 0; i < l.shape.size(); ++i) {
        const int dim = l.shape[i];
        if (dim == 0) {
            const std::int64_t from = start + static_cast<std::int64_t>(i);
            if (from >= end) {
                return {{},
                        fmt::format("dim {} is 0 (copy the bottom's) but the bottom has no "
                                    "axis {} in the replaced range",
                                    i, from)};
            }
            top.push_back(x[static_cast<std::size_t>(from)]);
        } else if (dim == -1) {
            if (inferred >= 0) {
                return {{}, "more than one dim is -1"};
            }
            inferred = static_cast<std::int64_t>(top.size());
            top.push_back(1);
        } else {
            top.push_back(dim);
        }
    }
    top.insert(top.end(), x.begin() + end, x.end());
    const std::uint64_t count = count_of(x);
    std::uint64_t known = 1;
    for (std::size_t i = 0; i < top.size(); ++i) {
        if (static_cast<std::int64_t>(i) != inferred) {
            known *= static_cast<std::uint64_t>(top[i]);
        }
    }
    if (inferred >= 0) {
        if (known == 0 || count % known != 0) {
            return {{},
                    fmt::format("the -1 dim cannot be inferred: {} values are not a multiple "
                                "of {}",
                                count, known)};
        }
        top[static_cast<std::size_t>(inferred)] = static_cast<std::int64_t>(count / known);
    } else if (known != count) {
        return {
            {},
            fmt::format("{} values do not fill {} ({} values)", count, fmt::join(top, "x"), known)};
    }
    return {top, {}};
}

class ReshapeLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const std::vector<int>& dims = bottom[0]->shape();
        const Reshaped r = reshaped(m_config, Shape(dims.begin(), dims.end()));
        if (!r.problem.empty()) {
            fail(fmt::format("shape [{}] for '{}' from layer '{}' ({}): {}",
                             fmt::join(m_config.shape, ", "), m_config.bottoms[0], producers[0],
                             bottom[0]->shape_string(), r.problem));
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
    v.integers(
        field("shape", "reshape_param").expecting("a list of dims (0: the bottom's, -1: inferred)"),
        l.shape);
    v.integer(field("axis", "reshape_param"), l.reshape_axis);
    v.integer(field("num_axes", "reshape_param"), l.num_axes);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    if (l.shape.empty() || l.shape.size() > 8) {
        c.fail("shape", fmt::format("{} needs 'shape': 1 to 8 dims (reshape_param {{ shape {{ "
                                    "dim: 0 dim: -1 }} }})",
                                    c.where()));
    }
    for (const int dim : l.shape) {
        c.at_least("shape", dim, -1);
    }
    c.at_least("num_axes", l.num_axes, -1);
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    Reshaped r = reshaped(l, *bottom[0]);
    if (!r.problem.empty()) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back(std::move(r.shape));
    return made;
}

} // namespace reshape_layer

LayerKind reshape() {
    return LayerKind{.type = "Reshape",
                     .fields = reshape_layer::fields,
                     .check = reshape_layer::check,
                     .plan = reshape_layer::plan,
                     .make = make_as<reshape_layer::ReshapeLayer>};
}

} // namespace dl::layers
