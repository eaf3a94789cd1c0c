// Kernels of LRN, BatchNorm, Scale and Eltwise (layer_kernels.cuh). The CPU reference of each is
// the function of the same name in engine/src/cpu/channel_ops.cpp; comments here say only where
// the GPU's order of work differs from it.

#include "cuda/cuda_check.cuh"
#include "cuda/layer_kernels.cuh"

namespace dl::cuda::kernels {
namespace {

constexpr int k_threads = 256;
constexpr int k_max_blocks = 4096;

int blocks_for(std::size_t n) {
    const std::size_t blocks = (n + k_threads - 1) / k_threads;
    return static_cast<int>(blocks < 1 ? 1 : (blocks > k_max_blocks ? k_max_blocks : blocks));
}

#define DL_LAYER_GRID_LOOP(i, n)                                                                   \
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
         i += static_cast<std::size_t>(blockDim.x) * gridDim.x)

struct Dims {
    int batch;
    int channels;
    int spatial;
};

Dims dims_of(const ChannelGeometry& g) {
    return Dims{g.batch, g.channels, g.spatial};
}

__device__ std::size_t offset(const Dims& d, int n, int c) {
    return (static_cast<std::size_t>(n) * d.channels + c) * d.spatial;
}

// The sum over one block's threads of `value`, in a fixed tree; every thread gets the total.
__device__ double block_sum(double value, double* shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int width = k_threads / 2; width > 0; width /= 2) {
        if (static_cast<int>(threadIdx.x) < width) {
            shared[threadIdx.x] += shared[threadIdx.x + width];
        }
        __syncthreads();
    }
    const double total = shared[0];
    __syncthreads();
    return total;
}

// --- LRN: one thread per value, the window summed in channel order as on the CPU -------------

__global__ void lrn_forward_kernel(Dims d, LrnParams p, const float* x, float* scale, float* y) {
    const int before = (p.size - 1) / 2;
    const int after = p.size - 1 - before;
    const std::size_t total = static_cast<std::size_t>(d.batch) * d.channels * d.spatial;
    DL_LAYER_GRID_LOOP(i, total) {
        const int s = static_cast<int>(i % d.spatial);
        const int c = static_cast<int>(i / d.spatial % d.channels);
        const int n = static_cast<int>(i / d.spatial / d.channels);
        float sum = 0.0F;
        for (int other = max(0, c - before); other <= min(d.channels - 1, c + after); ++other) {
            const float v = x[offset(d, n, other) + s];
            sum += v * v;
        }
        scale[i] = p.k + p.alpha / static_cast<float>(p.size) * sum;
        y[i] = x[i] * powf(scale[i], -p.beta);
    }
}

__global__ void lrn_backward_kernel(Dims d, LrnParams p, const float* x, const float* y,
                                    const float* scale, const float* dy, float* dx) {
    const int before = (p.size - 1) / 2;
    const int after = p.size - 1 - before;
    const float coefficient = 2.0F * p.alpha * p.beta / static_cast<float>(p.size);
    const std::size_t total = static_cast<std::size_t>(d.batch) * d.channels * d.spatial;
    DL_LAYER_GRID_LOOP(i, total) {
        const int s = static_cast<int>(i % d.spatial);
        const int c = static_cast<int>(i / d.spatial % d.channels);
        const int n = static_cast<int>(i / d.spatial / d.channels);
        float sum = 0.0F;
        for (int other = max(0, c - after); other <= min(d.channels - 1, c + before); ++other) {
            const std::size_t o = offset(d, n, other) + s;
            sum += dy[o] * y[o] / scale[o];
        }
        dx[i] = dy[i] * powf(scale[i], -p.beta) - coefficient * x[i] * sum;
    }
}

// --- LRN within channels: one thread per value, the square summed row by row as on the CPU --

struct Square {
    int images; // batch x channels
    int height;
    int width;
    int pad;
};

