#pragma once
// Kernels of the Caffe layers beyond LeNet: LRN, BatchNorm, Scale, Eltwise (Concat is a 2-D
// memcpy). Each computes what the CPU reference of the same name in engine/src/cpu/channel_ops.cpp
// computes, with per-channel sums in double in a fixed order (one block per channel, no atomics),
// as the reference does; the gpu tests (GpuLayers) compare the two. All launch on the given
// stream and never synchronize (graph-capturable).

#include <dl/backend.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dl::cuda::kernels {

// CPU: cpu::lrn_forward / lrn_backward.
void lrn_forward(cudaStream_t stream, const ChannelGeometry& g, const LrnParams& p, const float* x,
                 float* scale, float* y);
void lrn_backward(cudaStream_t stream, const ChannelGeometry& g, const LrnParams& p, const float* x,
                  const float* y, const float* scale, const float* dy, float* dx);
// CPU: cpu::lrn_within_forward / lrn_within_backward.
void lrn_within_forward(cudaStream_t stream, const PoolGeometry& g, const LrnParams& p,
                        const float* x, float* scale, float* y);
void lrn_within_backward(cudaStream_t stream, const PoolGeometry& g, const LrnParams& p,
                         const float* x, const float* y, const float* scale, const float* dy,
                         float* dx);
// CPU: cpu::euclidean_loss_forward, sigmoid_cross_entropy_forward / _backward; scaled_copy.
void euclidean_loss_forward(cudaStream_t stream, int rows, std::size_t n, const float* a,
                            const float* b, float* diff, float* loss);
void scaled_copy(cudaStream_t stream, std::size_t n, float scale, const float* x, float* y);
// CPU: cpu::prelu_forward / prelu_backward.
void prelu_forward(cudaStream_t stream, const ChannelGeometry& g, bool shared, const float* x,
                   const float* slope, float* y);
void prelu_backward(cudaStream_t stream, const ChannelGeometry& g, bool shared, const float* x,
                    const float* slope, const float* dy, float* dx, float* dslope);
// CPU: cpu::hinge_loss_forward / _backward.
void hinge_loss_forward(cudaStream_t stream, int rows, int classes, bool l2, const float* scores,
                        const float* labels, float* diff, float* loss);
void hinge_loss_backward(cudaStream_t stream, int rows, int classes, bool l2, float scale,
                         const float* labels, const float* diff, float* dx);
// CPU: cpu::contrastive_loss_forward / _backward.
void contrastive_loss_forward(cudaStream_t stream, int rows, int dim, float margin, bool legacy,
                              const float* a, const float* b, const float* y, float* diff,
                              float* dist_sq, float* loss);
void contrastive_loss_backward(cudaStream_t stream, int rows, int dim, float margin, bool legacy,
                               float scale, const float* y, const float* diff, const float* dist_sq,
                               float* dx);
void sigmoid_cross_entropy_forward(cudaStream_t stream, int rows, std::size_t n, const float* x,
                                   const float* t, float* loss);
void sigmoid_cross_entropy_backward(cudaStream_t stream, std::size_t n, float scale, const float* x,
                                    const float* t, float* dx);
// CPU: cpu::pointwise_forward / pointwise_backward.
void pointwise_forward(cudaStream_t stream, Pointwise f, const PointwiseParams& p, std::size_t n,
                       const float* x, float* y);
void pointwise_backward(cudaStream_t stream, Pointwise f, const PointwiseParams& p, std::size_t n,
                        const float* x, const float* y, const float* dy, float* dx);
// CPU: cpu::batch_norm_forward / batch_norm_backward.
void batch_norm_forward(cudaStream_t stream, const ChannelGeometry& g, bool use_global, float eps,
                        float moving_average_fraction, const float* x, float* running_mean,
                        float* running_var, float* running_factor, float* inv_std, float* y);
void batch_norm_backward(cudaStream_t stream, const ChannelGeometry& g, bool use_global,
                         const float* y, const float* inv_std, const float* dy, float* dx);
// CPU: cpu::scale_forward / scale_backward.
void scale_forward(cudaStream_t stream, const ChannelGeometry& g, const float* x,
                   const float* gamma, const float* beta, float* y);
void scale_backward(cudaStream_t stream, const ChannelGeometry& g, const float* x,
                    const float* gamma, const float* dy, float* dx, float* dgamma, float* dbeta);
// CPU: cpu::eltwise_forward / eltwise_backward; one launch per input.
void eltwise_forward(cudaStream_t stream, EltwiseOp op, std::size_t n, const float* const* x,
                     int inputs, const float* coeffs, float* y, std::int32_t* mask);
void eltwise_backward(cudaStream_t stream, EltwiseOp op, std::size_t n, int index,
                      const float* const* x, int inputs, float coeff, const float* dy,
                      const std::int32_t* mask, float* dx);

} // namespace dl::cuda::kernels
