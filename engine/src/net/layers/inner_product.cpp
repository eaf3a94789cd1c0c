// InnerProduct: bottom N x (everything else) -> N x num_output; weights num_output x in.

#include "net/layer.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <climits>

namespace dl::layers {
namespace inner_product_layer {

class InnerProductLayer final : public Layer {
public:
    using Layer::Layer;
    void setup(const Blobs& bottom, const Blobs& top,
               const std::vector<std::string>& /*producers*/) override {
        m_rows = bottom[0]->dim(0);
        m_in = static_cast<int>(bottom[0]->inner());
        shape_tops(bottom, top);
    }
    void forward(const Blobs& bottom, const Blobs& top) override {
        m_backend.inner_product_forward(
            m_rows, m_in, m_config.num_output, bottom[0]->data(), m_params[0]->data(),
            m_config.bias_term ? m_params[1]->data() : nullptr, top[0]->data());
    }
    void backward(const Blobs& top, const std::vector<bool>& propagate_down,
                  const Blobs& bottom) override {
        m_backend.inner_product_backward(
            m_rows, m_in, m_config.num_output, bottom[0]->data(), m_params[0]->data(),
            top[0]->diff(), propagate_down[0] ? bottom[0]->diff() : nullptr, m_params[0]->diff(),
            m_config.bias_term ? m_params[1]->diff() : nullptr);
    }

private:
    int m_rows = 0;
    int m_in = 0;
};

void fields(FieldVisitor& v, LayerConfig& l) {
    const char* m = "inner_product_param";
    v.params(l.params, true);
    v.integer(field("num_output", m), l.num_output);
    v.flag(field("bias_term", m), l.bias_term);
    v.filler(field("weight_filler", m), l.weight_filler);
    v.filler(field("bias_filler", m), l.bias_filler);
    v.caffe_requires({m, "axis"}, "1", "axis {} (only 1)");
}

void check(const LayerConfig& l, const LayerChecks& c) {
    c.required_at_least("num_output", l.num_output, 1);
    c.filler("weight_filler", l.weight_filler);
    c.filler("bias_filler", l.bias_filler);
}

std::optional<Planned> plan(const LayerConfig& l, const std::vector<const Shape*>& bottom) {
    const Shape& x = *bottom[0];
    if (x.empty()) {
        return std::nullopt;
    }
    const std::uint64_t inner = count_of(Shape(x.begin() + 1, x.end()));
    if (inner > INT_MAX) {
        throw Error(ErrorKind::config,
                    fmt::format("its input {} has {} values per item, beyond 2^31 - 1",
                                shape_text(x), inner));
    }
    Planned made;
    made.tops.push_back({x[0], l.num_output});
    made.params.push_back({l.num_output, static_cast<std::int64_t>(inner)});
    if (l.bias_term) {
        made.params.push_back({l.num_output});
    }
    return made;
}

} // namespace inner_product_layer

LayerKind inner_product() {
    return LayerKind{.type = "InnerProduct",
                     .has_params = true,
                     .fields = inner_product_layer::fields,
                     .check = inner_product_layer::check,
                     .plan = inner_product_layer::plan,
                     .make = make_as<inner_product_layer::InnerProductLayer>};
}

} // namespace dl::layers