// The sum of f(o) over the offsets o of the square centred on value i of its plane.
template <typename F> __device__ float square_sum(const Square& q, std::size_t i, F f) {
    const std::size_t plane = static_cast<std::size_t>(q.height) * q.width;
    const std::size_t base = i / plane * plane;
    const int h = static_cast<int>(i % plane / q.width);
    const int w = static_cast<int>(i % q.width);
    float sum = 0.0F;
    for (int hh = max(0, h - q.pad); hh <= min(q.height - 1, h + q.pad); ++hh) {
        for (int ww = max(0, w - q.pad); ww <= min(q.width - 1, w + q.pad); ++ww) {
            sum += f(base + static_cast<std::size_t>(hh) * q.width + ww);
        }
    }
    return sum;
}

__global__ void lrn_within_forward_kernel(Square q, LrnParams p, const float* x, float* scale,
                                          float* y) {
    const std::size_t total = static_cast<std::size_t>(q.images) * q.height * q.width;
    const float alpha_over_area = p.alpha / static_cast<float>(p.size * p.size);
    DL_LAYER_GRID_LOOP(i, total) {
        const float sum = square_sum(q, i, [x](std::size_t o) { return x[o] * x[o]; });
        scale[i] = 1.0F + alpha_over_area * sum;
        y[i] = x[i] * powf(scale[i], -p.beta);
    }
}

__global__ void lrn_within_backward_kernel(Square q, LrnParams p, const float* x, const float* y,
                                           const float* scale, const float* dy, float* dx) {
    const std::size_t total = static_cast<std::size_t>(q.images) * q.height * q.width;
    const float coefficient = 2.0F * p.alpha * p.beta / static_cast<float>(p.size * p.size);
    DL_LAYER_GRID_LOOP(i, total) {
        const float sum =
            square_sum(q, i, [dy, y, scale](std::size_t o) { return dy[o] * y[o] / scale[o]; });
        dx[i] = dy[i] * powf(scale[i], -p.beta) - coefficient * x[i] * sum;
    }
}

Square square_of(const PoolGeometry& g) {
    return Square{g.batch * g.channels, g.height, g.width, g.pad};
}

// --- EuclideanLoss and SigmoidCrossEntropyLoss: one block sums the loss in double -----------

__global__ void euclidean_loss_kernel(int rows, std::size_t n, const float* a, const float* b,
                                      float* diff, float* loss) {
    __shared__ double shared[k_threads];
    double sum = 0.0;
    for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = a[i] - b[i];
        diff[i] = d;
        sum += static_cast<double>(d) * d;
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        loss[0] = static_cast<float>(total / rows / 2.0);
    }
}

// One block: the hinges, and their sum in a fixed order.
__global__ void hinge_loss_kernel(int rows, int classes, bool l2, const float* scores,
                                  const float* labels, float* diff, float* loss) {
    __shared__ double shared[k_threads];
    const std::size_t n = static_cast<std::size_t>(rows) * classes;
    double sum = 0.0;
    for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
        const auto label = static_cast<int>(labels[i / classes]);
        const bool own = static_cast<int>(i % classes) == label;
        const float d = fmaxf(0.0F, 1.0F + (own ? -scores[i] : scores[i]));
        diff[i] = d;
        sum += l2 ? static_cast<double>(d) * d : d;
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        loss[0] = static_cast<float>(total / rows);
    }
}

__global__ void hinge_backward_kernel(std::size_t n, int classes, bool l2, float scale,
                                      const float* labels, const float* diff, float* dx) {
    DL_LAYER_GRID_LOOP(i, n) {
        const bool own = static_cast<int>(i % classes) == static_cast<int>(labels[i / classes]);
        const float g = l2 ? 2.0F * diff[i] : (diff[i] > 0.0F ? 1.0F : 0.0F);
        dx[i] = scale * (own ? -g : g);
    }
}

