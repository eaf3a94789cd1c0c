// The CUDA backend's own kernels. Each mirrors the CPU reference named in cuda_kernels.cuh, in
// the same order of operations where a sum is involved, so the gpu tests can hold them to tight
// tolerances. Reductions run in one block with a fixed tree: results are repeatable run to run
// (no atomics).

#include "cuda/cuda_check.cuh"
#include "cuda/cuda_kernels.cuh"

#include <cfloat>

namespace dl::cuda::kernels {
namespace {

constexpr int k_threads = 256;
constexpr int k_max_blocks = 4096; // grid-stride loops cover the rest

int blocks_for(std::size_t n) {
    const std::size_t blocks = (n + k_threads - 1) / k_threads;
    return static_cast<int>(blocks < 1 ? 1 : (blocks > k_max_blocks ? k_max_blocks : blocks));
}

#define DL_GRID_LOOP(i, n)                                                                         \
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
         i += static_cast<std::size_t>(blockDim.x) * gridDim.x)

__global__ void noop_kernel() {}

__global__ void add_bias_kernel(int rows, int cols, const float* b, float* y) {
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    DL_GRID_LOOP(i, n) {
        y[i] += b[i % cols];
    }
}

__global__ void column_sums_kernel(int rows, int cols, const float* dy, float* db) {
    DL_GRID_LOOP(c, static_cast<std::size_t>(cols)) {
        float sum = 0.0F;
        for (int r = 0; r < rows; ++r) {
            sum += dy[static_cast<std::size_t>(r) * cols + c];
        }
        db[c] = sum;
    }
}

// SplitMix64's finaliser: a good 64-bit mix, enough for dropout's coin flips.
__device__ std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
}

__global__ void dropout_mask_kernel(std::size_t n, float ratio, std::uint64_t seed,
                                    const unsigned long long* counter, float* mask) {
    const std::uint64_t draw = mix(seed ^ mix(*counter + 0x9E3779B97F4A7C15ULL));
    DL_GRID_LOOP(i, n) {
        // 24 random bits -> a float in [0, 1), as uniform_real_distribution gives on the CPU.
        const float u = static_cast<float>(mix(draw + i) >> 40U) * (1.0F / 16777216.0F);
        mask[i] = u >= ratio ? 1.0F : 0.0F;
    }
}

__global__ void advance_counter_kernel(unsigned long long* counter) {
    *counter += 1ULL;
}

__global__ void masked_scale_kernel(std::size_t n, const float* x, const float* mask, float scale,
                                    float* y) {
    DL_GRID_LOOP(i, n) {
        y[i] = mask == nullptr ? x[i] * scale : x[i] * mask[i] * scale;
    }
}

