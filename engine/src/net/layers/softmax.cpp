// Softmax: the scores along axis 1 (Caffe's) as probabilities, the last layer of a deploy net
// ("prob"): N x C, or N x C x H x W with a softmax over C at every pixel (a fully convolutional
// net's map of classes). Forward is the backend's softmax of SoftmaxWithLoss with labels of -1
// (no loss term: both backends skip a label outside the row), so the two layers give the same
// probabilities. Its gradient, dx = y * (dy - sum_c dy * y), is composed from the backends' own
// eltwise and inner-product ops (a row sum is a product with ones), so CPU and CUDA have it
// without a kernel of their own. With pixels, every image's C x P values are first laid out as
// P rows of C (block copies) and back after.

#include "net/layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dl::layers {
namespace softmax_layer {

class SoftmaxLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const Tensor& x = *bottom[0];
        if (x.shape().size() < 2) {
            fail(fmt::format("'{}' from layer '{}' is {}: Softmax takes N x C scores, or N x C x "
                             "H x W (over axis 1)",
                             m_config.bottoms[0], producers[0], x.shape_string()));
        }
        m_images = x.dim(0);
        m_classes = x.dim(1);
        m_pixels = static_cast<int>(x.count() / (static_cast<std::size_t>(m_images) * m_classes));
        m_rows = m_images * m_pixels;
        const std::vector<int> rows_shape = {m_rows, m_classes};
        m_no_labels = Tensor({m_rows}, &m_backend);
        m_no_labels.write_data(std::vector<float>(static_cast<std::size_t>(m_rows), -1.0F).data());
        m_no_loss = Tensor({1}, &m_backend);
        m_ones = Tensor({m_classes}, &m_backend);
        m_ones.write_data(std::vector<float>(static_cast<std::size_t>(m_classes), 1.0F).data());
        m_row_sums = Tensor({m_rows}, &m_backend);
        m_product = Tensor(rows_shape, &m_backend);
        m_spread = Tensor(rows_shape, &m_backend);
        m_scaled = Tensor(rows_shape, &m_backend);
        if (m_pixels > 1) {
            m_rows_x = Tensor(rows_shape, &m_backend);
            m_rows_y = Tensor(rows_shape, &m_backend);
        }
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        if (m_pixels == 1) {
            m_backend.softmax_loss_forward(m_rows, m_classes, bottom[0]->data(), m_no_labels.data(),
                                           top[0]->data(), m_no_loss.data());
            return;
        }
        to_rows(bottom[0]->data(), m_rows_x.data());
        m_backend.softmax_loss_forward(m_rows, m_classes, m_rows_x.data(), m_no_labels.data(),
                                       m_rows_y.data(), m_no_loss.data());
        from_rows(m_rows_y.data(), top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (!propagate_down[0]) {
            return;
        }
        if (m_pixels == 1) {
            rows_backward(top[0]->data(), top[0]->diff(), bottom[0]->diff());
            return;
        }
        // y in rows is still forward's; dy is laid out in m_rows_x (x is no longer needed).
        to_rows(top[0]->diff(), m_rows_x.data());
        rows_backward(m_rows_y.data(), m_rows_x.data(), m_spread.data());
        from_rows(m_spread.data(), bottom[0]->diff());
    }

private:
    // dx = t - y * S with t = dy * y and S each row's sum of t (no op writes over its inputs;
    // dx may be m_spread, read before it is written last).
    void rows_backward(const float* y, const float* dy, float* dx) {
        const std::size_t n = static_cast<std::size_t>(m_rows) * m_classes;
        m_backend.eltwise_forward(EltwiseOp::prod, n, {dy, y}, {}, m_product.data(), nullptr);
        m_backend.inner_product_forward(m_rows, m_classes, 1, m_product.data(), m_ones.data(),
                                        nullptr, m_row_sums.data());
        m_backend.inner_product_forward(m_rows, 1, m_classes, m_row_sums.data(), m_ones.data(),
                                        nullptr, m_spread.data());
        m_backend.eltwise_forward(EltwiseOp::prod, n, {y, m_spread.data()}, {}, m_scaled.data(),
                                  nullptr);
        m_backend.eltwise_forward(EltwiseOp::sum, n, {m_product.data(), m_scaled.data()},
                                  {1.0F, -1.0F}, dx, nullptr);
    }
    // Image i's C x P values as its P rows of C, and back: one strided copy per class (or per
    // pixel, whichever is fewer).
    void to_rows(const float* images, float* rows) { lay_out(images, rows, true); }
    void from_rows(const float* rows, float* images) { lay_out(rows, images, false); }
    void lay_out(const float* from, float* to, bool into_rows) {
        const std::size_t per_image = static_cast<std::size_t>(m_classes) * m_pixels;
        const std::size_t c_step = into_rows ? m_pixels : 1; // class c's stride in `from`
        const std::size_t p_step = into_rows ? 1 : m_classes;
        const std::size_t to_c = into_rows ? 1 : m_pixels;
        const std::size_t to_p = into_rows ? m_classes : 1;
        for (int i = 0; i < m_images; ++i) {
            const float* src = from + i * per_image;
            float* dst = to + i * per_image;
            if (m_classes <= m_pixels) {
                for (int c = 0; c < m_classes; ++c) {
                    m_backend.copy_blocks(m_pixels, 1, src + c * c_step, p_step, dst + c * to_c,
                                          to_p);
                }
            } else {
                for (int p = 0; p < m_pixels; ++p) {
                    m_backend.copy_blocks(m_classes, 1, src + p * p_step, c_step, dst + p * to_p,
                                          to_c);
                }
            }
        }
    }

    int m_images = 0;
    int m_classes = 0;
    int m_pixels = 1;
    int m_rows = 0; // images x pixels
    Tensor m_no_labels;
    Tensor m_no_loss;
    Tensor m_ones;
    Tensor m_row_sums;
    Tensor m_product;
    Tensor m_spread;
    Tensor m_scaled;
    Tensor m_rows_x; // with pixels: x, then dy, as rows
    Tensor m_rows_y; // with pixels: y as rows
};

void fields(FieldVisitor& v, LayerConfig& /*l*/) {
    v.caffe_requires({"softmax_param", "axis"}, "1", "softmax axis {} (only 1)");
    v.caffe_ignores({"softmax_param", "engine"});
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() < 2) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back(x);
    const std::uint64_t rows =
        count_of(x) / static_cast<std::uint64_t>(std::max<std::int64_t>(x[1], 1));
    made.buffer = 5 * count_of(x) + rows * 2 + x[1] + 1;
    made.buffer_what = "row sums, products and the rows' layout";
    return made;
}

} // namespace softmax_layer

LayerKind softmax() {
    return LayerKind{.type = "Softmax",
                     .fields = softmax_layer::fields,
                     .plan = softmax_layer::plan,
                     .make = make_as<softmax_layer::SoftmaxLayer>};
}

} // namespace dl::layers
