#pragma once
// Pooling and ReLU for the CPU backend: the fast loops the backend runs, over a run of planes
// (one image's channel each) one after the other, and the plain reference loops they are tested
// against, one plane per call (bit for bit, argmax included, in
// tests/engine/cpu/test_cpu_pooling.cpp).
//
// 3x3 windows at stride 2 without padding (Caffe's usual pooling, all of cifar10_quick's) have
// their own loops: whole output rows in vectors, each input row read once and split by shuffles
// into its three window columns, max pooling's row maxima reused for both output rows that share
// the row, planes 16 and 8 pixels wide two and four to a 16-lane vector; the backward passes
// gather each input pixel's gradient from the windows that hold it, in the reference's order,
// instead of zeroing the plane and scattering into it. Other windows become runs of contiguous
// vector loops: an input row is split into `stride` phase rows (phase r holds the row's pixels
// r, r + stride, r + 2 * stride, ... of the padded row), so the pixel at window column j of every
// output column ow is element ow + j / stride of phase j % stride: one loop over ow per (row, j),
// with no bounds checks and no branches. The reference loops clip each window and test every
// pixel (cifar10_quick's 3x3 / stride 2 pooling spent 12% of a training step there).
//
// Both keep Caffe's rules: max pooling takes the first maximum in row-major order (a NaN never
// wins; a window with no number above -FLT_MAX reports its first pixel), average pooling divides
// by the window's size clipped to the image plus its padding, not to the image.

#include <dl/backend.hpp>

#include <cstddef>
#include <cstdint>

namespace dl::cpu {

/// Whether the fast loops beat the reference on this geometry: 3x3 / 2 unpadded always; other
/// windows not with fewer output columns than a vector, where the per-plane setup of the phase
/// rows costs more than they save.
[[nodiscard]] bool pool_vectors_pay(const PoolGeometry& g);

/// y (out_h x out_w) = the maxima of a plane x (height x width); arg = each one's index in x.
/// The fast loops take `planes` planes one after the other (x, y and arg each a plane after the
/// other), the reference loops one; likewise below.
void max_pool_planes(const PoolGeometry& g, int planes, const float* x, float* y,
                     std::int32_t* arg);
void max_pool_plane_reference(const PoolGeometry& g, const float* x, float* y, std::int32_t* arg);

/// dx (height x width, overwritten) = the sum of the dy that chose each pixel (arg from
/// max pooling), added in row-major order of the windows in both versions.
void max_pool_planes_backward(const PoolGeometry& g, int planes, const float* dy,
                              const std::int32_t* arg, float* dx);
void max_pool_plane_backward_reference(const PoolGeometry& g, const float* dy,
                                       const std::int32_t* arg, float* dx);

/// y = the window means of a plane x.
void ave_pool_planes_forward(const PoolGeometry& g, int planes, const float* x, float* y);
void ave_pool_plane_forward_reference(const PoolGeometry& g, const float* x, float* y);

/// dx (height x width, overwritten) = each window's dy spread evenly over its pixels. Each pixel
/// sums its windows' shares in row-major order of the windows, in both versions.
void ave_pool_planes_backward(const PoolGeometry& g, int planes, const float* dy, float* dx);
void ave_pool_plane_backward_reference(const PoolGeometry& g, const float* dy, float* dx);

/// y = max(x, 0); x and y may be the same array.
void relu_forward(std::size_t n, const float* x, float* y);
/// dx = dy where y > 0, else 0; dx and dy may be the same array (in-place ReLU).
void relu_backward(std::size_t n, const float* y, const float* dy, float* dx);

} // namespace dl::cpu