__global__ void softmax_loss_kernel(int rows, int classes, const float* prob, const float* labels,
                                    float* loss) {
    __shared__ float partial[k_threads];
    float sum = 0.0F;
    for (int r = static_cast<int>(threadIdx.x); r < rows; r += k_threads) {
        const auto label = static_cast<int>(labels[r]);
        // A label outside [0, classes) would read past the row; it adds nothing instead.
        if (label >= 0 && label < classes) {
            sum -= logf(fmaxf(prob[static_cast<std::size_t>(r) * classes + label], FLT_MIN));
        }
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = k_threads / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half) {
            partial[threadIdx.x] += partial[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        loss[0] = partial[0] / static_cast<float>(rows);
    }
}

__global__ void softmax_loss_backward_kernel(int rows, int classes, const float* prob,
                                             const float* labels, float scale, float* dlogits) {
    const std::size_t n = static_cast<std::size_t>(rows) * classes;
    DL_GRID_LOOP(i, n) {
        const auto row = static_cast<std::size_t>(i / classes);
        const auto c = static_cast<int>(i % classes);
        const float d = prob[i] * scale;
        dlogits[i] = c == static_cast<int>(labels[row]) ? d - scale : d;
    }
}

__global__ void accuracy_kernel(int rows, int classes, int top_k, const float* scores,
                                const float* labels, float* out) {
    __shared__ int partial[k_threads];
    int correct = 0;
    for (int r = static_cast<int>(threadIdx.x); r < rows; r += k_threads) {
        const float* s = scores + static_cast<std::size_t>(r) * classes;
        const auto label = static_cast<int>(labels[r]);
        if (label < 0 || label >= classes) {
            continue;
        }
        const float truth = s[label];
        int better = 0;
        for (int c = 0; c < classes; ++c) {
            better += s[c] > truth ? 1 : 0;
        }
        correct += better < top_k ? 1 : 0;
    }
    partial[threadIdx.x] = correct;
    __syncthreads();
    for (int half = k_threads / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half) {
            partial[threadIdx.x] += partial[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = static_cast<float>(partial[0]) / static_cast<float>(rows);
    }
}

struct PoolDims {
    int planes, height, width, out_h, out_w, kernel, stride, pad;
};

PoolDims dims_of(const PoolGeometry& g) {
    return {g.batch * g.channels, g.height, g.width,  g.out_height(),
            g.out_width(),        g.kernel, g.stride, g.pad};
}

__global__ void max_pool_forward_kernel(PoolDims d, const float* x, float* y,
                                        std::int32_t* argmax) {
    const std::size_t n = static_cast<std::size_t>(d.planes) * d.out_h * d.out_w;
    DL_GRID_LOOP(index, n) {
        const int ow = static_cast<int>(index % d.out_w);
        const int oh = static_cast<int>(index / d.out_w % d.out_h);
        const std::size_t plane = index / d.out_w / d.out_h;
        const int h0 = max(oh * d.stride - d.pad, 0);
        const int w0 = max(ow * d.stride - d.pad, 0);
        const int h1 = min(oh * d.stride - d.pad + d.kernel, d.height);
        const int w1 = min(ow * d.stride - d.pad + d.kernel, d.width);
        const float* in = x + plane * d.height * d.width;
        float best = -FLT_MAX;
        int best_index = h0 * d.width + w0;
        for (int h = h0; h < h1; ++h) {
            for (int w = w0; w < w1; ++w) {
                if (in[h * d.width + w] > best) {
                    best = in[h * d.width + w];
                    best_index = h * d.width + w;
                }
            }
        }
        y[index] = best;
        argmax[index] = best_index;
    }
}

// Per input pixel: the sum of the gradients of the windows whose maximum it was, in output
// order (the CPU adds them in the same order).
__global__ void max_pool_backward_kernel(PoolDims d, const float* dy, const std::int32_t* argmax,
                                         float* dx) {
    const std::size_t n = static_cast<std::size_t>(d.planes) * d.height * d.width;
    DL_GRID_LOOP(index, n) {
        const int w = static_cast<int>(index % d.width);
        const int h = static_cast<int>(index / d.width % d.height);
        const std::size_t plane = index / d.width / d.height;
        const int oh0 = h + d.pad < d.kernel ? 0 : (h + d.pad - d.kernel) / d.stride + 1;
        const int oh1 = min((h + d.pad) / d.stride + 1, d.out_h);
        const int ow0 = w + d.pad < d.kernel ? 0 : (w + d.pad - d.kernel) / d.stride + 1;
        const int ow1 = min((w + d.pad) / d.stride + 1, d.out_w);
        const std::size_t offset = plane * d.out_h * d.out_w;
        float gradient = 0.0F;
        for (int oh = oh0; oh < oh1; ++oh) {
            for (int ow = ow0; ow < ow1; ++ow) {
                const std::size_t o = offset + static_cast<std::size_t>(oh) * d.out_w + ow;
                if (argmax[o] == h * d.width + w) {
                    gradient += dy[o];
                }
            }
        }
        dx[index] = gradient;
    }
}

__global__ void ave_pool_forward_kernel(PoolDims d, const float* x, float* y) {
    const std::size_t n = static_cast<std::size_t>(d.planes) * d.out_h * d.out_w;
    DL_GRID_LOOP(index, n) {
        const int ow = static_cast<int>(index % d.out_w);
        const int oh = static_cast<int>(index / d.out_w % d.out_h);
        const std::size_t plane = index / d.out_w / d.out_h;
        int h0 = oh * d.stride - d.pad;
        int w0 = ow * d.stride - d.pad;
        int h1 = min(h0 + d.kernel, d.height + d.pad);
        int w1 = min(w0 + d.kernel, d.width + d.pad);
        const auto pool_size = static_cast<float>((h1 - h0) * (w1 - w0));
        h0 = max(h0, 0);
        w0 = max(w0, 0);
        h1 = min(h1, d.height);
        w1 = min(w1, d.width);
        const float* in = x + plane * d.height * d.width;
        float sum = 0.0F;
        for (int h = h0; h < h1; ++h) {
            for (int w = w0; w < w1; ++w) {
                sum += in[h * d.width + w];
            }
        }
        y[index] = sum / pool_size;
    }
}

__global__ void ave_pool_backward_kernel(PoolDims d, const float* dy, float* dx) {
    const std::size_t n = static_cast<std::size_t>(d.planes) * d.height * d.width;
    DL_GRID_LOOP(index, n) {
        const int w = static_cast<int>(index % d.width) + d.pad;
        const int h = static_cast<int>(index / d.width % d.height) + d.pad;
        const std::size_t plane = index / d.width / d.height;
        const int oh0 = h < d.kernel ? 0 : (h - d.kernel) / d.stride + 1;
        const int oh1 = min(h / d.stride + 1, d.out_h);
        const int ow0 = w < d.kernel ? 0 : (w - d.kernel) / d.stride + 1;
        const int ow1 = min(w / d.stride + 1, d.out_w);
        const float* d_out = dy + plane * d.out_h * d.out_w;
        float gradient = 0.0F;
        for (int oh = oh0; oh < oh1; ++oh) {
            for (int ow = ow0; ow < ow1; ++ow) {
                const int hs = oh * d.stride - d.pad;
                const int ws = ow * d.stride - d.pad;
                const int he = min(hs + d.kernel, d.height + d.pad);
                const int we = min(ws + d.kernel, d.width + d.pad);
                gradient += d_out[oh * d.out_w + ow] / static_cast<float>((he - hs) * (we - ws));
            }
        }
        dx[index] = gradient;
    }
}

__global__ void sgd_update_kernel(std::size_t n, const float* step, float lr_mult, float momentum,
                                  float decay, bool nesterov, const float* g, float* history,
                                  float* w) {
    const float lr = step[0] * lr_mult;
    DL_GRID_LOOP(i, n) {
        const float grad = g[i] + decay * w[i];
        const float previous = history[i];
        const float updated = momentum * previous + lr * grad;
        history[i] = updated;
        w[i] -= nesterov ? (1.0F + momentum) * updated - momentum * previous : updated;
    }
}

__global__ void adam_update_kernel(std::size_t n, const float* step, float lr_mult, float beta1,
                                   float beta2, float epsilon, float decay, const float* g,
                                   float* m, float* v, float* w) {
    const float lr = step[0] * lr_mult;
    const float correction = step[1];
    DL_GRID_LOOP(i, n) {
        const float grad = g[i] + decay * w[i];
        const float mi = beta1 * m[i] + (1.0F - beta1) * grad;
        const float vi = beta2 * v[i] + (1.0F - beta2) * grad * grad;
        m[i] = mi;
        v[i] = vi;
        w[i] -= lr * correction * mi / (sqrtf(vi) + epsilon);
    }
}

__global__ void adaptive_update_kernel(AdaptiveRule rule, std::size_t n, const float* step,
                                       float lr_mult, float rate, float delta, float decay,
                                       const float* g, float* h, float* h2, float* w) {
    const float lr = step[0] * lr_mult;
    DL_GRID_LOOP(i, n) {
        const float grad = g[i] + decay * w[i];
        if (rule == AdaptiveRule::adadelta) {
            const float hi = rate * h[i] + (1.0F - rate) * grad * grad;
            const float update = grad * sqrtf((h2[i] + delta) / (hi + delta));
            h[i] = hi;
            h2[i] = rate * h2[i] + (1.0F - rate) * update * update;
            w[i] -= lr * update;
        } else {
            const float hi = rule == AdaptiveRule::adagrad
                                 ? h[i] + grad * grad
                                 : rate * h[i] + (1.0F - rate) * grad * grad;
            h[i] = hi;
            w[i] -= lr * grad / (sqrtf(hi) + delta);
        }
    }
}

__global__ void sgd_update_all_kernel(const UpdateTarget* targets, const float* step,
                                      float momentum, bool nesterov) {
    const UpdateTarget t = targets[blockIdx.y];
    const float lr = step[0] * t.lr_mult;
    DL_GRID_LOOP(i, t.count) {
        const float grad = t.grad[i] + t.decay * t.weights[i];
        const float previous = t.history[i];
        const float updated = momentum * previous + lr * grad;
        t.history[i] = updated;
        t.weights[i] -= nesterov ? (1.0F + momentum) * updated - momentum * previous : updated;
    }
}

__global__ void adam_update_all_kernel(const UpdateTarget* targets, const float* step, float beta1,
                                       float beta2, float epsilon) {
    const UpdateTarget t = targets[blockIdx.y];
    const float lr = step[0] * t.lr_mult;
    const float correction = step[1];
    DL_GRID_LOOP(i, t.count) {
        const float grad = t.grad[i] + t.decay * t.weights[i];
        const float mi = beta1 * t.history[i] + (1.0F - beta1) * grad;
        const float vi = beta2 * t.history2[i] + (1.0F - beta2) * grad * grad;
        t.history[i] = mi;
        t.history2[i] = vi;
        t.weights[i] -= lr * correction * mi / (sqrtf(vi) + epsilon);
    }
}

// Blocks along x for the largest target: enough to fill an H100 (132 SMs) twice over; smaller
// targets leave their extra blocks idle at once.
dim3 update_grid(int count, std::size_t largest) {
    constexpr int k_update_blocks = 264;
    const int blocks = blocks_for(largest);
    return {static_cast<unsigned>(blocks < k_update_blocks ? blocks : k_update_blocks),
            static_cast<unsigned>(count), 1U};
}

} // namespace

cudaError_t probe() {
    noop_kernel<<<1, 1>>>();
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) {
        return status;
    }
    return cudaDeviceSynchronize();
}

