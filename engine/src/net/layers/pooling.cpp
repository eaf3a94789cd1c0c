// Pooling, max or ave: N x C x H x W -> N x C x OH x OW (Caffe's ceil mode).

#include "net/layer.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace dl::layers {
namespace pooling_layer {

class PoolingLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const Tensor& x = *bottom[0];
        require_images(x, producers[0]);
        m_geometry =
            PoolGeometry{x.dim(0),        x.dim(1),    x.dim(2), x.dim(3), m_config.kernel_size,
                         m_config.stride, m_config.pad};
        if (m_config.pad >= m_config.kernel_size) {
            fail(fmt::format("pad {} must be smaller than kernel_size {}", m_config.pad,
                             m_config.kernel_size));
        }
        if (x.dim(2) + 2 * m_config.pad < m_config.kernel_size ||
            x.dim(3) + 2 * m_config.pad < m_config.kernel_size) {
            fail(fmt::format("kernel_size {} does not fit the {}x{} input from layer '{}'",
                             m_config.kernel_size, x.dim(2), x.dim(3), producers[0]));
        }
        // A kernel smaller than the stride can leave the last window wholly past the image
        // (Caffe's ceil-mode size, 2 wide, kernel 1, stride 2): max pooling would have no pixel
        // to point its argmax at (Caffe writes -1 and its backward pass then writes outside
        // the plane), so such a net is refused here.
        const auto last_start = [&](int out) { return (out - 1) * m_config.stride - m_config.pad; };
        if (last_start(m_geometry.out_height()) >= x.dim(2) ||
            last_start(m_geometry.out_width()) >= x.dim(3)) {
            fail(fmt::format("kernel_size {} with stride {} leaves the last window past the {}x{} "
                             "input from layer '{}' (make kernel_size at least the stride, or "
                             "crop the input)",
                             m_config.kernel_size, m_config.stride, x.dim(2), x.dim(3),
                             producers[0]));
        }
        const Planned planned = shape_tops(bottom, top);
        m_argmax = Buffer(m_backend, planned.buffer * sizeof(std::int32_t));
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        if (m_config.pool == "max") {
            m_backend.max_pool_forward(m_geometry, bottom[0]->data(), top[0]->data(),
                                       m_argmax.as<std::int32_t>());
        } else {
            m_backend.ave_pool_forward(m_geometry, bottom[0]->data(), top[0]->data());
        }
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (!propagate_down[0]) {
            return;
        }
        if (m_config.pool == "max") {
            m_backend.max_pool_backward(m_geometry, bottom[0]->data(), top[0]->data(),
                                        top[0]->diff(), m_argmax.as<std::int32_t>(),
                                        bottom[0]->diff());
        } else {
            m_backend.ave_pool_backward(m_geometry, top[0]->diff(), bottom[0]->diff());
        }
    }

private:
    PoolGeometry m_geometry;
    Buffer m_argmax; // int32 per output, in backend memory
};

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "pooling_param";
    v.integer(field("kernel_size", m), l.kernel_size);
    v.integer(field("stride", m), l.stride);
    v.integer(field("pad", m), l.pad);
    v.text(field("pool", m), l.pool);
    v.caffe_refuses({m, "pool"}, "STOCHASTIC", "pool {} is not supported (MAX, AVE)");
    v.caffe_requires({m, "round_mode"}, "CEIL", "round_mode {} is not supported (CEIL)");
    v.caffe_ignores({m, "engine"});
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.choice("pool", l.pool, {"max", "ave"});
    c.window();
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() != 4 || l.kernel_size < 1 || l.stride < 1 || l.pad >= l.kernel_size) {
        return std::nullopt;
    }
    const std::int64_t height = padded(l, x[2]);
    const std::int64_t width = padded(l, x[3]);
    if (height < l.kernel_size || width < l.kernel_size) {
        return std::nullopt;
    }
    // Caffe's ceil mode, as PoolGeometry computes it.
    const auto pooled = [&](std::int64_t size, std::int64_t with_pad) {
        std::int64_t out = (with_pad - l.kernel_size + l.stride - 1) / l.stride + 1;
        if (l.pad > 0 && (out - 1) * l.stride >= size + l.pad) {
            --out;
        }
        return out;
    };
    Planned made;
    made.tops.push_back({x[0], x[1], pooled(x[2], height), pooled(x[3], width)});
    made.buffer = count_of(made.tops[0]); // the argmax, an int32 per output
    made.buffer_what = "pooling indexes";
    return made;
}

} // namespace pooling_layer

LayerKind pooling() {
    return LayerKind{.type = "Pooling",
                     .fields = pooling_layer::fields,
                     .check = pooling_layer::check,
                     .plan = pooling_layer::plan,
                     .make = make_as<pooling_layer::PoolingLayer>};
}

} // namespace dl::layers