// One block per pair for its squared distance, then one block for the loss over the pairs.
__global__ void contrastive_distance_kernel(int dim, const float* a, const float* b, float* diff,
                                            float* dist_sq) {
    __shared__ double shared[k_threads];
    const std::size_t row = blockIdx.x;
    double sum = 0.0;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        const std::size_t i = row * dim + j;
        const float d = a[i] - b[i];
        diff[i] = d;
        sum += static_cast<double>(d) * d;
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        dist_sq[row] = static_cast<float>(total);
    }
}

__global__ void contrastive_loss_kernel(int rows, float margin, bool legacy, const float* y,
                                        const float* dist_sq, float* loss) {
    __shared__ double shared[k_threads];
    double sum = 0.0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        if (static_cast<int>(y[r]) != 0) {
            sum += dist_sq[r];
        } else if (legacy) {
            sum += fmaxf(margin - dist_sq[r], 0.0F);
        } else {
            const float gap = fmaxf(margin - sqrtf(dist_sq[r]), 0.0F);
            sum += static_cast<double>(gap) * gap;
        }
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        loss[0] = static_cast<float>(total / rows / 2.0);
    }
}

__global__ void contrastive_backward_kernel(std::size_t n, int dim, float margin, bool legacy,
                                            float scale, const float* y, const float* diff,
                                            const float* dist_sq, float* dx) {
    const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (i >= n) {
        return;
    }
    const std::size_t r = i / dim;
    float factor = scale;
    if (static_cast<int>(y[r]) == 0) {
        const float dist = sqrtf(dist_sq[r]);
        const float gap = legacy ? margin - dist_sq[r] : margin - dist;
        factor = gap <= 0.0F ? 0.0F : legacy ? -scale : -scale * gap / (dist + 1e-4F);
    }
    dx[i] = factor * diff[i];
}

__global__ void sigmoid_cross_entropy_kernel(int rows, std::size_t n, const float* x,
                                             const float* t, float* loss) {
    __shared__ double shared[k_threads];
    double sum = 0.0;
    for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float positive = x[i] >= 0.0F ? 1.0F : 0.0F;
        sum -= x[i] * (t[i] - positive) - log1pf(expf(x[i] - 2.0F * x[i] * positive));
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        loss[0] = static_cast<float>(total / rows);
    }
}

__global__ void sigmoid_cross_entropy_backward_kernel(std::size_t n, float scale, const float* x,
                                                      const float* t, float* dx) {
    DL_LAYER_GRID_LOOP(i, n) {
        dx[i] = scale * (1.0F / (1.0F + expf(-x[i])) - t[i]);
    }
}

__global__ void scaled_copy_kernel(std::size_t n, float scale, const float* x, float* y) {
    DL_LAYER_GRID_LOOP(i, n) {
        y[i] = scale * x[i];
    }
}

// --- AbsVal, BNLL, ELU, Power: one thread per value, the CPU's formulas ---------------------

__global__ void pointwise_forward_kernel(Pointwise f, PointwiseParams p, std::size_t n,
                                         const float* x, float* y) {
    DL_LAYER_GRID_LOOP(i, n) {
        const float v = x[i];
        switch (f) {
        case Pointwise::absval:
            y[i] = fabsf(v);
            break;
        case Pointwise::bnll:
            y[i] = v > 0.0F ? v + log1pf(expf(-v)) : log1pf(expf(v));
            break;
        case Pointwise::elu:
            y[i] = v > 0.0F ? v : p.alpha * expm1f(v);
            break;
        case Pointwise::power:
            y[i] = powf(p.shift + p.scale * v, p.power);
            break;
        }
    }
}