void add_bias(cudaStream_t stream, int rows, int cols, const float* b, float* y) {
    add_bias_kernel<<<blocks_for(static_cast<std::size_t>(rows) * cols), k_threads, 0, stream>>>(
        rows, cols, b, y);
    DL_CUDA_CHECK_LAUNCH();
}

void column_sums(cudaStream_t stream, int rows, int cols, const float* dy, float* db) {
    column_sums_kernel<<<blocks_for(static_cast<std::size_t>(cols)), k_threads, 0, stream>>>(
        rows, cols, dy, db);
    DL_CUDA_CHECK_LAUNCH();
}

void dropout_mask(cudaStream_t stream, std::size_t n, float ratio, std::uint64_t seed,
                  unsigned long long* counter, float* mask) {
    dropout_mask_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, ratio, seed, counter, mask);
    DL_CUDA_CHECK_LAUNCH();
    advance_counter_kernel<<<1, 1, 0, stream>>>(counter);
    DL_CUDA_CHECK_LAUNCH();
}

void masked_scale(cudaStream_t stream, std::size_t n, const float* x, const float* mask,
                  float scale, float* y) {
    masked_scale_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, x, mask, scale, y);
    DL_CUDA_CHECK_LAUNCH();
}

void softmax_loss(cudaStream_t stream, int rows, int classes, const float* prob,
                  const float* labels, float* loss) {
    softmax_loss_kernel<<<1, k_threads, 0, stream>>>(rows, classes, prob, labels, loss);
    DL_CUDA_CHECK_LAUNCH();
}

