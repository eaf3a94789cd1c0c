// What every layer shares: messages, the images check, shaping by the kind's rule, fillers.

#include "net/layer.hpp"

#include "net/caffe_random.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

namespace dl {

void Layer::fail(const std::string& message) const {
    throw Error(ErrorKind::config,
                fmt::format("layer '{}' ({}): {}", m_config.name, m_config.type, message));
}

void Layer::require_images(const Tensor& bottom, const std::string& producer) const {
    if (bottom.shape().size() != 4) {
        fail(fmt::format("needs a 4-D bottom (N x C x H x W) but '{}' from layer '{}' is {}",
                         m_config.bottoms[0], producer, bottom.shape_string()));
    }
}

void Layer::require_channels(const Tensor& bottom, const std::string& producer) const {
    if (bottom.shape().size() < 2) {
        fail(
            fmt::format("needs a bottom with channels (N x C x ...) but '{}' from layer '{}' is {}",
                        m_config.bottoms[0], producer, bottom.shape_string()));
    }
}

Planned Layer::shape_tops(const Blobs& bottom, const Blobs& top) {
    std::vector<Shape> shapes;
    shapes.reserve(bottom.size());
    for (const Tensor* b : bottom) {
        shapes.emplace_back(b->shape().begin(), b->shape().end());
    }
    std::vector<const Shape*> pointers;
    pointers.reserve(shapes.size());
    for (const Shape& shape : shapes) {
        pointers.push_back(&shape);
    }
    std::optional<Planned> planned = layer_kind(m_config.type).plan(m_config, pointers);
    if (!planned || planned->tops.size() != top.size()) {
        fail("its bottoms do not fit its shape rule"); // setup's checks name the reason first
    }
    const auto to_int = [&](const Shape& shape) {
        std::vector<int> dims;
        dims.reserve(shape.size());
        for (const std::int64_t dim : shape) {
            if (dim < 0 || dim > INT_MAX) {
                fail(fmt::format("a dimension of {} is beyond 2^31 - 1", dim));
            }
            dims.push_back(static_cast<int>(dim));
        }
        return dims;
    };
    for (std::size_t i = 0; i < top.size(); ++i) {
        if (std::find(bottom.begin(), bottom.end(), top[i]) == bottom.end()) {
            top[i]->reshape(to_int(planned->tops[i]));
        }
    }
    m_param_shapes.clear();
    for (const Shape& shape : planned->params) {
        m_param_shapes.push_back(to_int(shape));
    }
    return *planned;
}

std::uint64_t count_of(const Shape& shape) {
    std::uint64_t count = 1;
    for (const std::int64_t dim : shape) {
        if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(dim), &count)) {
            return std::numeric_limits<std::uint64_t>::max();
        }
    }
    return count;
}

std::string shape_text(const Shape& shape) {
    return fmt::format("{}", fmt::join(shape, "x"));
}

std::int64_t padded(const LayerConfig& layer, std::int64_t size) {
    const std::int64_t value = size + 2 * static_cast<std::int64_t>(layer.pad);
    if (value > INT_MAX) {
        throw Error(ErrorKind::config,
                    fmt::format("pad {} makes the {}-pixel input {} pixels, beyond 2^31 - 1",
                                layer.pad, size, value));
    }
    return value;
}

ChannelGeometry channels_of(const Tensor& x) {
    return ChannelGeometry{x.dim(0), x.dim(1),
                           x.dim(1) == 0 ? 0 : static_cast<int>(x.inner() / x.dim(1))};
}

void fill(const FillerConfig& filler, Tensor& tensor, std::mt19937& rng) {
    const std::size_t count = tensor.count();
    std::vector<float> values(count);
    float* w = values.data();
    const float fan_in = static_cast<float>(count) / static_cast<float>(tensor.dim(0));
    const float fan_out = static_cast<float>(count) / static_cast<float>(tensor.dim(1));
    float n = fan_in;
    if (filler.variance_norm == "fan_out") {
        n = fan_out;
    } else if (filler.variance_norm == "average") {
        n = (fan_in + fan_out) / 2.0F;
    }
    if (filler.type == "constant") {
        std::fill(w, w + count, filler.value);
    } else if (filler.type == "uniform" || filler.type == "xavier") {
        const float limit = std::sqrt(3.0F / n);
        const float low = filler.type == "xavier" ? -limit : filler.min;
        const float high = filler.type == "xavier" ? limit : filler.max;
        caffe_uniform(rng, low, high, w, count);
    } else {
        const float mean = filler.type == "msra" ? 0.0F : filler.mean;
        const float stddev = filler.type == "msra" ? std::sqrt(2.0F / n) : filler.std;
        caffe_gaussian(rng, mean, stddev, w, count);
        if (filler.type == "gaussian" && filler.sparse >= 0) {
            // Caffe's rule: shape[0] (the outputs) stands for the number of inputs per unit.
            const float keep =
                static_cast<float>(filler.sparse) / static_cast<float>(tensor.dim(0));
            caffe_bernoulli_mask(rng, keep, w, count);
        }
    }
    tensor.write_data(values.data());
}

} // namespace dl