__global__ void pointwise_backward_kernel(Pointwise f, PointwiseParams p, std::size_t n,
                                          const float* x, const float* y, const float* dy,
                                          float* dx) {
    DL_LAYER_GRID_LOOP(i, n) {
        const float v = x[i];
        switch (f) {
        case Pointwise::absval:
            dx[i] = v > 0.0F ? dy[i] : v < 0.0F ? -dy[i] : 0.0F;
            break;
        case Pointwise::bnll: {
            const float e = expf(fminf(v, 50.0F)); // Caffe's kBNLL_THRESHOLD
            dx[i] = dy[i] * e / (e + 1.0F);
            break;
        }
        case Pointwise::elu:
            dx[i] = v > 0.0F ? dy[i] : dy[i] * (y[i] + p.alpha);
            break;
        case Pointwise::power:
            dx[i] = p.power == 0.0F || p.scale == 0.0F ? 0.0F
                    : p.power == 1.0F
                        ? dy[i] * p.scale
                        : dy[i] * p.power * p.scale * powf(p.shift + p.scale * v, p.power - 1.0F);
            break;
        }
    }
}

// --- BatchNorm: one block per channel --------------------------------------------------------

__global__ void batch_norm_forward_kernel(Dims d, bool use_global, float eps, float maf,
                                          const float* x, float* running_mean, float* running_var,
                                          const float* running_factor, float* inv_std, float* y) {
    __shared__ double shared[k_threads];
    const int c = static_cast<int>(blockIdx.x);
    const std::size_t per_channel = static_cast<std::size_t>(d.batch) * d.spatial;
    const double m = static_cast<double>(per_channel);
    float mean = 0.0F;
    float var = 0.0F;
    if (use_global) {
        const float factor = running_factor[0] == 0.0F ? 0.0F : 1.0F / running_factor[0];
        mean = running_mean[c] * factor;
        var = running_var[c] * factor;
    } else {
        double sum = 0.0;
        for (std::size_t j = threadIdx.x; j < per_channel; j += k_threads) {
            sum += x[offset(d, static_cast<int>(j / d.spatial), c) + j % d.spatial];
        }
        mean = static_cast<float>(block_sum(sum, shared) / m);
        double squares = 0.0;
        for (std::size_t j = threadIdx.x; j < per_channel; j += k_threads) {
            const double v =
                x[offset(d, static_cast<int>(j / d.spatial), c) + j % d.spatial] - mean;
            squares += v * v;
        }
        var = static_cast<float>(block_sum(squares, shared) / m);
        if (threadIdx.x == 0) {
            const float correction = m > 1.0 ? static_cast<float>(m / (m - 1.0)) : 1.0F;
            running_mean[c] = mean + maf * running_mean[c];
            running_var[c] = var * correction + maf * running_var[c];
        }
    }
    const float inv = 1.0F / sqrtf(var + eps);
    if (threadIdx.x == 0) {
        inv_std[c] = inv;
    }
    // Every thread has read its x for the sums above (block_sum synchronizes): y may be x.
    for (std::size_t j = threadIdx.x; j < per_channel; j += k_threads) {
        const std::size_t o = offset(d, static_cast<int>(j / d.spatial), c) + j % d.spatial;
        y[o] = (x[o] - mean) * inv;
    }
}

// After every channel has read the old factor.
__global__ void batch_norm_factor_kernel(float maf, float* running_factor) {
    running_factor[0] = running_factor[0] * maf + 1.0F;
}

__global__ void batch_norm_backward_kernel(Dims d, bool use_global, const float* y,
                                           const float* inv_std, const float* dy, float* dx) {
    __shared__ double shared[k_threads];
    const int c = static_cast<int>(blockIdx.x);
    const std::size_t per_channel = static_cast<std::size_t>(d.batch) * d.spatial;
    const double m = static_cast<double>(per_channel);
    float mean_dy = 0.0F;
    float mean_dy_y = 0.0F;
    if (!use_global) {
        double sum = 0.0;
        double sum_y = 0.0;
        for (std::size_t j = threadIdx.x; j < per_channel; j += k_threads) {
            const std::size_t o = offset(d, static_cast<int>(j / d.spatial), c) + j % d.spatial;
            sum += dy[o];
            sum_y += static_cast<double>(dy[o]) * y[o];
        }
        mean_dy = static_cast<float>(block_sum(sum, shared) / m);
        mean_dy_y = static_cast<float>(block_sum(sum_y, shared) / m);
    }
    for (std::size_t j = threadIdx.x; j < per_channel; j += k_threads) {
        const std::size_t o = offset(d, static_cast<int>(j / d.spatial), c) + j % d.spatial;
        dx[o] = (dy[o] - mean_dy - y[o] * mean_dy_y) * inv_std[c];
    }
}

