// CPU reference backend. Convolution is im2col + sgemm over slices of the batch, or Winograd
// F(4x4, 5x5) around 64 sgemms for 5x5 layers with enough channels (cpu/winograd.hpp), or
// direct loops for layers with few input channels (cpu/direct_conv.hpp; with few outputs too,
// the input gradient as the direct forward convolution of dy with the flipped kernels); the batch
// is split into a fixed number of tasks, weight gradients are summed per task and then reduced
// in task order, so a run is bit-for-bit repeatable (convolutions whatever the thread count).
// OpenBLAS runs single-threaded: the parallelism is ours (nested BLAS threads on 2 cores collapse
// throughput).

#include "cpu/cpu_backend.hpp"

#include "cpu/channel_ops.hpp"
#include "cpu/clones.hpp"
#include "cpu/direct_conv.hpp"
#include "cpu/pooling.hpp"
#include "cpu/thread_pool.hpp"
#include "cpu/winograd.hpp"

#include <sys/mman.h>

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace dl::cpu {
namespace {

// Sum of n floats in 16 independent lanes, added pairwise at the end. A single accumulator is a
// chain of dependent adds the compiler may not reorder (4 cycles each): the bias gradient of
// LeNet's conv1 (20 rows of 64 x 576) cost half a millisecond per step that way. The lanes
// vectorise; the order is fixed, so results stay repeatable.
float lane_sum(const float* values, std::ptrdiff_t n) {
    constexpr int k_lanes = 16;
    std::array<float, k_lanes> lanes{};
    std::ptrdiff_t k = 0;
    for (; k + k_lanes <= n; k += k_lanes) {
        for (int j = 0; j < k_lanes; ++j) {
            lanes[j] += values[k + j];
        }
    }
    for (int width = k_lanes / 2; width > 0; width /= 2) {
        for (int j = 0; j < width; ++j) {
            lanes[j] += lanes[j + width];
        }
    }
    float sum = lanes[0];
    for (; k < n; ++k) {
        sum += values[k];
    }
    return sum;
}

// Scratch of a megabyte and more in 2 MB pages where the kernel gives them (transparent huge
// pages in "madvise" mode, Debian's default), asked for before the first touch: a Winograd tile
// writes its 64 transformed values into 64 matrices spread over half a megabyte, 64 TLB entries
// per tile in 4 KB pages. cifar10_quick's conv2 took 30% less CPU with them.
template <typename T> struct HugePageAllocator {
    using value_type = T;
    static constexpr std::size_t k_huge = std::size_t{2} << 20U;
    HugePageAllocator() = default;
    template <typename U> explicit HugePageAllocator(const HugePageAllocator<U>& /*other*/) {}
    static bool huge(std::size_t n) { return n * sizeof(T) >= k_huge / 2; }
    T* allocate(std::size_t n) {
        if (!huge(n)) {
            return std::allocator<T>{}.allocate(n);
        }
        const std::size_t bytes = (n * sizeof(T) + k_huge - 1) / k_huge * k_huge;
        void* pointer = std::aligned_alloc(k_huge, bytes);
        if (pointer == nullptr) {
            throw std::bad_alloc();
        }
        // Advice only: without it (or without transparent huge pages) the pages are 4 KB.
        static_cast<void>(madvise(pointer, bytes, MADV_HUGEPAGE));
        return static_cast<T*>(pointer);
    }
    void deallocate(T* pointer, std::size_t n) noexcept {
        if (!huge(n)) {
            std::allocator<T>{}.deallocate(pointer, n);
            return;
        }
        std::free(pointer);
    }
    friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
};
using Scratch = std::vector<float, HugePageAllocator<float>>;

// Grow-only scratch: sized on the first step, reused afterwards (no allocation in a step).
float* scratch(Scratch& buffer, std::size_t count) {
    if (buffer.size() < count) {
        buffer.resize(count);
    }
    return buffer.data();
}

// col: (C*K*K) x (OH*OW), row (c, ki, kj) holds x[c][oh*s - p + ki][ow*s - p + kj] (0 outside).
// ld: the row stride of col (several images' columns side by side: ld = images * OH * OW).
void im2col(const float* x, int channels, int height, int width, int kernel, int stride, int pad,
            int out_h, int out_w, float* col, std::ptrdiff_t ld) {
    for (int c = 0; c < channels; ++c) {
        const float* plane = x + static_cast<std::ptrdiff_t>(c) * height * width;
        for (int ki = 0; ki < kernel; ++ki) {
            for (int kj = 0; kj < kernel; ++kj) {
                for (int oh = 0; oh < out_h; ++oh) {
                    const int h = oh * stride - pad + ki;
                    float* out = col + static_cast<std::ptrdiff_t>(oh) * out_w;
                    if (h < 0 || h >= height) {
                        std::fill(out, out + out_w, 0.0F);
                        continue;
                    }
                    const float* row = plane + static_cast<std::ptrdiff_t>(h) * width;
                    if (stride == 1) {
                        // Columns ow with 0 <= ow - pad + kj < width are a contiguous run.
                        const int first = std::max(0, pad - kj);
                        const int last = std::min(out_w, width + pad - kj);
                        std::fill(out, out + first, 0.0F);
                        if (last > first) {
                            std::memcpy(out + first, row + first - pad + kj,
                                        sizeof(float) * static_cast<std::size_t>(last - first));
                        }
                        std::fill(out + std::max(first, last), out + out_w, 0.0F);
                    } else {
                        for (int ow = 0; ow < out_w; ++ow) {
                            const int w = ow * stride - pad + kj;
                            out[ow] = (w >= 0 && w < width) ? row[w] : 0.0F;
                        }
                    }
                }
                col += ld;
            }
        }
    }
}

// The adjoint of im2col: dx (C x H x W) = sum of the col entries that read each pixel.
void col2im(const float* col, int channels, int height, int width, int kernel, int stride, int pad,
            int out_h, int out_w, float* dx, std::ptrdiff_t ld) {
    std::fill(dx, dx + static_cast<std::ptrdiff_t>(channels) * height * width, 0.0F);
    for (int c = 0; c < channels; ++c) {
        float* plane = dx + static_cast<std::ptrdiff_t>(c) * height * width;
        for (int ki = 0; ki < kernel; ++ki) {
            for (int kj = 0; kj < kernel; ++kj) {
                for (int oh = 0; oh < out_h; ++oh) {
                    const int h = oh * stride - pad + ki;
                    const float* in = col + static_cast<std::ptrdiff_t>(oh) * out_w;
                    if (h < 0 || h >= height) {
                        continue;
                    }
                    float* row = plane + static_cast<std::ptrdiff_t>(h) * width;
                    if (stride == 1) {
                        // The same contiguous run as in im2col, added instead of copied.
                        const int first = std::max(0, pad - kj);
                        const int last = std::min(out_w, width + pad - kj);
                        float* dst = row - pad + kj;
                        for (int ow = first; ow < last; ++ow) {
                            dst[ow] += in[ow];
                        }
                        continue;
                    }
                    for (int ow = 0; ow < out_w; ++ow) {
                        const int w = ow * stride - pad + kj;
                        if (w >= 0 && w < width) {
                            row[w] += in[ow];
                        }
                    }
                }
                col += ld;
            }
        }
    }
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          const float* b, float beta, float* c) {
    // Row-major C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C.
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, trans_a ? m : k, b,
                trans_b ? k : n, beta, c, n);
}

// Convolution splits its batch into this many tasks whatever the thread count: the order of the
// weight-gradient reduction is then fixed, so results do not depend on --threads, and a thread
// that a busy machine deschedules leaves its remaining tasks to the others.
constexpr int k_conv_tasks = 8;
// InnerProduct: a fixed split too, since sgemm's summation order can depend on the matrix sizes.
constexpr int k_inner_product_tasks = 4;
// Pooling has no reduction: a few tasks per thread for the same load balancing.
constexpr int k_tasks_per_thread = 4;

// Sizes derived from a ConvGeometry, in the units the loops use.
struct ConvShape {
    explicit ConvShape(const ConvGeometry& g)
        : out_h(g.out_height()), out_w(g.out_width()), spatial(out_h * out_w),
          group_out(g.outputs / g.group), col_rows(g.channels / g.group * g.kernel * g.kernel),
          in_size(static_cast<std::ptrdiff_t>(g.channels) * g.height * g.width),
          out_size(static_cast<std::ptrdiff_t>(g.outputs) * spatial) {}
    int out_h;
    int out_w;
    int spatial;
    int group_out;
    int col_rows; // rows of one group's im2col matrix: C/group x K x K
    std::ptrdiff_t in_size;
    std::ptrdiff_t out_size;
    // Images im2col'd side by side per sgemm: enough columns for sgemm to run at full speed,
    // few enough that col stays near 1 MB (in L2) while it is written and read back. From
    // 32 x 32 outputs up one image is enough columns, and then the sgemm writes y and reads dy
    // where they lie instead of through a gathered copy (cifar10_quick's conv1: 13 MB copied
    // per step).
    [[nodiscard]] int chunk_images(const ConvGeometry& g) const {
        constexpr int k_direct_spatial = 1024;
        if (spatial >= k_direct_spatial) {
            return 1;
        }
        constexpr std::size_t k_col_floats = 256 * 1024;
        const std::size_t per_image = static_cast<std::size_t>(col_rows) * g.group * spatial;
        return static_cast<int>(std::clamp<std::size_t>(k_col_floats / per_image, 1,
                                                        static_cast<std::size_t>(g.batch)));
    }
};

// The common 2x2, stride 2 case (LeNet's pooling) without bounds checks; same tie rule as the
// general loop (the first maximum in row-major order wins). Selects, not branches: on real
// data which of the four wins is a coin toss, and a mispredicted branch per output cost more
// than the rest of the work on LeNet's pool2 (rows of 4 outputs, too short for the vector loop).
DL_CPU_CLONES
void max_pool_2x2(const float* in, int width, int out_h, int out_w, float* out, std::int32_t* arg) {
    for (int oh = 0; oh < out_h; ++oh) {
        const float* top = in + static_cast<std::ptrdiff_t>(2 * oh) * width;
        const float* bottom = top + width;
        for (int ow = 0; ow < out_w; ++ow) {
            const int base = 2 * oh * width + 2 * ow;
            float best = top[2 * ow];
            int index = base;
            const std::array<float, 3> others = {top[2 * ow + 1], bottom[2 * ow],
                                                 bottom[2 * ow + 1]};
            const std::array<int, 3> at = {base + 1, base + width, base + width + 1};
            for (int k = 0; k < 3; ++k) {
                const bool larger = others[k] > best;
                best = larger ? others[k] : best;
                index = larger ? at[k] : index;
            }
            out[oh * out_w + ow] = best;
            arg[oh * out_w + ow] = index;
        }
    }
}

// A label as the index of its score in a row of `classes`, or -1 for a negative, NaN or too
// large one (the float-to-int conversion of which would be undefined or out of the row).
int label_index(float label, int classes) {
    return label >= 0.0F && label < static_cast<float>(classes) ? static_cast<int>(label) : -1;
}

// The pooling geometry that the 2x2 fast path handles.
bool is_2x2_pool(const PoolGeometry& g) {
    return g.kernel == 2 && g.stride == 2 && g.pad == 0 && g.height % 2 == 0 && g.width % 2 == 0;
}

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int threads) : m_pool(std::max(1, threads)) {
        openblas_set_num_threads(1);
        m_thread_scratch.resize(static_cast<std::size_t>(m_pool.size()));
        m_task_grad.resize(static_cast<std::size_t>(k_conv_tasks));
    }

    [[nodiscard]] std::string name() const override { return "cpu"; }
    [[nodiscard]] std::string device_name() const override {
        return "cpu (" + std::to_string(m_pool.size()) + " threads)";
    }
    [[nodiscard]] int threads() const override { return m_pool.size(); }

    // The host's memory: tensors are plain host arrays.
    void* allocate(std::size_t bytes) override { return host_memory().allocate(bytes); }
    void release(void* pointer) noexcept override { host_memory().release(pointer); }
    void upload(void* dst, const void* src, std::size_t bytes) override {
        host_memory().upload(dst, src, bytes);
    }
    void download(void* dst, const void* src, std::size_t bytes) override {
        host_memory().download(dst, src, bytes);
    }
    // Large copies (Split's tops) in parallel slices: one core does not fill the memory bus.
    // Below 128 KiB a thread's wake-up costs more than it saves.
    void copy(void* dst, const void* src, std::size_t bytes) override {
        constexpr std::size_t k_min_parallel_bytes = std::size_t{128} << 10U;
        if (bytes < k_min_parallel_bytes) {
            host_memory().copy(dst, src, bytes);
            return;
        }
        for_slices(bytes, [&](std::size_t first, std::size_t last) {
            host_memory().copy(static_cast<char*>(dst) + first,
                               static_cast<const char*>(src) + first, last - first);
        });
    }
    [[nodiscard]] bool host_accessible() const override { return true; }

    // im2col: each task takes a slice of the batch and im2cols all its images side by side, so each
    // group is one large sgemm instead of one small sgemm per image (LeNet's conv2 is 50 x 500 x
    // 64 per image: too small for OpenBLAS to reach its speed).
    void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                      float* y) override {
        if (winograd::applies(g)) {
            winograd_forward(g, x, w, b, y);
            return;
        }
        if (direct_conv::applies(g)) {
            direct_forward(g, x, w, b, y);
            return;
        }
        const ConvShape s(g);
        const int tasks = std::min(g.batch, k_conv_tasks);
        const int chunk = s.chunk_images(g);
        // Per task: col (col_rows*group x chunk*spatial), out (outputs x chunk*spatial).
        prepare(tasks,
                static_cast<std::size_t>(chunk) * s.spatial *
                    (static_cast<std::size_t>(s.col_rows) * g.group + g.outputs),
                0);
        m_pool.run(tasks, [&](int task, int thread) {
            const auto [first, last] = split(g.batch, tasks, task);
            float* col = m_thread_scratch[static_cast<std::size_t>(thread)].data();
            for (int c0 = first; c0 < last; c0 += chunk) {
                const int images = std::min(chunk, last - c0);
                const std::ptrdiff_t ld = static_cast<std::ptrdiff_t>(images) * s.spatial;
                // One image's out (M x spatial) is its y.
                float* out = images == 1
                                 ? y + c0 * s.out_size
                                 : col + static_cast<std::ptrdiff_t>(s.col_rows) * g.group * ld;
                for (int i = 0; i < images; ++i) {
                    im2col(x + (c0 + i) * s.in_size, g.channels, g.height, g.width, g.kernel,
                           g.stride, g.pad, s.out_h, s.out_w,
                           col + static_cast<std::ptrdiff_t>(i) * s.spatial, ld);
                }
                for (int grp = 0; grp < g.group; ++grp) {
                    // out_g (group_out x images*spatial) = W_g (group_out x col_rows) * col_g
                    gemm(false, false, s.group_out, static_cast<int>(ld), s.col_rows, 1.0F,
                         w + static_cast<std::ptrdiff_t>(grp) * s.group_out * s.col_rows,
                         col + static_cast<std::ptrdiff_t>(grp) * s.col_rows * ld, 0.0F,
                         out + static_cast<std::ptrdiff_t>(grp) * s.group_out * ld);
                }
                // out is M x (image, spatial); y is (image, M, spatial): scatter, add the bias.
                for (int i = 0; i < images; ++i) {
                    float* y_n = y + (c0 + i) * s.out_size;
                    for (int m = 0; m < g.outputs; ++m) {
                        const float* src =
                            out + m * ld + static_cast<std::ptrdiff_t>(i) * s.spatial;
                        float* dst = y_n + static_cast<std::ptrdiff_t>(m) * s.spatial;
                        const float bias = b != nullptr ? b[m] : 0.0F;
                        for (int k = 0; k < s.spatial; ++k) {
                            dst[k] = src[k] + bias;
                        }
                    }
                }
            }
        });
    }

    // One chunk of `images` images from c0 of conv_backward's GEMM path: im2col, dy gathered
    // beside it, the bias and weight gradient partials, and (with dx) the input gradient.
    void conv_backward_chunk(const ConvGeometry& g, const ConvShape& s, int c0, int images,
                             const float* x, const float* w, const float* dy, float* dx, float* col,
                             float* dw_part, float* db_part) {
        const std::ptrdiff_t ld = static_cast<std::ptrdiff_t>(images) * s.spatial;
        float* dcol = col + static_cast<std::ptrdiff_t>(s.col_rows) * g.group * ld;
        // One image's dy (M x spatial) is read where it lies.
        float* dy_t = dcol + static_cast<std::ptrdiff_t>(s.col_rows) * g.group * ld;
        const float* dy_chunk = images == 1 ? dy + c0 * s.out_size : dy_t;
        for (int i = 0; i < images; ++i) {
            im2col(x + (c0 + i) * s.in_size, g.channels, g.height, g.width, g.kernel, g.stride,
                   g.pad, s.out_h, s.out_w, col + static_cast<std::ptrdiff_t>(i) * s.spatial, ld);
            if (images == 1) {
                break;
            }
            const float* dy_n = dy + (c0 + i) * s.out_size;
            for (int m = 0; m < g.outputs; ++m) {
                std::copy_n(dy_n + static_cast<std::ptrdiff_t>(m) * s.spatial, s.spatial,
                            dy_t + m * ld + static_cast<std::ptrdiff_t>(i) * s.spatial);
            }
        }
        for (int m = 0; m < g.outputs; ++m) {
            db_part[m] += lane_sum(dy_chunk + m * ld, ld);
        }
        for (int grp = 0; grp < g.group; ++grp) {
            const float* dy_g = dy_chunk + static_cast<std::ptrdiff_t>(grp) * s.group_out * ld;
            // dW_g^T (col_rows x group_out) += col_g (col_rows x images*spatial) * dy_g^T.
            // Transposed because sgemm runs this shape faster than dy_g * col_g^T (col has more
            // rows than dy: cifar10_quick's conv1 at 86 against 64 GFLOP/s).
            gemm(false, true, s.col_rows, s.group_out, static_cast<int>(ld), 1.0F,
                 col + static_cast<std::ptrdiff_t>(grp) * s.col_rows * ld, dy_g, 1.0F,
                 dw_part + static_cast<std::ptrdiff_t>(grp) * s.group_out * s.col_rows);
            if (dx != nullptr) {
                // dcol_g (col_rows x images*spatial) = W_g^T * dy_g
                gemm(true, false, s.col_rows, static_cast<int>(ld), s.group_out, 1.0F,
                     w + static_cast<std::ptrdiff_t>(grp) * s.group_out * s.col_rows, dy_g, 0.0F,
                     dcol + static_cast<std::ptrdiff_t>(grp) * s.col_rows * ld);
            }
        }
        if (dx != nullptr) {
            for (int i = 0; i < images; ++i) {
                col2im(dcol + static_cast<std::ptrdiff_t>(i) * s.spatial, g.channels, g.height,
                       g.width, g.kernel, g.stride, g.pad, s.out_h, s.out_w,
                       dx + (c0 + i) * s.in_size, ld);
            }
        }
    }

    // Per image: dcol = W^T dy per group (one sgemm), then col2im into dx; images in parallel.
    void conv_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                            float* dx) override {
        const ConvShape s(g);
        const int tasks = std::min(g.batch, k_conv_tasks);
        prepare(tasks, static_cast<std::size_t>(s.col_rows) * g.group * s.spatial, 0);
        m_pool.run(tasks, [&](int task, int thread) {
            const auto [first, last] = split(g.batch, tasks, task);
            float* dcol = m_thread_scratch[static_cast<std::size_t>(thread)].data();
            for (int n = first; n < last; ++n) {
                for (int grp = 0; grp < g.group; ++grp) {
                    gemm(true, false, s.col_rows, s.spatial, s.group_out, 1.0F,
                         w + static_cast<std::ptrdiff_t>(grp) * s.group_out * s.col_rows,
                         dy + n * s.out_size +
                             static_cast<std::ptrdiff_t>(grp) * s.group_out * s.spatial,
                         0.0F, dcol + static_cast<std::ptrdiff_t>(grp) * s.col_rows * s.spatial);
                }
                col2im(dcol, g.channels, g.height, g.width, g.kernel, g.stride, g.pad, s.out_h,
                       s.out_w, dx + n * s.in_size, s.spatial);
            }
        });
    }

    void conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy,
                       float* dx, float* dw, float* db) override {
        if (winograd::applies(g)) {
            winograd_backward(g, x, w, dy, dx, dw, db);
            return;
        }
        // The first layer has no input gradient: the direct kernels compute dw and db only.
        if (dx == nullptr && direct_conv::applies(g)) {
            direct_weight_gradients(g, x, dy, dw, db);
            return;
        }
        // A stride-1 layer's input gradient is itself a convolution: dy convolved with the
        // kernels flipped and their channels exchanged, padded by kernel - 1 - pad. Where the
        // direct kernels take both, they compute dx so, where im2col's col2im would scatter each
        // of the taps into dx (ResNet-20's 16-channel 3x3 layers: their backward pass took 4
        // times the forward on im2col).
        if (dx != nullptr && direct_conv::applies(g) && g.pad <= g.kernel - 1) {
            const ConvGeometry adjoint{g.batch,
                                       g.outputs,
                                       g.out_height(),
                                       g.out_width(),
                                       g.channels,
                                       g.kernel,
                                       1,
                                       g.kernel - 1 - g.pad,
                                       1};
            if (direct_conv::applies(adjoint)) {
                direct_weight_gradients(g, x, dy, dw, db);
                direct_forward(adjoint, dy, flipped_kernels(g, w), nullptr, dx);
                return;
            }
        }
        const ConvShape s(g);
        const std::size_t w_size = static_cast<std::size_t>(g.outputs) * s.col_rows;
        const int tasks = std::min(g.batch, k_conv_tasks);
        const int chunk = s.chunk_images(g);
        // Per task: col and dcol (col_rows*group x chunk*spatial), dy gathered (outputs x
        // chunk*spatial); gradient partials: dw, per group transposed (col_rows x group_out),
        // then db.
        prepare(tasks,
                static_cast<std::size_t>(chunk) * s.spatial *
                    (2 * static_cast<std::size_t>(s.col_rows) * g.group + g.outputs),
                w_size + static_cast<std::size_t>(g.outputs));
        m_pool.run(tasks, [&](int task, int thread) {
            float* dw_part = m_task_grad[static_cast<std::size_t>(task)].data();
            float* db_part = dw_part + w_size;
            std::fill(dw_part, dw_part + w_size + g.outputs, 0.0F);
            const auto [first, last] = split(g.batch, tasks, task);
            float* col = m_thread_scratch[static_cast<std::size_t>(thread)].data();
            for (int c0 = first; c0 < last; c0 += chunk) {
                conv_backward_chunk(g, s, c0, std::min(chunk, last - c0), x, w, dy, dx, col,
                                    dw_part, db_part);
            }
        });
        float* dw_t = scratch(m_dw_transposed, w_size);
        reduce_tasks(tasks, w_size, dw_t, 0);
        for (int grp = 0; grp < g.group; ++grp) {
            const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(grp) * s.group_out * s.col_rows;
            for (int r = 0; r < s.col_rows; ++r) {
                for (int o = 0; o < s.group_out; ++o) {
                    dw[at + static_cast<std::ptrdiff_t>(o) * s.col_rows + r] =
                        dw_t[at + static_cast<std::ptrdiff_t>(r) * s.group_out + o];
                }
            }
        }
        if (db != nullptr) {
            reduce_tasks(tasks, static_cast<std::size_t>(g.outputs), db, w_size);
        }
    }

    void max_pool_forward(const PoolGeometry& g, const float* x, float* y,
                          std::int32_t* argmax) override {
        const int out_h = g.out_height();
        const int out_w = g.out_width();
        const int planes = g.batch * g.channels;
        const int tasks = std::min(planes, k_tasks_per_thread * m_pool.size());
        const bool vectors = pool_vectors_pay(g);
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            const auto [first, last] = split(planes, tasks, task);
            const float* in = x + static_cast<std::ptrdiff_t>(first) * g.height * g.width;
            float* out = y + static_cast<std::ptrdiff_t>(first) * out_h * out_w;
            std::int32_t* arg = argmax + static_cast<std::ptrdiff_t>(first) * out_h * out_w;
            if (vectors && !is_2x2_pool(g)) {
                max_pool_planes(g, last - first, in, out, arg);
                return;
            }
            for (int p = 0; p < last - first; ++p) {
                const std::ptrdiff_t in_at = static_cast<std::ptrdiff_t>(p) * g.height * g.width;
                const std::ptrdiff_t out_at = static_cast<std::ptrdiff_t>(p) * out_h * out_w;
                if (is_2x2_pool(g)) {
                    max_pool_2x2(in + in_at, g.width, out_h, out_w, out + out_at, arg + out_at);
                } else {
                    max_pool_plane_reference(g, in + in_at, out + out_at, arg + out_at);
                }
            }
        });
    }

    void max_pool_backward(const PoolGeometry& g, const float* /*x*/, const float* /*y*/,
                           const float* dy, const std::int32_t* argmax, float* dx) override {
        const int out_size = g.out_height() * g.out_width();
        const int in_size = g.height * g.width;
        const int planes = g.batch * g.channels;
        const int tasks = std::min(planes, k_tasks_per_thread * m_pool.size());
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            const auto [first, last] = split(planes, tasks, task);
            max_pool_planes_backward(g, last - first,
                                     dy + static_cast<std::ptrdiff_t>(first) * out_size,
                                     argmax + static_cast<std::ptrdiff_t>(first) * out_size,
                                     dx + static_cast<std::ptrdiff_t>(first) * in_size);
        });
    }

    void ave_pool_forward(const PoolGeometry& g, const float* x, float* y) override {
        ave_pool(g, x, y, false);
    }
    void ave_pool_backward(const PoolGeometry& g, const float* dy, float* dx) override {
        ave_pool(g, dy, dx, true);
    }

    // Split by output columns: each task multiplies the whole batch by a slice of W, which
    // sgemm runs about 25% faster than a slice of rows by the whole of W (LeNet's ip1: 16 x 500
    // x 800 per task against 64 x 125 x 800).
    void inner_product_forward(int rows, int in, int out, const float* x, const float* w,
                               const float* b, float* y) override {
        const int tasks = std::min(out, k_inner_product_tasks);
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            const auto [first, last] = split(out, tasks, task);
            if (last <= first) {
                return;
            }
            // y[:, first:last] (rows x out_t) = x (rows x in) * W[first:last]^T (in x out_t)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, last - first, in, 1.0F, x,
                        in, w + static_cast<std::ptrdiff_t>(first) * in, in, 0.0F, y + first, out);
            if (b != nullptr) {
                for (int r = 0; r < rows; ++r) {
                    float* row = y + static_cast<std::ptrdiff_t>(r) * out;
                    for (int o = first; o < last; ++o) {
                        row[o] += b[o];
                    }
                }
            }
        });
    }

    void inner_product_backward(int rows, int in, int out, const float* x, const float* w,
                                const float* dy, float* dx, float* dw, float* db) override {
        const int tasks = k_inner_product_tasks;
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            // dW rows [o0, o1) (out_t x in) = dy[:, o0:o1]^T (out_t x rows) * x (rows x in)
            const auto [o0, o1] = split(out, tasks, task);
            if (o1 > o0) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, in, rows, 1.0F,
                            dy + o0, out, x, in, 0.0F, dw + static_cast<std::ptrdiff_t>(o0) * in,
                            in);
                if (db != nullptr) {
                    for (int o = o0; o < o1; ++o) {
                        float sum = 0.0F;
                        for (int r = 0; r < rows; ++r) {
                            sum += dy[static_cast<std::ptrdiff_t>(r) * out + o];
                        }
                        db[o] = sum;
                    }
                }
            }
            // dx[:, i0:i1] (rows x in_t) = dy (rows x out) * W[:, i0:i1] (out x in_t): columns,
            // like the forward pass (ip1: 64 x 200 x 500 per task, not 16 x 800 x 500).
            const auto [i0, i1] = split(in, tasks, task);
            if (dx != nullptr && i1 > i0) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, i1 - i0, out, 1.0F, dy,
                            out, w + i0, in, 0.0F, dx + i0, in);
            }
        });
    }

    // Element by element: slices in parallel (ResNet-20's ReLUs, 2M values each at 32 x 32).
    void activation_forward(Activation kind, std::size_t n, const float* x, float* y) override {
        for_slices(n, [&](std::size_t first, std::size_t last) {
            activation_slice_forward(kind, last - first, x + first, y + first);
        });
    }
    void activation_backward(Activation kind, std::size_t n, const float* y, const float* dy,
                             float* dx) override {
        for_slices(n, [&](std::size_t first, std::size_t last) {
            activation_slice_backward(kind, last - first, y + first, dy + first, dx + first);
        });
    }

    static void activation_slice_forward(Activation kind, std::size_t n, const float* x, float* y) {
        switch (kind) {
        case Activation::relu:
            relu_forward(n, x, y);
            break;
        case Activation::sigmoid:
            for (std::size_t i = 0; i < n; ++i) {
                y[i] = 1.0F / (1.0F + std::exp(-x[i]));
            }
            break;
        case Activation::tanh:
            for (std::size_t i = 0; i < n; ++i) {
                y[i] = std::tanh(x[i]);
            }
            break;
        }
    }

    static void activation_slice_backward(Activation kind, std::size_t n, const float* y,
                                          const float* dy, float* dx) {
        switch (kind) {
        case Activation::relu:
            relu_backward(n, y, dy, dx);
            break;
        case Activation::sigmoid:
            for (std::size_t i = 0; i < n; ++i) {
                dx[i] = dy[i] * y[i] * (1.0F - y[i]);
            }
            break;
        case Activation::tanh:
            for (std::size_t i = 0; i < n; ++i) {
                dx[i] = dy[i] * (1.0F - y[i] * y[i]);
            }
            break;
        }
    }

    void euclidean_loss_forward(int rows, std::size_t n, const float* a, const float* b,
                                float* diff, float* loss) override {
        cpu::euclidean_loss_forward(rows, n, a, b, diff, loss);
    }
    void hinge_loss_forward(int rows, int classes, bool l2, const float* scores,
                            const float* labels, float* diff, float* loss) override {
        cpu::hinge_loss_forward(rows, classes, l2, scores, labels, diff, loss);
    }
    void hinge_loss_backward(int rows, int classes, bool l2, float scale, const float* labels,
                             const float* diff, float* dx) override {
        cpu::hinge_loss_backward(rows, classes, l2, scale, labels, diff, dx);
    }
    void contrastive_loss_forward(int rows, int dim, float margin, bool legacy, const float* a,
                                  const float* b, const float* y, float* diff, float* dist_sq,
                                  float* loss) override {
        cpu::contrastive_loss_forward(rows, dim, margin, legacy, a, b, y, diff, dist_sq, loss);
    }
    void contrastive_loss_backward(int rows, int dim, float margin, bool legacy, float scale,
                                   const float* y, const float* diff, const float* dist_sq,
                                   float* dx) override {
        cpu::contrastive_loss_backward(rows, dim, margin, legacy, scale, y, diff, dist_sq, dx);
    }
    void scaled_copy(std::size_t n, float scale, const float* x, float* y) override {
        for (std::size_t i = 0; i < n; ++i) {
            y[i] = scale * x[i];
        }
    }
    void sigmoid_cross_entropy_forward(int rows, std::size_t n, const float* x, const float* t,
                                       float* loss) override {
        cpu::sigmoid_cross_entropy_forward(rows, n, x, t, loss);
    }
    void sigmoid_cross_entropy_backward(std::size_t n, float scale, const float* x, const float* t,
                                        float* dx) override {
        cpu::sigmoid_cross_entropy_backward(n, scale, x, t, dx);
    }
    void pointwise_forward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                           float* y) override {
        cpu::pointwise_forward(f, p, n, x, y);
    }
    void pointwise_backward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                            const float* y, const float* dy, float* dx) override {
        cpu::pointwise_backward(f, p, n, x, y, dy, dx);
    }

    void dropout_mask(std::size_t n, float ratio, std::mt19937& rng, float* mask) override {
        std::uniform_real_distribution<float> uniform(0.0F, 1.0F);
        for (std::size_t i = 0; i < n; ++i) {
            mask[i] = uniform(rng) >= ratio ? 1.0F : 0.0F;
        }
    }

    void masked_scale(std::size_t n, const float* x, const float* mask, float scale,
                      float* y) override {
        for (std::size_t i = 0; i < n; ++i) {
            y[i] = mask == nullptr ? x[i] * scale : x[i] * mask[i] * scale;
        }
    }

    void softmax_loss_forward(int rows, int classes, const float* logits, const float* labels,
                              float* prob, float* loss_out) override {
        double loss = 0.0;
        for (int r = 0; r < rows; ++r) {
            const float* z = logits + static_cast<std::ptrdiff_t>(r) * classes;
            float* p = prob + static_cast<std::ptrdiff_t>(r) * classes;
            const float top = *std::max_element(z, z + classes);
            float sum = 0.0F;
            for (int c = 0; c < classes; ++c) {
                p[c] = std::exp(z[c] - top);
                sum += p[c];
            }
            for (int c = 0; c < classes; ++c) {
                p[c] /= sum;
            }
            // The reader refuses labels past the scores (data::LabelLimit); one that comes here
            // anyway adds nothing rather than reading past the row, as the CUDA kernel does.
            if (const int label = label_index(labels[r], classes); label >= 0) {
                loss -= std::log(std::max(p[label], FLT_MIN));
            }
        }
        loss_out[0] = static_cast<float>(loss / rows);
    }

    void softmax_loss_backward(int rows, int classes, const float* prob, const float* labels,
                               float scale, float* dlogits) override {
        for (int r = 0; r < rows; ++r) {
            const float* p = prob + static_cast<std::ptrdiff_t>(r) * classes;
            float* d = dlogits + static_cast<std::ptrdiff_t>(r) * classes;
            for (int c = 0; c < classes; ++c) {
                d[c] = p[c] * scale;
            }
            if (const int label = label_index(labels[r], classes); label >= 0) {
                d[label] -= scale;
            }
        }
    }

    void accuracy(int rows, int classes, int top_k, const float* scores, const float* labels,
                  float* accuracy) override {
        int correct = 0;
        for (int row = 0; row < rows; ++row) {
            const float* s = scores + static_cast<std::ptrdiff_t>(row) * classes;
            const int label = label_index(labels[row], classes);
            if (label < 0) {
                continue; // counted wrong, as the CUDA kernel counts it
            }
            const float truth = s[label];
            int better = 0;
            for (int c = 0; c < classes; ++c) {
                if (s[c] > truth) {
                    ++better;
                }
            }
            if (better < top_k) {
                ++correct;
            }
        }
        accuracy[0] = static_cast<float>(correct) / static_cast<float>(rows);
    }

    // The Caffe layers beyond LeNet: the plain reference loops of cpu/channel_ops.cpp.
    void lrn_forward(const ChannelGeometry& g, const LrnParams& p, const float* x, float* scale,
                     float* y) override {
        cpu::lrn_forward(g, p, x, scale, y);
    }
    void lrn_within_forward(const PoolGeometry& g, const LrnParams& p, const float* x, float* scale,
                            float* y) override {
        cpu::lrn_within_forward(g, p, x, scale, y);
    }
    void lrn_within_backward(const PoolGeometry& g, const LrnParams& p, const float* x,
                             const float* y, const float* scale, const float* dy,
                             float* dx) override {
        cpu::lrn_within_backward(g, p, x, y, scale, dy, dx);
    }
    void lrn_backward(const ChannelGeometry& g, const LrnParams& p, const float* x, const float* y,
                      const float* scale, const float* dy, float* dx) override {
        cpu::lrn_backward(g, p, x, y, scale, dy, dx);
    }
    void batch_norm_forward(const ChannelGeometry& g, bool use_global, float eps,
                            float moving_average_fraction, const float* x, float* running_mean,
                            float* running_var, float* running_factor, float* inv_std,
                            float* y) override {
        for_channels(g, [&](cpu::Channels range) {
            cpu::batch_norm_forward(g, range, use_global, eps, moving_average_fraction, x,
                                    running_mean, running_var, running_factor[0], inv_std, y);
        });
        if (!use_global) {
            running_factor[0] = running_factor[0] * moving_average_fraction + 1.0F;
        }
    }
    void batch_norm_backward(const ChannelGeometry& g, bool use_global, const float* y,
                             const float* inv_std, const float* dy, float* dx) override {
        for_channels(g, [&](cpu::Channels range) {
            cpu::batch_norm_backward(g, range, use_global, y, inv_std, dy, dx);
        });
    }
    void prelu_forward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                       float* y) override {
        cpu::prelu_forward(g, shared, x, slope, y);
    }
    void prelu_backward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                        const float* dy, float* dx, float* dslope) override {
        cpu::prelu_backward(g, shared, x, slope, dy, dx, dslope);
    }
    void scale_forward(const ChannelGeometry& g, const float* x, const float* gamma,
                       const float* beta, float* y) override {
        for_channels(g,
                     [&](cpu::Channels range) { cpu::scale_forward(g, range, x, gamma, beta, y); });
    }
    void scale_backward(const ChannelGeometry& g, const float* x, const float* gamma,
                        const float* dy, float* dx, float* dgamma, float* dbeta) override {
        for_channels(g, [&](cpu::Channels range) {
            cpu::scale_backward(g, range, x, gamma, dy, dx, dgamma, dbeta);
        });
    }
    void copy_blocks(int rows, std::size_t block, const float* src, std::size_t src_stride,
                     float* dst, std::size_t dst_stride) override {
        cpu::copy_blocks(rows, block, src, src_stride, dst, dst_stride);
    }
    // Element by element: slices of the inputs in parallel.
    void eltwise_forward(EltwiseOp op, std::size_t n, const std::vector<const float*>& x,
                         const std::vector<float>& coeffs, float* y, std::int32_t* mask) override {
        for_slices(n, [&](std::size_t first, std::size_t last) {
            cpu::eltwise_forward(op, last - first, offset(x, first), coeffs, y + first,
                                 mask != nullptr ? mask + first : nullptr);
        });
    }
    void eltwise_backward(EltwiseOp op, std::size_t n, int index,
                          const std::vector<const float*>& x, float coeff, const float* dy,
                          const std::int32_t* mask, float* dx) override {
        for_slices(n, [&](std::size_t first, std::size_t last) {
            cpu::eltwise_backward(op, last - first, index, offset(x, first), coeff, dy + first,
                                  mask != nullptr ? mask + first : nullptr, dx + first);
        });
    }

    void sgd_update(std::size_t n, const float* step, float lr_mult, float momentum, float decay,
                    bool nesterov, const float* g, float* history, float* w) override {
        const float lr = step[0] * lr_mult;
        for_slices(n, [&](std::size_t first, std::size_t last) {
            for (std::size_t i = first; i < last; ++i) {
                const float grad = g[i] + decay * w[i];
                const float previous = history[i];
                history[i] = momentum * history[i] + lr * grad;
                w[i] -=
                    nesterov ? (1.0F + momentum) * history[i] - momentum * previous : history[i];
            }
        });
    }

    void adam_update(std::size_t n, const float* step, float lr_mult, float beta1, float beta2,
                     float epsilon, float decay, const float* g, float* m, float* v,
                     float* w) override {
        const float lr = step[0] * lr_mult;
        const float correction = step[1];
        for_slices(n, [&](std::size_t first, std::size_t last) {
            for (std::size_t i = first; i < last; ++i) {
                const float grad = g[i] + decay * w[i];
                m[i] = beta1 * m[i] + (1.0F - beta1) * grad;
                v[i] = beta2 * v[i] + (1.0F - beta2) * grad * grad;
                w[i] -= lr * correction * m[i] / (std::sqrt(v[i]) + epsilon);
            }
        });
    }

    void adaptive_update(AdaptiveRule rule, std::size_t n, const float* step, float lr_mult,
                         float rate, float delta, float decay, const float* g, float* h, float* h2,
                         float* w) override {
        const float lr = step[0] * lr_mult;
        for_slices(n, [&](std::size_t first, std::size_t last) {
            for (std::size_t i = first; i < last; ++i) {
                const float grad = g[i] + decay * w[i];
                if (rule == AdaptiveRule::adadelta) {
                    h[i] = rate * h[i] + (1.0F - rate) * grad * grad;
                    const float update = grad * std::sqrt((h2[i] + delta) / (h[i] + delta));
                    h2[i] = rate * h2[i] + (1.0F - rate) * update * update;
                    w[i] -= lr * update;
                    continue;
                }
                h[i] = rule == AdaptiveRule::adagrad ? h[i] + grad * grad
                                                     : rate * h[i] + (1.0F - rate) * grad * grad;
                w[i] -= lr * grad / (std::sqrt(h[i]) + delta);
            }
        });
    }

