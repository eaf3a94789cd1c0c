#pragma once
// Caffe's InsertSplits, for gradients: where a blob feeds two or more layers that backpropagate
// into it, each of them gets a copy of its own from a Split layer placed after the blob's
// producer, and the Split sums their gradients (the layers write a bottom's gradient, they do not
// add to it). GoogLeNet's inception branches and every residual block's shortcut are such blobs.

#include <dl/config.hpp>

#include <deque>
#include <vector>

namespace dl {

/// The layers of the net of `state` in order, Splits inserted. Layers rewired or inserted are
/// copies kept in `made` (a deque: its elements stay where they are); the others point into
/// `config`.
std::vector<const LayerConfig*> phase_layers(const NetConfig& config, const NetState& state,
                                             std::deque<LayerConfig>& made);

} // namespace dl