// --- Scale -----------------------------------------------------------------------------------

__global__ void scale_forward_kernel(Dims d, const float* x, const float* gamma, const float* beta,
                                     float* y) {
    const std::size_t total = static_cast<std::size_t>(d.batch) * d.channels * d.spatial;
    DL_LAYER_GRID_LOOP(i, total) {
        const auto c = static_cast<int>(i / d.spatial % d.channels);
        y[i] = x[i] * gamma[c] + (beta != nullptr ? beta[c] : 0.0F);
    }
}

__global__ void prelu_forward_kernel(Dims d, bool shared, const float* x, const float* slope,
                                     float* y) {
    const std::size_t total = static_cast<std::size_t>(d.batch) * d.channels * d.spatial;
    DL_LAYER_GRID_LOOP(i, total) {
        const float a = slope[shared ? 0 : static_cast<int>(i / d.spatial % d.channels)];
        y[i] = x[i] > 0.0F ? x[i] : a * x[i];
    }
}

// One block per channel (one block for all when the slope is shared): the sum of dy * x where
// x <= 0, in a fixed order.
__global__ void prelu_slope_grad_kernel(Dims d, bool shared, const float* x, const float* dy,
                                        float* dslope) {
    __shared__ double shared_sum[k_threads];
    const int c = static_cast<int>(blockIdx.x);
    const std::size_t per_channel = static_cast<std::size_t>(d.batch) * d.spatial;
    const std::size_t count = shared ? per_channel * d.channels : per_channel;
    double sum = 0.0;
    for (std::size_t j = threadIdx.x; j < count; j += k_threads) {
        const std::size_t o =
            shared ? j : offset(d, static_cast<int>(j / d.spatial), c) + j % d.spatial;
        if (x[o] <= 0.0F) {
            sum += static_cast<double>(dy[o]) * x[o];
        }
    }
    const double total = block_sum(sum, shared_sum);
    if (threadIdx.x == 0) {
        dslope[c] = static_cast<float>(total);
    }
}

__global__ void prelu_input_grad_kernel(Dims d, bool shared, const float* x, const float* slope,
                                        const float* dy, float* dx) {
    const std::size_t total = static_cast<std::size_t>(d.batch) * d.channels * d.spatial;
    DL_LAYER_GRID_LOOP(i, total) {
        const float a = slope[shared ? 0 : static_cast<int>(i / d.spatial % d.channels)];
        dx[i] = x[i] > 0.0F ? dy[i] : dy[i] * a;
    }
}

__global__ void scale_param_grad_kernel(Dims d, const float* x, const float* dy, float* dgamma,
                                        float* dbeta) {
    __shared__ double shared[k_threads];
    const int c = static_cast<int>(blockIdx.x);
    const std::size_t per_channel = static_cast<std::size_t>(d.batch) * d.spatial;
    double sum_x = 0.0;
    double sum = 0.0;
    for (std::size_t j = threadIdx.x; j < per_channel; j += k_threads) {
        const std::size_t o = offset(d, static_cast<int>(j / d.spatial), c) + j % d.spatial;
        sum_x += static_cast<double>(dy[o]) * x[o];
        sum += dy[o];
    }
    const double total_x = block_sum(sum_x, shared);
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        dgamma[c] = static_cast<float>(total_x);
        if (dbeta != nullptr) {
            dbeta[c] = static_cast<float>(total);
        }
    }
}

__global__ void scale_input_grad_kernel(Dims d, const float* gamma, const float* dy, float* dx) {
    const std::size_t total = static_cast<std::size_t>(d.batch) * d.channels * d.spatial;
    DL_LAYER_GRID_LOOP(i, total) {
        dx[i] = dy[i] * gamma[i / d.spatial % d.channels];
    }
}

