#include "net/splits.hpp"

#include "net/layer_kind.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace dl {
namespace {

using Place = std::pair<std::size_t, std::size_t>; // (layer, top or bottom index)

// Which producer top each bottom reads, and which bottoms read each top with a gradient: the
// net's own rule (net.cpp, wire_bottoms and mark_gradients) worked out from the layer kinds.
struct Readers {
    std::vector<std::vector<std::optional<Place>>> source; // per layer, per bottom
    std::map<Place, std::vector<Place>> with_gradient;     // top -> (layer, bottom)
};

Readers find_readers(const std::vector<const LayerConfig*>& layers) {
    Readers readers;
    std::map<std::string, Place> last; // blob name -> the top that last wrote it
    std::map<Place, bool> gradient;    // whether a top carries a gradient
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const LayerConfig& layer = *layers[i];
        const LayerKind* kind = find_layer_kind(layer.type);
        const bool backward =
            kind != nullptr && kind->role != LayerRole::input && kind->role != LayerRole::metric;
        bool any = false;
        auto& sources = readers.source.emplace_back(layer.bottoms.size());
        for (std::size_t j = 0; j < layer.bottoms.size(); ++j) {
            const auto found = last.find(layer.bottoms[j]);
            if (found == last.end()) {
                continue; // the net names the missing blob
            }
            sources[j] = found->second;
            // A loss does not backpropagate into its labels.
            const bool flows =
                gradient[found->second] && backward && !(kind->role == LayerRole::loss && j == 1);
            if (flows) {
                readers.with_gradient[found->second].push_back({i, j});
            }
            any = any || flows;
        }
        const bool tops = backward && (any || kind->has_params);
        for (std::size_t t = 0; t < layer.tops.size(); ++t) {
            last[layer.tops[t]] = {i, t};
            gradient[{i, t}] = tops;
        }
    }
    return readers;
}

std::string split_top(const LayerConfig& producer, std::size_t top, std::size_t k) {
    return fmt::format("{}_{}_{}_split_{}", producer.tops[top], producer.name, top, k);
}

} // namespace

std::vector<const LayerConfig*> phase_layers(const NetConfig& config, const NetState& state,
                                             std::deque<LayerConfig>& made) {
    std::vector<const LayerConfig*> layers;
    for (const LayerConfig& layer : config.layers) {
        if (in_net(layer, state)) {
            layers.push_back(&layer);
        }
    }
    const Readers readers = find_readers(layers);
    std::map<Place, std::string> redirect; // a reader's bottom -> its copy
    for (const auto& [top, list] : readers.with_gradient) {
        if (list.size() < 2) {
            continue;
        }
        for (std::size_t k = 0; k < list.size(); ++k) {
            redirect[list[k]] = split_top(*layers[top.first], top.second, k);
        }
    }
    if (redirect.empty()) {
        return layers;
    }
    std::map<Place, std::string> renamed; // a top now written under another name
    std::vector<const LayerConfig*> out;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        LayerConfig copy = *layers[i];
        bool changed = false;
        for (std::size_t j = 0; j < copy.bottoms.size(); ++j) {
            const auto& source = readers.source[i][j];
            std::string name;
            if (const auto to = redirect.find({i, j}); to != redirect.end()) {
                name = to->second;
            } else if (source && renamed.count(*source) != 0) {
                name = renamed.at(*source);
            } else {
                continue;
            }
            // In place, the layer's top is the same blob under the same new name.
            for (std::size_t t = 0; t < copy.tops.size(); ++t) {
                if (copy.tops[t] == copy.bottoms[j]) {
                    copy.tops[t] = name;
                    renamed[{i, t}] = name;
                }
            }
            copy.bottoms[j] = name;
            changed = true;
        }
        const LayerConfig* layer = changed ? &made.emplace_back(std::move(copy)) : layers[i];
        out.push_back(layer);
        for (std::size_t t = 0; t < layer->tops.size(); ++t) {
            const auto list = readers.with_gradient.find({i, t});
            if (list == readers.with_gradient.end() || list->second.size() < 2) {
                continue;
            }
            LayerConfig split;
            split.name = fmt::format("{}_{}_{}_split", layers[i]->tops[t], layer->name, t);
            split.type = "Split";
            split.phase = layer->phase;
            split.line = layer->line;
            split.bottoms = {layer->tops[t]};
            for (std::size_t k = 0; k < list->second.size(); ++k) {
                split.tops.push_back(split_top(*layers[i], t, k));
            }
            out.push_back(&made.emplace_back(std::move(split)));
        }
    }
    return out;
}

} // namespace dl
