// Softmax: each row's scores (N x C, Caffe's axis 1) as probabilities, the last layer of a deploy
// net ("prob"). Forward is the backend's softmax of SoftmaxWithLoss with labels of -1 (no loss
// term: both backends skip a label outside the row), so the two layers give the same
// probabilities. Its gradient, dx = y * (dy - sum_c dy * y), is composed from the backends' own
// eltwise and inner-product ops (a row sum is a product with ones), so CPU and CUDA have it
// without a kernel of their own.

#include "net/layer.hpp"

#include <fmt/format.h>

#include <vector>

namespace dl::layers {
namespace softmax_layer {

class SoftmaxLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        const Tensor& x = *bottom[0];
        if (x.shape().size() < 2 || x.count() != x.dim(0) * static_cast<std::size_t>(x.dim(1))) {
            fail(fmt::format("'{}' from layer '{}' is {}: Softmax takes N x C scores (over axis "
                             "1, with no spatial axes past it)",
                             m_config.bottoms[0], producers[0], x.shape_string()));
        }
        m_rows = x.dim(0);
        m_classes = x.dim(1);
        m_no_labels = Tensor({m_rows}, &m_backend);
        m_no_labels.write_data(std::vector<float>(static_cast<std::size_t>(m_rows), -1.0F).data());
        m_no_loss = Tensor({1}, &m_backend);
        m_ones = Tensor({m_classes}, &m_backend);
        m_ones.write_data(std::vector<float>(static_cast<std::size_t>(m_classes), 1.0F).data());
        m_row_sums = Tensor({m_rows}, &m_backend);
        m_product = Tensor(x.shape(), &m_backend);
        m_spread = Tensor(x.shape(), &m_backend);
        m_scaled = Tensor(x.shape(), &m_backend);
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.softmax_loss_forward(m_rows, m_classes, bottom[0]->data(), m_no_labels.data(),
                                       top[0]->data(), m_no_loss.data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        if (!propagate_down[0]) {
            return;
        }
        const std::size_t n = top[0]->count();
        const float* y = top[0]->data();
        const float* dy = top[0]->diff();
        // t = dy * y; s = the rows' sums of t; S = s spread over each row; dx = t - y * S
        // (no op writes over one of its inputs).
        m_backend.eltwise_forward(EltwiseOp::prod, n, {dy, y}, {}, m_product.data(), nullptr);
        m_backend.inner_product_forward(m_rows, m_classes, 1, m_product.data(), m_ones.data(),
                                        nullptr, m_row_sums.data());
        m_backend.inner_product_forward(m_rows, 1, m_classes, m_row_sums.data(), m_ones.data(),
                                        nullptr, m_spread.data());
        m_backend.eltwise_forward(EltwiseOp::prod, n, {y, m_spread.data()}, {}, m_scaled.data(),
                                  nullptr);
        m_backend.eltwise_forward(EltwiseOp::sum, n, {m_product.data(), m_scaled.data()},
                                  {1.0F, -1.0F}, bottom[0]->diff(), nullptr);
    }

private:
    int m_rows = 0;
    int m_classes = 0;
    Tensor m_no_labels;
    Tensor m_no_loss;
    Tensor m_ones;
    Tensor m_row_sums;
    Tensor m_product;
    Tensor m_spread;
    Tensor m_scaled;
};

void fields(FieldVisitor& v, LayerConfig& /*l*/) {
    v.caffe_requires({"softmax_param", "axis"}, "1", "softmax axis {} (only 1)");
    v.caffe_ignores({"softmax_param", "engine"});
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.size() < 2 || count_of(x) != static_cast<std::uint64_t>(x[0]) * x[1]) {
        return std::nullopt;
    }
    Planned made;
    made.tops.push_back(x);
    made.buffer = 3 * count_of(x) + static_cast<std::uint64_t>(x[0]) * 2 + x[1] + 1;
    made.buffer_what = "row sums and products";
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