// --- Eltwise: the first launch writes y from inputs 0 and 1, each later one folds in one more ---

__global__ void eltwise_first_kernel(EltwiseOp op, std::size_t n, const float* a, const float* b,
                                     float ca, float cb, float* y, std::int32_t* mask) {
    DL_LAYER_GRID_LOOP(i, n) {
        switch (op) {
        case EltwiseOp::sum:
            y[i] = ca * a[i] + cb * b[i];
            break;
        case EltwiseOp::prod:
            y[i] = a[i] * b[i];
            break;
        case EltwiseOp::max:
            y[i] = a[i] > b[i] ? a[i] : b[i];
            mask[i] = a[i] > b[i] ? 0 : 1;
            break;
        }
    }
}

__global__ void eltwise_next_kernel(EltwiseOp op, std::size_t n, const float* b, float cb,
                                    std::int32_t index, float* y, std::int32_t* mask) {
    DL_LAYER_GRID_LOOP(i, n) {
        switch (op) {
        case EltwiseOp::sum:
            y[i] += cb * b[i];
            break;
        case EltwiseOp::prod:
            y[i] *= b[i];
            break;
        case EltwiseOp::max:
            if (b[i] > y[i]) {
                y[i] = b[i];
                mask[i] = index;
            }
            break;
        }
    }
}

__global__ void eltwise_grad_kernel(EltwiseOp op, std::size_t n, int index, float coeff,
                                    const float* dy, const std::int32_t* mask, float* dx) {
    DL_LAYER_GRID_LOOP(i, n) {
        switch (op) {
        case EltwiseOp::sum:
            dx[i] = coeff * dy[i];
            break;
        case EltwiseOp::prod:
            dx[i] = dy[i]; // the other inputs are multiplied in by multiply_kernel
            break;
        case EltwiseOp::max:
            dx[i] = mask[i] == index ? dy[i] : 0.0F;
            break;
        }
    }
}

__global__ void multiply_kernel(std::size_t n, const float* b, float* dx) {
    DL_LAYER_GRID_LOOP(i, n) {
        dx[i] *= b[i];
    }
}

} // namespace

void lrn_forward(cudaStream_t stream, const ChannelGeometry& g, const LrnParams& p, const float* x,
                 float* scale, float* y) {
    lrn_forward_kernel<<<blocks_for(g.count()), k_threads, 0, stream>>>(dims_of(g), p, x, scale, y);
    DL_CUDA_CHECK_LAUNCH();
}

