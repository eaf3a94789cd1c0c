// Concat along `axis`: every other axis must agree.

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {
namespace concat_layer {

class ConcatLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const std::vector<int>& first = bottom[0]->shape();
        const int axes = static_cast<int>(first.size());
        if (m_config.axis < 0 || m_config.axis >= axes) {
            fail(fmt::format("axis {} is not an axis of '{}' from layer '{}' ({})", m_config.axis,
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string()));
        }
        const auto axis = static_cast<std::size_t>(m_config.axis);
        for (std::size_t b = 1; b < bottom.size(); ++b) {
            const std::vector<int>& other = bottom[b]->shape();
            bool fits = other.size() == first.size();
            for (std::size_t a = 0; fits && a < first.size(); ++a) {
                fits = a == axis || other[a] == first[a];
            }
            if (!fits) {
                fail(fmt::format("'{}' from layer '{}' is {} but '{}' from layer '{}' is {}: "
                                 "only axis {} may differ",
                                 m_config.bottoms[b], producers[b], bottom[b]->shape_string(),
                                 m_config.bottoms[0], producers[0], bottom[0]->shape_string(),
                                 m_config.axis));
            }
        }
        m_rows = 1;
        for (std::size_t a = 0; a < axis; ++a) {
            m_rows *= first[a];
        }
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        const std::size_t top_row = top[0]->count() / static_cast<std::size_t>(m_rows);
        std::size_t offset = 0;
        for (const Tensor* b : bottom) {
            const std::size_t row = b->count() / static_cast<std::size_t>(m_rows);
            m_backend.copy_blocks(m_rows, row, b->data(), row, top[0]->data() + offset, top_row);
            offset += row;
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        const std::size_t top_row = top[0]->count() / static_cast<std::size_t>(m_rows);
        std::size_t offset = 0;
        for (std::size_t i = 0; i < bottom.size(); ++i) {
            const std::size_t row = bottom[i]->count() / static_cast<std::size_t>(m_rows);
            if (propagate_down[i]) {
                m_backend.copy_blocks(m_rows, row, top[0]->diff() + offset, top_row,
                                      bottom[i]->diff(), row);
            }
            offset += row;
        }
    }
    [[nodiscard]] std::size_t max_bottoms() const override { return 64; }

private:
    int m_rows = 1;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    // concat_dim: Caffe's name before axis.
    v.integer(field("axis", "concat_param").or_older("concat_param", "concat_dim"), l.axis);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.at_least("axis", l.axis, 0);
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    const auto axis = static_cast<std::size_t>(l.axis);
    if (l.axis < 0 || axis >= x.size()) {
        return std::nullopt;
    }
    Shape top = x;
    for (std::size_t b = 1; b < bottom.size(); ++b) {
        if (bottom[b]->size() != x.size()) {
            return std::nullopt;
        }
        top[axis] += (*bottom[b])[axis];
    }
    Planned made;
    made.tops.push_back(top);
    return made;
}

} // namespace concat_layer

LayerKind concat() {
    return LayerKind{.type = "Concat",
                     .fields = concat_layer::fields,
                     .check = concat_layer::check,
                     .plan = concat_layer::plan,
                     .make = make_as<concat_layer::ConcatLayer>};
}

} // namespace dl::layers