private:
    // fn(first, last) over [0, n) in slices on the pool: for elementwise updates, whose results
    // do not depend on the split. Small tensors (biases) are not worth waking a thread for.
    static std::vector<const float*> offset(const std::vector<const float*>& x, std::size_t by) {
        std::vector<const float*> moved;
        moved.reserve(x.size());
        for (const float* p : x) {
            moved.push_back(p != nullptr ? p + by : nullptr);
        }
        return moved;
    }

    // Ranges of channels in parallel; a small tensor in one task (a thread's wake-up costs more).
    template <typename F> void for_channels(const ChannelGeometry& g, F&& fn) {
        constexpr std::size_t k_min_parallel = 32 * 1024;
        const int tasks = g.count() < k_min_parallel
                              ? 1
                              : std::min(g.channels, k_tasks_per_thread * m_pool.size());
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            fn(cpu::Channels{g.channels * task / tasks, g.channels * (task + 1) / tasks});
        });
    }

    template <typename F> void for_slices(std::size_t n, F&& fn) {
        constexpr std::size_t k_min_parallel = 32 * 1024;
        const int tasks = n < k_min_parallel ? 1 : k_tasks_per_thread * m_pool.size();
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            fn(n * static_cast<std::size_t>(task) / static_cast<std::size_t>(tasks),
               n * static_cast<std::size_t>(task + 1) / static_cast<std::size_t>(tasks));
        });
    }

    // Winograd F(4x4, 5x5) (cpu/winograd.hpp): tasks take groups of k_lanes images, each group
    // in blocks of tile positions; per block the transforms surround 64 sgemms. The weight
    // gradient is summed per task in the Winograd domain and reduced in task order, like
    // im2col's, so results do not depend on --threads either.
    struct WinogradPlan {
        explicit WinogradPlan(const ConvGeometry& g)
            : tiling(g), groups((g.batch + winograd::k_lanes - 1) / winograd::k_lanes),
              tasks(std::min(groups, k_conv_tasks)),
              block_positions(std::min(tiling.positions, k_block_positions)),
              kernels(g.outputs * g.channels) {}
        // 16 positions of 8 images: 128 columns per sgemm, enough for its full speed; the
        // block's transformed outputs (64 x outputs x 128) then stay near L2's size.
        static constexpr int k_block_positions = 8;
        winograd::Tiling tiling;
        int groups;
        int tasks;
        int block_positions;
        int kernels;
        // Floats of a full block's 64 transformed matrices of `rows` rows (v: channels, m:
        // outputs); a shorter last block fits in the same space.
        [[nodiscard]] std::size_t block_floats(int rows) const {
            const winograd::Block full{0, winograd::k_lanes, 0, block_positions};
            return static_cast<std::size_t>(winograd::k_points) *
                   static_cast<std::size_t>(winograd::point_stride(rows, full));
        }
        [[nodiscard]] winograd::Block block(const ConvGeometry& g, int group, int p_first) const {
            const int image = group * winograd::k_lanes;
            return {image, std::min(winograd::k_lanes, g.batch - image), p_first,
                    std::min(block_positions, tiling.positions - p_first)};
        }
    };

    // fn(first, last) over the kernels [0, plan.kernels) on the pool, in slices of whole lanes.
    template <typename F> void for_kernel_lanes(const WinogradPlan& plan, F&& fn) {
        const int lanes = (plan.kernels + winograd::k_lanes - 1) / winograd::k_lanes;
        const int tasks = std::min(lanes, k_tasks_per_thread * m_pool.size());
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            const auto [first, last] = split(lanes, tasks, task);
            fn(first * winograd::k_lanes, std::min(plan.kernels, last * winograd::k_lanes));
        });
    }

    // u = G w G^T for every kernel.
    float* winograd_kernels(const ConvGeometry& g, const WinogradPlan& plan, const float* w) {
        float* u = scratch(m_winograd_u, static_cast<std::size_t>(winograd::k_points) *
                                             static_cast<std::size_t>(plan.kernels));
        for_kernel_lanes(
            plan, [&](int first, int last) { winograd::transform_kernels(g, w, first, last, u); });
        return u;
    }

    void winograd_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                          float* y) {
        const WinogradPlan plan(g);
        const float* u = winograd_kernels(g, plan, w);
        const std::size_t xt_size = winograd::input_lanes(plan.tiling).floats(g.channels);
        const std::size_t v_size = plan.block_floats(g.channels);
        // Per thread: xt (the group's inputs), v (64 x channels x columns), m (64 x outputs x
        // columns).
        prepare(plan.tasks, xt_size + v_size + plan.block_floats(g.outputs), 0);
        m_pool.run(plan.tasks, [&](int task, int thread) {
            float* xt = m_thread_scratch[static_cast<std::size_t>(thread)].data();
            float* v = xt + xt_size;
            float* m = v + v_size;
            const auto [first, last] = split(plan.groups, plan.tasks, task);
            for (int group = first; group < last; ++group) {
                winograd::gather_inputs(g, plan.tiling, plan.block(g, group, 0), x, xt);
                for (int p = 0; p < plan.tiling.positions; p += plan.block_positions) {
                    const winograd::Block block = plan.block(g, group, p);
                    const int n = block.columns();
                    const std::ptrdiff_t v_stride = winograd::point_stride(g.channels, block);
                    const std::ptrdiff_t m_stride = winograd::point_stride(g.outputs, block);
                    winograd::transform_inputs(g, plan.tiling, block, xt, v);
                    for (int xi = 0; xi < winograd::k_points; ++xi) {
                        // m[xi] (outputs x n) = u[xi] (outputs x channels) * v[xi] (channels x n)
                        gemm(false, false, g.outputs, n, g.channels, 1.0F,
                             u + static_cast<std::ptrdiff_t>(xi) * plan.kernels, v + xi * v_stride,
                             0.0F, m + xi * m_stride);
                    }
                    winograd::transform_outputs(g, plan.tiling, block, m, b, y);
                }
            }
        });
    }

    // A thread's buffers in winograd_backward (their sizes are there).
    struct WinogradGradientBuffers {
        const float* xt;
        const float* dyt;
        float* v;
        float* dv;
        float* dm;
        float* dm_t;
        float* dxt;
    };

    // One block of tile positions: the kernels' gradient partial du (+= with du_beta 1) and,
    // with input_gradients, the block's share of the group's input gradient dxt.
    void winograd_backward_block(const ConvGeometry& g, const WinogradPlan& plan,
                                 const winograd::Block& block, const float* u,
                                 const WinogradGradientBuffers& b, float du_beta, float* du_part,
                                 bool input_gradients) {
        const int n = block.columns();
        const std::ptrdiff_t v_stride = winograd::point_stride(g.channels, block);
        const std::ptrdiff_t m_stride = winograd::point_stride(g.outputs, block);
        winograd::transform_inputs(g, plan.tiling, block, b.xt, b.v);
        winograd::output_gradients(g, plan.tiling, block, b.dyt, b.dm);
        for (int xi = 0; xi < winograd::k_points; ++xi) {
            const float* dm_xi = b.dm + xi * m_stride;
            // du[xi] (outputs x channels) += dm[xi] (outputs x n) * v[xi]^T, from dm[xi]
            // transposed: sgemm runs this shape twice as fast as dm * v^T.
            winograd::transpose(dm_xi, g.outputs, n, n, b.dm_t);
            gemm(true, true, g.outputs, g.channels, n, 1.0F, b.dm_t, b.v + xi * v_stride, du_beta,
                 du_part + static_cast<std::ptrdiff_t>(xi) * plan.kernels);
            if (input_gradients) {
                // dv[xi] (channels x n) = u[xi]^T (channels x outputs) * dm[xi]
                gemm(true, false, g.channels, n, g.outputs, 1.0F,
                     u + static_cast<std::ptrdiff_t>(xi) * plan.kernels, dm_xi, 0.0F,
                     b.dv + xi * v_stride);
            }
        }
        if (input_gradients) {
            winograd::input_gradients(g, plan.tiling, block, b.dv, b.dxt);
        }
    }

    void winograd_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy,
                           float* dx, float* dw, float* db) {
        const WinogradPlan plan(g);
        const float* u = winograd_kernels(g, plan, w);
        const std::size_t du_size = winograd::k_points * static_cast<std::size_t>(plan.kernels);
        const std::size_t xt_size = winograd::input_lanes(plan.tiling).floats(g.channels);
        const std::size_t dyt_size = winograd::output_lanes(plan.tiling).floats(g.outputs);
        const std::size_t v_size = plan.block_floats(g.channels);
        const std::ptrdiff_t out_spatial =
            static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
        // Per thread: xt and dxt (the group's inputs and their gradient), dyt (its output
        // gradient), v and dv (64 x channels x columns), dm (64 x outputs x columns).
        // Per task: du (64 x kernels) then db (outputs).
        const std::size_t dm_t_size = static_cast<std::size_t>(plan.block_positions) *
                                      winograd::k_lanes * static_cast<std::size_t>(g.outputs);
        prepare(plan.tasks,
                2 * xt_size + dyt_size + 2 * v_size + plan.block_floats(g.outputs) + dm_t_size,
                du_size + static_cast<std::size_t>(g.outputs));
        m_pool.run(plan.tasks, [&](int task, int thread) {
            float* du_part = m_task_grad[static_cast<std::size_t>(task)].data();
            float* db_part = du_part + du_size;
            // du_part is written by the task's first sgemms (beta 0), not cleared beforehand:
            // conv3's partial is 512 KB per task.
            float du_beta = 0.0F;
            std::fill(db_part, db_part + g.outputs, 0.0F);
            float* xt = m_thread_scratch[static_cast<std::size_t>(thread)].data();
            float* dxt = xt + xt_size;
            float* dyt = dxt + xt_size;
            float* v = dyt + dyt_size;
            float* dv = v + v_size;
            float* dm = dv + v_size;
            float* dm_t = dm + plan.block_floats(g.outputs); // one point's dm, transposed
            const auto [first, last] = split(plan.groups, plan.tasks, task);
            for (int group = first; group < last; ++group) {
                const winograd::Block images = plan.block(g, group, 0);
                for (int i = images.image; i < images.image + images.images; ++i) {
                    for (int o = 0; o < g.outputs; ++o) {
                        db_part[o] += lane_sum(dy + (i * g.outputs + o) * out_spatial, out_spatial);
                    }
                }
                winograd::gather_inputs(g, plan.tiling, images, x, xt);
                winograd::gather_output_gradients(g, plan.tiling, images, dy, dyt);
                std::fill(dxt, dxt + xt_size, 0.0F);
                for (int p = 0; p < plan.tiling.positions; p += plan.block_positions) {
                    WinogradGradientBuffers buffers{xt, dyt, v, dv, dm, dm_t, dxt};
                    winograd_backward_block(g, plan, plan.block(g, group, p), u, buffers, du_beta,
                                            du_part, dx != nullptr);
                    du_beta = 1.0F;
                }
                if (dx != nullptr) {
                    winograd::scatter_input_gradients(g, plan.tiling, images, dxt, dx);
                }
            }
        });
        if (db != nullptr) {
            reduce_tasks(plan.tasks, static_cast<std::size_t>(g.outputs), db, du_size);
        }
        // Each task sums the partial du of its kernels over the tasks, in task order, then
        // applies G^T du G to them: the reduction runs in parallel and leaves no gap in which
        // the pool's threads would go to sleep.
        float* du = scratch(m_winograd_du, du_size);
        for_kernel_lanes(plan, [&](int first, int last) {
            for (int xi = 0; xi < winograd::k_points; ++xi) {
                const std::size_t at = static_cast<std::size_t>(xi) * plan.kernels + first;
                reduce_tasks(plan.tasks, static_cast<std::size_t>(last - first), du + at, at);
            }
            winograd::kernel_gradients(g, du, first, last, dw);
        });
    }

    // Direct convolution (cpu/direct_conv.hpp) over im2col's fixed split of the batch; per-task
    // weight gradients reduced in task order as im2col's are.
    void direct_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                        float* y) {
        const int tasks = std::min(g.batch, k_conv_tasks);
        prepare(tasks, direct_conv::scratch_floats(g), 0);
        m_pool.run(tasks, [&](int task, int thread) {
            const auto [first, last] = split(g.batch, tasks, task);
            direct_conv::forward(g, x, w, b, first, last, y,
                                 m_thread_scratch[static_cast<std::size_t>(thread)].data());
        });
    }

    // w (outputs x channels x K x K) as the adjoint convolution's kernels: channels x outputs,
    // each K x K kernel turned by 180 degrees.
    float* flipped_kernels(const ConvGeometry& g, const float* w) {
        const int taps = g.kernel * g.kernel;
        float* flipped =
            scratch(m_flipped, static_cast<std::size_t>(g.outputs) * g.channels * taps);
        for (int o = 0; o < g.outputs; ++o) {
            for (int c = 0; c < g.channels; ++c) {
                const float* from = w + (static_cast<std::ptrdiff_t>(o) * g.channels + c) * taps;
                float* to = flipped + (static_cast<std::ptrdiff_t>(c) * g.outputs + o) * taps;
                for (int t = 0; t < taps; ++t) {
                    to[t] = from[taps - 1 - t];
                }
            }
        }
        return flipped;
    }

    void direct_weight_gradients(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                                 float* db) {
        const std::size_t w_size =
            static_cast<std::size_t>(g.outputs) * g.channels * g.kernel * g.kernel;
        const int tasks = std::min(g.batch, k_conv_tasks);
        prepare(tasks, direct_conv::scratch_floats(g),
                w_size + static_cast<std::size_t>(g.outputs));
        m_pool.run(tasks, [&](int task, int thread) {
            const auto [first, last] = split(g.batch, tasks, task);
            float* dw_part = m_task_grad[static_cast<std::size_t>(task)].data();
            direct_conv::weight_gradients(
                g, x, dy, first, last, dw_part, db != nullptr ? dw_part + w_size : nullptr,
                m_thread_scratch[static_cast<std::size_t>(thread)].data());
        });
        reduce_tasks(tasks, w_size, dw, 0);
        if (db != nullptr) {
            reduce_tasks(tasks, static_cast<std::size_t>(g.outputs), db, w_size);
        }
    }

    static std::pair<int, int> split(int items, int tasks, int task) {
        const auto begin = static_cast<int>(static_cast<long long>(items) * task / tasks);
        const auto end = static_cast<int>(static_cast<long long>(items) * (task + 1) / tasks);
        return {begin, end};
    }

    // Scratch per thread (temporaries), gradient partials per task (summed in task order).
    void prepare(int tasks, std::size_t scratch_count, std::size_t grad_count) {
        for (auto& buffer : m_thread_scratch) {
            scratch(buffer, scratch_count);
        }
        for (int t = 0; grad_count > 0 && t < tasks; ++t) {
            scratch(m_task_grad[static_cast<std::size_t>(t)], grad_count);
        }
    }

    // out[i] = sum over tasks, in task order, of m_task_grad[task][offset + i].
    void reduce_tasks(int tasks, std::size_t count, float* out, std::size_t offset) {
        std::copy_n(m_task_grad[0].data() + offset, count, out);
        for (int t = 1; t < tasks; ++t) {
            const float* part = m_task_grad[static_cast<std::size_t>(t)].data() + offset;
            for (std::size_t i = 0; i < count; ++i) {
                out[i] += part[i];
            }
        }
    }

    // Caffe's average pooling (cpu/pooling.hpp), a task per slice of the planes.
    void ave_pool(const PoolGeometry& g, const float* src, float* dst, bool backward) {
        const std::ptrdiff_t in_size = static_cast<std::ptrdiff_t>(g.height) * g.width;
        const std::ptrdiff_t out_size = static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
        const int planes = g.batch * g.channels;
        const int tasks = std::min(planes, k_tasks_per_thread * m_pool.size());
        const bool vectors = pool_vectors_pay(g);
        m_pool.run(tasks, [&](int task, int /*thread*/) {
            const auto [first, last] = split(planes, tasks, task);
            const float* from = src + first * (backward ? out_size : in_size);
            float* to = dst + first * (backward ? in_size : out_size);
            if (vectors) {
                (backward ? ave_pool_planes_backward : ave_pool_planes_forward)(g, last - first,
                                                                                from, to);
                return;
            }
            for (int p = 0; p < last - first; ++p) {
                if (backward) {
                    ave_pool_plane_backward_reference(g, from + p * out_size, to + p * in_size);
                } else {
                    ave_pool_plane_forward_reference(g, from + p * in_size, to + p * out_size);
                }
            }
        });
    }

    ThreadPool m_pool;
    std::vector<Scratch> m_thread_scratch;
    std::vector<Scratch> m_task_grad;
    Scratch m_winograd_u;    // G w G^T of the current weights
    Scratch m_winograd_du;   // the reduced weight gradient before G^T du G
    Scratch m_dw_transposed; // im2col's reduced weight gradient, groups transposed
    Scratch m_flipped;       // the adjoint convolution's kernels (direct dx)
};

} // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
    return std::make_unique<CpuBackend>(threads);
}

} // namespace dl::cpu
