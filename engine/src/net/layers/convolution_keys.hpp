#pragma once
// Caffe's convolution_param keys (num_output, kernel_size, stride, pad, group, bias_term,
// fillers) and their checks: Convolution's, which Deconvolution takes as Caffe's does.

#include "net/layer.hpp"

namespace dl::layers {

void convolution_fields(FieldVisitor& v, LayerConfig& l);
void convolution_check(const LayerConfig& l, const LayerChecks& c);

} // namespace dl::layers
