// Crop (Caffe's, the fully convolutional nets' alignment layer): bottom 0 cut to bottom 1's
// size along every axis from `axis` on (default 2: height and width), each window starting at
// its `offset` (one for all such axes, or one each; default 0); the axes before `axis` are kept
// whole. Forward and backward are block copies of the innermost axis, so the CPU and CUDA
// backends share them; no gradient reaches bottom 1, whose values are never read.

#include "net/layer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dl::layers {
namespace crop_layer {

/// Caffe's axis (negative counts from after the last), or -1 when outside `rank`.
int axis_of(const LayerConfig& l, std::size_t rank) {
    const int axis = l.axis < 0 ? l.axis + static_cast<int>(rank) : l.axis;
    return axis >= 0 && axis < static_cast<int>(rank) ? axis : -1;
}

/// Each axis's window start: 0 before `axis`, then the offsets; empty when they do not fit.
std::vector<std::int64_t> starts(const LayerConfig& l, const Shape& x, const Shape& like) {
    const int axis = axis_of(l, x.size());
    const std::size_t cropped = x.size() - static_cast<std::size_t>(std::max(axis, 0));
    if (axis < 0 || like.size() != x.size() ||
        (l.crop_offset.size() > 1 && l.crop_offset.size() != cropped)) {
        return {};
    }
    std::vector<std::int64_t> start(x.size(), 0);
    for (std::size_t a = static_cast<std::size_t>(axis); a < x.size(); ++a) {
        const std::size_t k = a - static_cast<std::size_t>(axis);
        start[a] = l.crop_offset.empty()       ? 0
                   : l.crop_offset.size() == 1 ? l.crop_offset[0]
                                               : l.crop_offset[k];
        if (start[a] + like[a] > x[a]) {
            return {};
        }
    }
    return start;
}

class CropLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const Shape x(bottom[0]->shape().begin(), bottom[0]->shape().end());
        const Shape like(bottom[1]->shape().begin(), bottom[1]->shape().end());
        m_start = starts(m_config, x, like);
        if (m_start.empty()) {
            fail(fmt::format("'{}' from layer '{}' ({}) cannot be cropped to '{}' from layer "
                             "'{}' ({}) from axis {} at offset {}: the same number of axes, "
                             "and every window inside the bottom",
                             m_config.bottoms[0], producers[0], bottom[0]->shape_string(),
                             m_config.bottoms[1], producers[1], bottom[1]->shape_string(),
                             m_config.axis, m_config.crop_offset));
        }
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        copy(*bottom[0], *top[0], false);
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        // The bottom's values outside the window get no gradient: those places are written by
        // no one and keep the zeros they were made with (one writer per gradient).
        if (propagate_down[0]) {
            copy(*bottom[0], *top[0], true);
        }
    }
    [[nodiscard]] bool backpropagates_to(std::size_t i) const override { return i == 0; }
    [[nodiscard]] std::size_t min_bottoms() const override { return 2; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 2; }

private:
    // The window's rows of the innermost axis, one block copy per index of the axes before the
    // last two (a 4-D crop of height and width: one per image and channel).
    void copy(Tensor& big, Tensor& small, bool gradient) {
        const std::vector<int>& from = big.shape();
        const std::vector<int>& to = small.shape();
        const std::size_t rank = from.size();
        if (rank == 1) {
            copy_rows(big, small, gradient, static_cast<std::size_t>(m_start[0]), 0, 1);
            return;
        }
        const std::size_t outer_axes = rank - 2;
        std::vector<int> index(outer_axes, 0);
        const auto rows = static_cast<std::size_t>(to[rank - 2]);
        while (true) {
            std::size_t big_at = 0;
            std::size_t small_at = 0;
            for (std::size_t a = 0; a < outer_axes; ++a) {
                big_at = big_at * static_cast<std::size_t>(from[a]) +
                         static_cast<std::size_t>(index[a] + m_start[a]);
                small_at =
                    small_at * static_cast<std::size_t>(to[a]) + static_cast<std::size_t>(index[a]);
            }
            big_at = (big_at * static_cast<std::size_t>(from[rank - 2]) +
                      static_cast<std::size_t>(m_start[rank - 2])) *
                         static_cast<std::size_t>(from[rank - 1]) +
                     static_cast<std::size_t>(m_start[rank - 1]);
            small_at *= rows * static_cast<std::size_t>(to[rank - 1]);
            copy_rows(big, small, gradient, big_at, small_at, static_cast<int>(rows));
            std::size_t a = outer_axes;
            while (a > 0 && ++index[a - 1] == to[a - 1]) {
                index[--a] = 0;
            }
            if (a == 0) {
                return;
            }
        }
    }
    void copy_rows(Tensor& big, Tensor& small, bool gradient, std::size_t big_at,
                   std::size_t small_at, int rows) {
        const auto width = static_cast<std::size_t>(small.shape().back());
        const auto big_width = static_cast<std::size_t>(big.shape().back());
        if (gradient) {
            m_backend.copy_blocks(rows, width, small.diff() + small_at, width, big.diff() + big_at,
                                  big_width);
        } else {
            m_backend.copy_blocks(rows, width, big.data() + big_at, big_width,
                                  small.data() + small_at, width);
        }
    }

    std::vector<std::int64_t> m_start;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    v.integer(field("axis", "crop_param"), l.axis);
    v.integers(field("offset", "crop_param")
                   .when_set()
                   .expecting("a list of window starts: one for every cropped axis, or one each"),
               l.crop_offset);
}

void check(const LayerConfig& l, const LayerChecks& c) {
    for (const int offset : l.crop_offset) {
        c.at_least("offset", offset, 0);
    }
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    const Shape& like = *bottom[1];
    if (starts(l, x, like).empty()) {
        return std::nullopt;
    }
    Planned made;
    Shape top = x;
    for (std::size_t a = static_cast<std::size_t>(axis_of(l, x.size())); a < x.size(); ++a) {
        top[a] = like[a];
    }
    made.tops.push_back(top);
    return made;
}

void defaults(LayerConfig& l) {
    l.axis = 2; // Caffe's CropParameter default: height and width of N x C x H x W
}

} // namespace crop_layer

LayerKind crop() {
    return LayerKind{.type = "Crop",
                     .fields = crop_layer::fields,
                     .check = crop_layer::check,
                     .plan = crop_layer::plan,
                     .make = make_as<crop_layer::CropLayer>,
                     .defaults = crop_layer::defaults};
}

} // namespace dl::layers
