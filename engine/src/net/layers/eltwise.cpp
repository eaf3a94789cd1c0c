// Eltwise: sum (with coefficients), prod or max of same-shaped bottoms.

#include "net/layer.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace dl::layers {
namespace eltwise_layer {

class EltwiseLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& producers) override {
        for (std::size_t b = 0; b < bottom.size(); ++b) {
            if (bottom[b]->shape() != bottom[0]->shape()) {
                fail(fmt::format("'{}' from layer '{}' is {} but '{}' from layer '{}' is {}",
                                 m_config.bottoms[b], producers[b], bottom[b]->shape_string(),
                                 m_config.bottoms[0], producers[0], bottom[0]->shape_string()));
            }
        }
        if (m_config.operation == "prod") {
            m_op = EltwiseOp::prod;
        } else if (m_config.operation == "max") {
            m_op = EltwiseOp::max;
        } else {
            m_op = EltwiseOp::sum;
        }
        m_coeffs = m_config.coeff;
        if (m_coeffs.empty()) {
            m_coeffs.assign(bottom.size(), 1.0F);
        } else if (m_coeffs.size() != bottom.size()) {
            fail(fmt::format("has {} coeff values for {} bottoms", m_coeffs.size(), bottom.size()));
        } else if (m_op != EltwiseOp::sum) {
            fail("coeff applies to operation sum only");
        }
        shape_tops(bottom, top);
        if (m_op == EltwiseOp::max) {
            m_mask = Buffer(m_backend, top[0]->count() * sizeof(std::int32_t));
        }
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.eltwise_forward(m_op, top[0]->count(), inputs(bottom), m_coeffs, top[0]->data(),
                                  m_mask.as<std::int32_t>());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        const auto x = inputs(bottom);
        for (std::size_t i = 0; i < bottom.size(); ++i) {
            if (propagate_down[i]) {
                m_backend.eltwise_backward(m_op, top[0]->count(), static_cast<int>(i), x,
                                           m_coeffs[i], top[0]->diff(), m_mask.as<std::int32_t>(),
                                           bottom[i]->diff());
            }
        }
    }
    [[nodiscard]] std::size_t min_bottoms() const override { return 2; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 64; }

private:
    static std::vector<const float*> inputs(const Blobs& bottom) {
        std::vector<const float*> x;
        x.reserve(bottom.size());
        for (const Tensor* b : bottom) {
            x.push_back(b->data());
        }
        return x;
    }
    EltwiseOp m_op = EltwiseOp::sum;
    std::vector<float> m_coeffs;
    Buffer m_mask; // max only: the winning bottom per value, in backend memory
};

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "eltwise_param";
    v.text(field("operation", m), l.operation);
    v.numbers(field("coeff", m).when_set().expecting("a list of numbers, one per bottom"), l.coeff);
    v.caffe_ignores({m, "stable_prod_grad"});
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.choice("operation", l.operation, {"sum", "prod", "max"});
    if (l.coeff.empty()) {
        return;
    }
    if (l.operation != "sum") {
        c.fail("coeff", fmt::format("key 'coeff' in {} applies to operation sum only", c.where()));
    }
    if (l.coeff.size() != l.bottoms.size()) {
        c.fail("coeff", fmt::format("key 'coeff' in {} has {} values for {} bottoms", c.where(),
                                    l.coeff.size(), l.bottoms.size()));
    }
    for (const float coeff : l.coeff) {
        c.finite("coeff", coeff);
    }
}

std::optional<Planned> plan(const LayerConfig& /*l*/, const std::vector<const Shape*>& bottom) {
    Planned made;
    made.tops.push_back(*bottom[0]);
    made.buffer = count_of(*bottom[0]); // the max mask (int32)
    made.buffer_what = "eltwise mask";
    return made;
}

} // namespace eltwise_layer

LayerKind eltwise() {
    return LayerKind{.type = "Eltwise",
                     .fields = eltwise_layer::fields,
                     .check = eltwise_layer::check,
                     .plan = eltwise_layer::plan,
                     .make = make_as<eltwise_layer::EltwiseLayer>};
}

} // namespace dl::layers
