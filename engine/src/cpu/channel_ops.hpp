#pragma once
// The CPU backend's Caffe layers beyond LeNet (LRN, BatchNorm, Scale, Concat's copies, Eltwise):
// loops in Caffe's order, one function per Backend op of the same name, threaded over channels.
// The CUDA kernels in engine/src/cuda/layer_kernels.cu compute the same and name their function
// here; the tests hold both to the plain definitions in engine/reference/.

#include <dl/backend.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dl::cpu {

void lrn_forward(const ChannelGeometry& g, const LrnParams& p, const float* x, float* scale,
                 float* y);
void lrn_backward(const ChannelGeometry& g, const LrnParams& p, const float* x, const float* y,
                  const float* scale, const float* dy, float* dx);
void lrn_within_forward(const PoolGeometry& g, const LrnParams& p, const float* x, float* scale,
                        float* y);
void lrn_within_backward(const PoolGeometry& g, const LrnParams& p, const float* x, const float* y,
                         const float* scale, const float* dy, float* dx);
void pointwise_forward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                       float* y);
void pointwise_backward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                        const float* y, const float* dy, float* dx);
void euclidean_loss_forward(int rows, std::size_t n, const float* a, const float* b, float* diff,
                            float* loss);
void sigmoid_cross_entropy_forward(int rows, std::size_t n, const float* x, const float* t,
                                   float* loss);
void hinge_loss_forward(int rows, int classes, bool l2, const float* scores, const float* labels,
                        float* diff, float* loss);
void hinge_loss_backward(int rows, int classes, bool l2, float scale, const float* labels,
                         const float* diff, float* dx);
void contrastive_loss_forward(int rows, int dim, float margin, bool legacy, const float* a,
                              const float* b, const float* y, float* diff, float* dist_sq,
                              float* loss);
void contrastive_loss_backward(int rows, int dim, float margin, bool legacy, float scale,
                               const float* y, const float* diff, const float* dist_sq, float* dx);
void sigmoid_cross_entropy_backward(std::size_t n, float scale, const float* x, const float* t,
                                    float* dx);
/// The channels [first, last) of a call: the backend hands each task its own range, and each
/// channel's sums are taken by one task in one order, whatever the thread count.
struct Channels {
    int first = 0;
    int last = 0;
};

/// `running_factor` is read here; the backend advances it once per call, after every range.
void batch_norm_forward(const ChannelGeometry& g, Channels range, bool use_global, float eps,
                        float moving_average_fraction, const float* x, float* running_mean,
                        float* running_var, float running_factor, float* inv_std, float* y);
void batch_norm_backward(const ChannelGeometry& g, Channels range, bool use_global, const float* y,
                         const float* inv_std, const float* dy, float* dx);
void prelu_forward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                   float* y);
void prelu_backward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                    const float* dy, float* dx, float* dslope);
void scale_forward(const ChannelGeometry& g, Channels range, const float* x, const float* gamma,
                   const float* beta, float* y);
void scale_backward(const ChannelGeometry& g, Channels range, const float* x, const float* gamma,
                    const float* dy, float* dx, float* dgamma, float* dbeta);
void copy_blocks(int rows, std::size_t block, const float* src, std::size_t src_stride, float* dst,
                 std::size_t dst_stride);
void eltwise_forward(EltwiseOp op, std::size_t n, const std::vector<const float*>& x,
                     const std::vector<float>& coeffs, float* y, std::int32_t* mask);
void eltwise_backward(EltwiseOp op, std::size_t n, int index, const std::vector<const float*>& x,
                      float coeff, const float* dy, const std::int32_t* mask, float* dx);

} // namespace dl::cpu