void softmax_loss_backward(cudaStream_t stream, int rows, int classes, const float* prob,
                           const float* labels, float scale, float* dlogits) {
    softmax_loss_backward_kernel<<<blocks_for(static_cast<std::size_t>(rows) * classes), k_threads,
                                   0, stream>>>(rows, classes, prob, labels, scale, dlogits);
    DL_CUDA_CHECK_LAUNCH();
}

void accuracy(cudaStream_t stream, int rows, int classes, int top_k, const float* scores,
              const float* labels, float* out) {
    accuracy_kernel<<<1, k_threads, 0, stream>>>(rows, classes, top_k, scores, labels, out);
    DL_CUDA_CHECK_LAUNCH();
}

void max_pool_forward(cudaStream_t stream, const PoolGeometry& g, const float* x, float* y,
                      std::int32_t* argmax) {
    const PoolDims d = dims_of(g);
    max_pool_forward_kernel<<<blocks_for(static_cast<std::size_t>(d.planes) * d.out_h * d.out_w),
                              k_threads, 0, stream>>>(d, x, y, argmax);
    DL_CUDA_CHECK_LAUNCH();
}

void max_pool_backward(cudaStream_t stream, const PoolGeometry& g, const float* dy,
                       const std::int32_t* argmax, float* dx) {
    const PoolDims d = dims_of(g);
    max_pool_backward_kernel<<<blocks_for(static_cast<std::size_t>(d.planes) * d.height * d.width),
                               k_threads, 0, stream>>>(d, dy, argmax, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void ave_pool_forward(cudaStream_t stream, const PoolGeometry& g, const float* x, float* y) {
    const PoolDims d = dims_of(g);
    ave_pool_forward_kernel<<<blocks_for(static_cast<std::size_t>(d.planes) * d.out_h * d.out_w),
                              k_threads, 0, stream>>>(d, x, y);
    DL_CUDA_CHECK_LAUNCH();
}

void ave_pool_backward(cudaStream_t stream, const PoolGeometry& g, const float* dy, float* dx) {
    const PoolDims d = dims_of(g);
    ave_pool_backward_kernel<<<blocks_for(static_cast<std::size_t>(d.planes) * d.height * d.width),
                               k_threads, 0, stream>>>(d, dy, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void sgd_update(cudaStream_t stream, std::size_t n, const float* step, float lr_mult,
                float momentum, float decay, bool nesterov, const float* g, float* history,
                float* w) {
    sgd_update_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, step, lr_mult, momentum, decay,
                                                               nesterov, g, history, w);
    DL_CUDA_CHECK_LAUNCH();
}

void adam_update(cudaStream_t stream, std::size_t n, const float* step, float lr_mult, float beta1,
                 float beta2, float epsilon, float decay, const float* g, float* m, float* v,
                 float* w) {
    adam_update_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, step, lr_mult, beta1, beta2,
                                                                epsilon, decay, g, m, v, w);
    DL_CUDA_CHECK_LAUNCH();
}

void adaptive_update(cudaStream_t stream, AdaptiveRule rule, std::size_t n, const float* step,
                     float lr_mult, float rate, float delta, float decay, const float* g, float* h,
                     float* h2, float* w) {
    adaptive_update_kernel<<<blocks_for(n), k_threads, 0, stream>>>(rule, n, step, lr_mult, rate,
                                                                    delta, decay, g, h, h2, w);
    DL_CUDA_CHECK_LAUNCH();
}

void sgd_update_all(cudaStream_t stream, const UpdateTarget* targets, int count,
                    std::size_t largest, const float* step, float momentum, bool nesterov) {
    if (count == 0) {
        return;
    }
    sgd_update_all_kernel<<<update_grid(count, largest), k_threads, 0, stream>>>(
        targets, step, momentum, nesterov);
    DL_CUDA_CHECK_LAUNCH();
}

void adam_update_all(cudaStream_t stream, const UpdateTarget* targets, int count,
                     std::size_t largest, const float* step, float beta1, float beta2,
                     float epsilon) {
    if (count == 0) {
        return;
    }
    adam_update_all_kernel<<<update_grid(count, largest), k_threads, 0, stream>>>(
        targets, step, beta1, beta2, epsilon);
    DL_CUDA_CHECK_LAUNCH();
}

} // namespace dl::cuda::kernels