void lrn_backward(cudaStream_t stream, const ChannelGeometry& g, const LrnParams& p, const float* x,
                  const float* y, const float* scale, const float* dy, float* dx) {
    lrn_backward_kernel<<<blocks_for(g.count()), k_threads, 0, stream>>>(dims_of(g), p, x, y, scale,
                                                                         dy, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void lrn_within_forward(cudaStream_t stream, const PoolGeometry& g, const LrnParams& p,
                        const float* x, float* scale, float* y) {
    const std::size_t total = static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width;
    lrn_within_forward_kernel<<<blocks_for(total), k_threads, 0, stream>>>(square_of(g), p, x,
                                                                           scale, y);
    DL_CUDA_CHECK_LAUNCH();
}

void lrn_within_backward(cudaStream_t stream, const PoolGeometry& g, const LrnParams& p,
                         const float* x, const float* y, const float* scale, const float* dy,
                         float* dx) {
    const std::size_t total = static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width;
    lrn_within_backward_kernel<<<blocks_for(total), k_threads, 0, stream>>>(square_of(g), p, x, y,
                                                                            scale, dy, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void euclidean_loss_forward(cudaStream_t stream, int rows, std::size_t n, const float* a,
                            const float* b, float* diff, float* loss) {
    euclidean_loss_kernel<<<1, k_threads, 0, stream>>>(rows, n, a, b, diff, loss);
    DL_CUDA_CHECK_LAUNCH();
}

void prelu_forward(cudaStream_t stream, const ChannelGeometry& g, bool shared, const float* x,
                   const float* slope, float* y) {
    prelu_forward_kernel<<<blocks_for(g.count()), k_threads, 0, stream>>>(dims_of(g), shared, x,
                                                                          slope, y);
    DL_CUDA_CHECK_LAUNCH();
}

void prelu_backward(cudaStream_t stream, const ChannelGeometry& g, bool shared, const float* x,
                    const float* slope, const float* dy, float* dx, float* dslope) {
    // The slopes' gradient first: dx may overwrite dy, and the stream orders the two launches.
    prelu_slope_grad_kernel<<<shared ? 1 : g.channels, k_threads, 0, stream>>>(dims_of(g), shared,
                                                                               x, dy, dslope);
    DL_CUDA_CHECK_LAUNCH();
    if (dx != nullptr) {
        prelu_input_grad_kernel<<<blocks_for(g.count()), k_threads, 0, stream>>>(dims_of(g), shared,
                                                                                 x, slope, dy, dx);
        DL_CUDA_CHECK_LAUNCH();
    }
}

void hinge_loss_forward(cudaStream_t stream, int rows, int classes, bool l2, const float* scores,
                        const float* labels, float* diff, float* loss) {
    hinge_loss_kernel<<<1, k_threads, 0, stream>>>(rows, classes, l2, scores, labels, diff, loss);
    DL_CUDA_CHECK_LAUNCH();
}

void hinge_loss_backward(cudaStream_t stream, int rows, int classes, bool l2, float scale,
                         const float* labels, const float* diff, float* dx) {
    const std::size_t n = static_cast<std::size_t>(rows) * classes;
    hinge_backward_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, classes, l2, scale, labels,
                                                                   diff, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void contrastive_loss_forward(cudaStream_t stream, int rows, int dim, float margin, bool legacy,
                              const float* a, const float* b, const float* y, float* diff,
                              float* dist_sq, float* loss) {
    contrastive_distance_kernel<<<rows, k_threads, 0, stream>>>(dim, a, b, diff, dist_sq);
    DL_CUDA_CHECK_LAUNCH();
    contrastive_loss_kernel<<<1, k_threads, 0, stream>>>(rows, margin, legacy, y, dist_sq, loss);
    DL_CUDA_CHECK_LAUNCH();
}

void contrastive_loss_backward(cudaStream_t stream, int rows, int dim, float margin, bool legacy,
                               float scale, const float* y, const float* diff, const float* dist_sq,
                               float* dx) {
    const std::size_t n = static_cast<std::size_t>(rows) * dim;
    contrastive_backward_kernel<<<blocks_for(n), k_threads, 0, stream>>>(
        n, dim, margin, legacy, scale, y, diff, dist_sq, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void scaled_copy(cudaStream_t stream, std::size_t n, float scale, const float* x, float* y) {
    scaled_copy_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, scale, x, y);
    DL_CUDA_CHECK_LAUNCH();
}

void sigmoid_cross_entropy_forward(cudaStream_t stream, int rows, std::size_t n, const float* x,
                                   const float* t, float* loss) {
    sigmoid_cross_entropy_kernel<<<1, k_threads, 0, stream>>>(rows, n, x, t, loss);
    DL_CUDA_CHECK_LAUNCH();
}

void sigmoid_cross_entropy_backward(cudaStream_t stream, std::size_t n, float scale, const float* x,
                                    const float* t, float* dx) {
    sigmoid_cross_entropy_backward_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, scale, x, t,
                                                                                   dx);
    DL_CUDA_CHECK_LAUNCH();
}

void pointwise_forward(cudaStream_t stream, Pointwise f, const PointwiseParams& p, std::size_t n,
                       const float* x, float* y) {
    pointwise_forward_kernel<<<blocks_for(n), k_threads, 0, stream>>>(f, p, n, x, y);
    DL_CUDA_CHECK_LAUNCH();
}

void pointwise_backward(cudaStream_t stream, Pointwise f, const PointwiseParams& p, std::size_t n,
                        const float* x, const float* y, const float* dy, float* dx) {
    pointwise_backward_kernel<<<blocks_for(n), k_threads, 0, stream>>>(f, p, n, x, y, dy, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void batch_norm_forward(cudaStream_t stream, const ChannelGeometry& g, bool use_global, float eps,
                        float moving_average_fraction, const float* x, float* running_mean,
                        float* running_var, float* running_factor, float* inv_std, float* y) {
    batch_norm_forward_kernel<<<g.channels, k_threads, 0, stream>>>(
        dims_of(g), use_global, eps, moving_average_fraction, x, running_mean, running_var,
        running_factor, inv_std, y);
    DL_CUDA_CHECK_LAUNCH();
    if (!use_global) {
        batch_norm_factor_kernel<<<1, 1, 0, stream>>>(moving_average_fraction, running_factor);
        DL_CUDA_CHECK_LAUNCH();
    }
}

void batch_norm_backward(cudaStream_t stream, const ChannelGeometry& g, bool use_global,
                         const float* y, const float* inv_std, const float* dy, float* dx) {
    batch_norm_backward_kernel<<<g.channels, k_threads, 0, stream>>>(dims_of(g), use_global, y,
                                                                     inv_std, dy, dx);
    DL_CUDA_CHECK_LAUNCH();
}

void scale_forward(cudaStream_t stream, const ChannelGeometry& g, const float* x,
                   const float* gamma, const float* beta, float* y) {
    scale_forward_kernel<<<blocks_for(g.count()), k_threads, 0, stream>>>(dims_of(g), x, gamma,
                                                                          beta, y);
    DL_CUDA_CHECK_LAUNCH();
}

void scale_backward(cudaStream_t stream, const ChannelGeometry& g, const float* x,
                    const float* gamma, const float* dy, float* dx, float* dgamma, float* dbeta) {
    // The parameter gradients first: dx may overwrite dy (in place), and the stream orders the
    // two launches.
    scale_param_grad_kernel<<<g.channels, k_threads, 0, stream>>>(dims_of(g), x, dy, dgamma, dbeta);
    DL_CUDA_CHECK_LAUNCH();
    if (dx != nullptr) {
        scale_input_grad_kernel<<<blocks_for(g.count()), k_threads, 0, stream>>>(dims_of(g), gamma,
                                                                                 dy, dx);
        DL_CUDA_CHECK_LAUNCH();
    }
}

void eltwise_forward(cudaStream_t stream, EltwiseOp op, std::size_t n, const float* const* x,
                     int inputs, const float* coeffs, float* y, std::int32_t* mask) {
    eltwise_first_kernel<<<blocks_for(n), k_threads, 0, stream>>>(op, n, x[0], x[1], coeffs[0],
                                                                  coeffs[1], y, mask);
    DL_CUDA_CHECK_LAUNCH();
    for (int b = 2; b < inputs; ++b) {
        eltwise_next_kernel<<<blocks_for(n), k_threads, 0, stream>>>(op, n, x[b], coeffs[b], b, y,
                                                                     mask);
        DL_CUDA_CHECK_LAUNCH();
    }
}

void eltwise_backward(cudaStream_t stream, EltwiseOp op, std::size_t n, int index,
                      const float* const* x, int inputs, float coeff, const float* dy,
                      const std::int32_t* mask, float* dx) {
    eltwise_grad_kernel<<<blocks_for(n), k_threads, 0, stream>>>(op, n, index, coeff, dy, mask, dx);
    DL_CUDA_CHECK_LAUNCH();
    if (op == EltwiseOp::prod) {
        for (int b = 0; b < inputs; ++b) {
            if (b != index) {
                multiply_kernel<<<blocks_for(n), k_threads, 0, stream>>>(n, x[b], dx);
                DL_CUDA_CHECK_LAUNCH();
            }
        }
    }
}

} // namespace dl::cuda::kernels
