#pragma once
// Runs one layer forward and backward on a backend from host values, and hands back every
// result on the host: the PyTorch parity cases and the GPU-versus-CPU checks of the Caffe
// layers share it.

#include "net/layer.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/tensor.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace dl_test {

struct LayerRun {
    std::vector<float> top;
    std::vector<int> top_shape;
    std::vector<std::vector<float>> dbottoms;     // one per bottom
    std::vector<std::vector<float>> dparams;      // one per parameter
    std::vector<std::vector<float>> params_after; // parameters after forward (running stats)
};

struct LayerInput {
    std::vector<std::vector<int>> bottom_shapes;
    std::vector<std::vector<float>> bottoms;
    std::vector<std::vector<float>> params; // empty: the layer's fillers are not used, zeros
    std::vector<float> dy;                  // empty: forward only
    bool in_place = false;                  // top = bottom 0
    dl::Phase phase = dl::Phase::train;
};

/// The layer's setup, a forward and (with dy) a backward on `backend`.
inline LayerRun run_layer(const dl::LayerConfig& config, dl::Backend& backend,
                          const LayerInput& input) {
    std::vector<std::unique_ptr<dl::Tensor>> owned;
    dl::Blobs bottom;
    for (std::size_t b = 0; b < input.bottoms.size(); ++b) {
        owned.push_back(std::make_unique<dl::Tensor>(input.bottom_shapes[b], &backend));
        owned.back()->write_data(input.bottoms[b].data());
        bottom.push_back(owned.back().get());
    }
    dl::Tensor separate_top(&backend);
    dl::Blobs top = {input.in_place ? bottom[0] : &separate_top};
    auto layer = dl::make_layer(config, backend);
    std::mt19937 rng(99);
    layer->set_rng(&rng);
    layer->set_phase(input.phase);
    layer->setup(bottom, top, std::vector<std::string>(bottom.size(), "input"));
    const auto shapes = layer->param_shapes();
    for (std::size_t p = 0; p < shapes.size(); ++p) {
        auto param = std::make_shared<dl::Tensor>(shapes[p], &backend);
        if (p < input.params.size()) {
            param->write_data(input.params[p].data());
        }
        layer->params().push_back(param);
    }
    layer->forward(bottom, top);
    LayerRun run;
    run.top = top[0]->read_data();
    run.top_shape = top[0]->shape();
    for (const auto& param : layer->params()) {
        run.params_after.push_back(param->read_data());
    }
    if (input.dy.empty()) {
        return run;
    }
    top[0]->write_diff(input.dy.data());
    layer->backward(top, std::vector<bool>(bottom.size(), true), bottom);
    for (const dl::Tensor* b : bottom) {
        run.dbottoms.push_back(b->read_diff());
    }
    for (const auto& param : layer->params()) {
        run.dparams.push_back(param->read_diff());
    }
    return run;
}

} // namespace dl_test
