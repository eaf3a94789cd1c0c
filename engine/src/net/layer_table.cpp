// The explicit table of layer types (docs/engine.md, "Config format"): each is one file in
// net/layers/, and adding a type is its file and a line here.

#include "net/layer.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <stdexcept>

namespace dl {
namespace layers {
LayerKind data();
LayerKind image_data();
LayerKind hdf5_data();
LayerKind convolution();
LayerKind pooling();
LayerKind inner_product();
LayerKind relu();
LayerKind sigmoid();
LayerKind hyperbolic_tangent();
LayerKind dropout();
LayerKind lrn();
LayerKind batch_norm();
LayerKind scale();
LayerKind concat();
LayerKind eltwise();
LayerKind softmax_with_loss();
LayerKind accuracy();
LayerKind flatten();
LayerKind split();
LayerKind input();
LayerKind softmax();
LayerKind slice();
LayerKind reshape();
LayerKind absval();
LayerKind bnll();
LayerKind elu();
LayerKind power();
LayerKind euclidean_loss();
LayerKind sigmoid_cross_entropy_loss();
LayerKind dummy_data();
LayerKind contrastive_loss();
LayerKind prelu();
LayerKind hinge_loss();
LayerKind crop();
LayerKind deconvolution();
} // namespace layers

const std::vector<LayerKind>& layer_kinds() {
    static const std::vector<LayerKind> kinds = {
        layers::data(),
        layers::image_data(),
        layers::hdf5_data(),
        layers::convolution(),
        layers::pooling(),
        layers::inner_product(),
        layers::relu(),
        layers::sigmoid(),
        layers::hyperbolic_tangent(),
        layers::dropout(),
        layers::lrn(),
        layers::batch_norm(),
        layers::scale(),
        layers::concat(),
        layers::eltwise(),
        layers::softmax_with_loss(),
        layers::accuracy(),
        layers::flatten(),
        layers::split(),
        layers::input(),
        layers::softmax(),
        layers::slice(),
        layers::reshape(),
        layers::absval(),
        layers::bnll(),
        layers::elu(),
        layers::power(),
        layers::euclidean_loss(),
        layers::sigmoid_cross_entropy_loss(),
        layers::dummy_data(),
        layers::contrastive_loss(),
        layers::prelu(),
        layers::hinge_loss(),
        layers::crop(),
        layers::deconvolution(),
    };
    return kinds;
}

const LayerKind* find_layer_kind(const std::string& type) {
    for (const LayerKind& kind : layer_kinds()) {
        if (type == kind.type) {
            return &kind;
        }
    }
    return nullptr;
}

const LayerKind& layer_kind(const std::string& type) {
    const LayerKind* kind = find_layer_kind(type);
    if (kind == nullptr) {
        throw std::out_of_range("no layer type " + type);
    }
    return *kind;
}

bool has_role(const LayerConfig& layer, LayerRole role) {
    const LayerKind* kind = find_layer_kind(layer.type);
    return kind != nullptr && kind->role == role;
}

std::vector<std::string> layer_type_names() {
    std::vector<std::string> names;
    for (const LayerKind& kind : layer_kinds()) {
        names.emplace_back(kind.type);
    }
    return names;
}

namespace {

// Collects the YAML keys a kind's fields name.
class KeyList final : public FieldVisitor {
public:
    std::vector<std::string> keys;
    void integer(const Field& f, int& /*value*/) override { keys.emplace_back(f.key); }
    void number(const Field& f, float& /*value*/) override { keys.emplace_back(f.key); }
    void flag(const Field& f, bool& /*value*/) override { keys.emplace_back(f.key); }
    void flag(const Field& f, std::optional<bool>& /*value*/) override { keys.emplace_back(f.key); }
    void text(const Field& f, std::string& /*value*/) override { keys.emplace_back(f.key); }
    void numbers(const Field& f, std::vector<float>& /*value*/) override {
        keys.emplace_back(f.key);
    }
    void integers(const Field& f, std::vector<int>& /*value*/) override {
        keys.emplace_back(f.key);
    }
    void filler(const Field& f, FillerConfig& /*value*/) override { keys.emplace_back(f.key); }
};

} // namespace

std::vector<std::string> layer_keys(const LayerKind& kind) {
    KeyList list;
    LayerConfig scratch;
    kind.fields(list, scratch);
    return list.keys;
}

std::unique_ptr<Layer> make_layer(const LayerConfig& config, Backend& backend) {
    const LayerKind* kind = find_layer_kind(config.type);
    if (kind == nullptr) {
        throw Error(ErrorKind::config, fmt::format("unknown layer type '{}'", config.type));
    }
    return kind->make(config, backend);
}

bool may_run_in_place(const std::string& type) {
    const LayerKind* kind = find_layer_kind(type);
    return kind != nullptr && kind->in_place;
}

std::vector<std::string> in_place_types() {
    std::vector<std::string> names;
    for (const LayerKind& kind : layer_kinds()) {
        if (kind.in_place) {
            names.emplace_back(kind.type);
        }
    }
    return names;
}

} // namespace dl
