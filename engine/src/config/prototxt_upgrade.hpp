#pragma once
// Caffe's legacy V1 layers (`layers { type: CONVOLUTION … }`, 2014's files) and V0 ones (before
// May 2014) as today's LayerParameter, by Caffe's own rules (upgrade_proto.cpp's UpgradeV0Net and
// UpgradeV1LayerParameter), so that such a file is read as Caffe reads it instead of refused.

#include "caffe.pb.h"

#include <string>
#include <vector>

namespace dl {

/// One V1 layer as a LayerParameter; an empty `why` when it converted, else what stops it
/// (weights inside the prototxt, a type Caffe's upgrade has no name for).
caffe::LayerParameter upgrade_v1_layer(const caffe::V1LayerParameter& v1, std::string& why);

/// Caffe's V0 net (`layers { layer { type: "conv" … } bottom: … top: … }`, before May 2014) as
/// V1 layers, by Caffe's UpgradeV0Net: a "padding" layer is folded into the convolution or
/// pooling it feeds, and each V0 field moves to the parameter its layer type reads.
struct V0Upgrade {
    std::vector<caffe::V1LayerParameter> layers;
    std::vector<int> origin; ///< each layer's index among the V0 net's entries, for messages
    int failed = -1;         ///< the entry that could not be upgraded; `why` says what stops it
    std::string why;
};
V0Upgrade upgrade_v0_net(const caffe::NetParameter& net);

/// Whether any entry of the net is a V0 layer.
bool is_v0_net(const caffe::NetParameter& net);

} // namespace dl
