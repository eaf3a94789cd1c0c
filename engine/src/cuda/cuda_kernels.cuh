#pragma once
// The CUDA backend's own kernels (the rest is cuDNN and cuBLAS). Each one computes what the
// CPU reference in engine/src/cpu/cpu_backend.cpp computes, named in its comment; the gpu tests
// compare the two. All launch on the given stream and never synchronize (graph-capturable).

#include <dl/backend.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dl::cuda::kernels {

/// cudaSuccess when this binary holds code the current GPU can run.
cudaError_t probe();

// InnerProduct: y[r][o] += b[o] (CPU: inner_product_forward's bias loop).
void add_bias(cudaStream_t stream, int rows, int cols, const float* b, float* y);
// db[c] = sum over r of dy[r][c], rows in order (CPU: inner_product_backward's db loop).
void column_sums(cudaStream_t stream, int rows, int cols, const float* dy, float* db);

// Dropout (CPU: dropout_mask, masked_scale). The mask hashes (seed, *counter, index); a second
// launch then advances the counter, so each replay of a recorded step draws a new mask.
void dropout_mask(cudaStream_t stream, std::size_t n, float ratio, std::uint64_t seed,
                  unsigned long long* counter, float* mask);
void masked_scale(cudaStream_t stream, std::size_t n, const float* x, const float* mask,
                  float scale, float* y);

// SoftmaxWithLoss from cuDNN's probabilities: loss[0] = mean of -log(max(p[label], FLT_MIN))
// in one block, in a fixed order (CPU: softmax_loss_forward); dlogits = scale * (p - onehot)
// (CPU: softmax_loss_backward).
void softmax_loss(cudaStream_t stream, int rows, int classes, const float* prob,
                  const float* labels, float* loss);
void softmax_loss_backward(cudaStream_t stream, int rows, int classes, const float* prob,
                           const float* labels, float scale, float* dlogits);
// Top-k accuracy, one block (CPU: accuracy).
void accuracy(cudaStream_t stream, int rows, int classes, int top_k, const float* scores,
              const float* labels, float* out);

// Caffe's pooling kernels, for what cuDNN does not do the Caffe way: ceil-mode output sizes
// and average pooling's divisor (CPU: max_pool_forward/backward, ave_pool).
void max_pool_forward(cudaStream_t stream, const PoolGeometry& g, const float* x, float* y,
                      std::int32_t* argmax);
void max_pool_backward(cudaStream_t stream, const PoolGeometry& g, const float* dy,
                       const std::int32_t* argmax, float* dx);
void ave_pool_forward(cudaStream_t stream, const PoolGeometry& g, const float* x, float* y);
void ave_pool_backward(cudaStream_t stream, const PoolGeometry& g, const float* dy, float* dx);

// Fused solver updates, one pass over each parameter; step[0] is the learning rate, step[1]
// Adam's bias correction (CPU: sgd_update, adam_update).
void sgd_update(cudaStream_t stream, std::size_t n, const float* step, float lr_mult,
                float momentum, float decay, bool nesterov, const float* g, float* history,
                float* w);
void adam_update(cudaStream_t stream, std::size_t n, const float* step, float lr_mult, float beta1,
                 float beta2, float epsilon, float decay, const float* g, float* m, float* v,
                 float* w);
// CPU: adaptive_update (AdaGrad, RMSProp, AdaDelta).
void adaptive_update(cudaStream_t stream, AdaptiveRule rule, std::size_t n, const float* step,
                     float lr_mult, float rate, float delta, float decay, const float* g, float* h,
                     float* h2, float* w);

// The same over every parameter in one launch: blockIdx.y picks the target (a device copy of
// the list), blocks along x stride over its values (CPU: sgd_update / adam_update per target).
void sgd_update_all(cudaStream_t stream, const UpdateTarget* targets, int count,
                    std::size_t largest, const float* step, float momentum, bool nesterov);
void adam_update_all(cudaStream_t stream, const UpdateTarget* targets, int count,
                     std::size_t largest, const float* step, float beta1, float beta2,
                     float epsilon);

} // namespace dl::cuda::kernels
