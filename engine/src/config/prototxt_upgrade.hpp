#pragma once
// Caffe's legacy V1 layers (`layers { type: CONVOLUTION … }`, 2014's files) as today's
// LayerParameter, by Caffe's own rules (upgrade_proto.cpp's UpgradeV1LayerParameter), so that
// such a file is read as Caffe reads it instead of being refused.

#include "caffe.pb.h"

#include <string>

namespace dl {

/// One V1 layer as a LayerParameter; an empty `why` when it converted, else what stops it
/// (a V0 layer inside, weights inside the prototxt, a type dltrain has no name for).
caffe::LayerParameter upgrade_v1_layer(const caffe::V1LayerParameter& v1, std::string& why);

} // namespace dl
