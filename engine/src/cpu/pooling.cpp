// Pooling and ReLU loops of the CPU backend (cpu/pooling.hpp).

#include "cpu/pooling.hpp"

#include "cpu/clones.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

namespace dl::cpu {
namespace {

// The window rows [h0, h1) or columns of output index o: clipped to the image, and the size
// average pooling divides by (clipped to the image plus its padding only).
struct Window {
    Window(int o, int stride, int pad, int kernel, int size)
        : start(o * stride - pad), end(std::min(start + kernel, size + pad)),
          padded_size(end - start), first(std::max(start, 0)), last(std::min(end, size)) {}
    int start;
    int end;
    int padded_size;
    int first; // in the image
    int last;
};

// Output columns are computed k_width at a time in vector registers (GCC/Clang vector
// extensions: one AVX register, two SSE ones), so a window's maximum or sum never leaves them.
constexpr int k_width = 8;
using Floats = float __attribute__((vector_size(k_width * sizeof(float))));
using Ints = std::int32_t __attribute__((vector_size(k_width * sizeof(std::int32_t))));

// By reference: a vector passed by value would change the calling convention between the
// clones (cpu/clones.hpp).
[[gnu::always_inline]] inline void load(Floats& v, const float* p) {
    std::memcpy(&v, p, sizeof v);
}
[[gnu::always_inline]] inline void store(float* p, const Floats& v) {
    std::memcpy(p, &v, sizeof v);
}

int round_up(int n) {
    return (n + k_width - 1) / k_width * k_width;
}

// The phase rows of one padded input row: phase r, element i = padded pixel stride * i + r.
// Long enough for window column j of every output column of a whole vector (element ow + j /
// stride, ow < round_up(out_w)) and for every pixel of the row (average pooling's gradient
// reads them all back).
struct Phases {
    explicit Phases(const PoolGeometry& g)
        : stride(g.stride), pad(g.pad), width(g.width),
          length(std::max(round_up(g.out_width()) + (g.kernel - 1) / g.stride,
                          (g.width - 1 + g.pad) / g.stride + 1)) {}
    int stride;
    int pad;
    int width;
    int length;
    [[nodiscard]] std::size_t floats() const {
        return static_cast<std::size_t>(stride) * static_cast<std::size_t>(length);
    }
    // Window column j's pixels for output columns 0, 1, ... in phases.
    [[nodiscard]] std::ptrdiff_t column(int j) const {
        return static_cast<std::ptrdiff_t>(j % stride) * length + j / stride;
    }
    // column(j + 1) from column(j) and phase = j % stride, which it advances: no division in
    // the window loops (an idiv per window column was the costliest instruction of 3x3/2 max
    // pooling).
    [[nodiscard]] std::ptrdiff_t next_column(std::ptrdiff_t at, int& phase) const {
        if (++phase < stride) {
            return at + length;
        }
        phase = 0;
        return at - static_cast<std::ptrdiff_t>(stride - 1) * length + 1;
    }
    // The elements [first, last) of phase r that are image pixels (the rest is padding).
    [[nodiscard]] int first(int r) const {
        return std::min(length, (pad - r + stride - 1) / stride);
    }
    [[nodiscard]] int last(int r) const {
        const int span = width - 1 + pad - r;
        return span < 0 ? first(r) : std::max(first(r), std::min(length, span / stride + 1));
    }
};

// Phase rows of a plane (rows p.floats() apart) from its pixel rows, `fill` in the padding.
// Stride is a constant for the common strides, so that the strided copies vectorise; 0:
// p.stride. Inlined: they take the caller's clone (cpu/clones.hpp).
template <int Stride>
[[gnu::always_inline]] inline void split_rows(const float* x, int height, const Phases& p,
                                              float fill, float* phases) {
    const std::ptrdiff_t stride = Stride > 0 ? Stride : p.stride;
    for (int h = 0; h < height; ++h) {
        for (int r = 0; r < stride; ++r) {
            float* phase = phases + static_cast<std::ptrdiff_t>(p.floats()) * h + p.length * r;
            const float* pixels = x + static_cast<std::ptrdiff_t>(h) * p.width + r - p.pad;
            const int first = p.first(static_cast<int>(r));
            const int last = p.last(static_cast<int>(r));
            std::fill(phase, phase + first, fill);
            for (int i = first; i < last; ++i) {
                phase[i] = pixels[stride * i];
            }
            std::fill(phase + last, phase + p.length, fill);
        }
    }
}

// The adjoint: the pixels of the phase rows back into the plane.
template <int Stride>
[[gnu::always_inline]] inline void merge_rows(const float* phases, int height, const Phases& p,
                                              float* x) {
    const std::ptrdiff_t stride = Stride > 0 ? Stride : p.stride;
    for (int h = 0; h < height; ++h) {
        for (int r = 0; r < stride; ++r) {
            const float* phase =
                phases + static_cast<std::ptrdiff_t>(p.floats()) * h + p.length * r;
            float* pixels = x + static_cast<std::ptrdiff_t>(h) * p.width + r - p.pad;
            const int last = p.last(static_cast<int>(r));
            for (int i = p.first(static_cast<int>(r)); i < last; ++i) {
                pixels[stride * i] = phase[i];
            }
        }
    }
}

[[gnu::always_inline]] inline void split_plane(const float* x, int height, const Phases& p,
                                               float fill, float* phases) {
    switch (p.stride) {
    case 1:
        return split_rows<1>(x, height, p, fill, phases);
    case 2:
        return split_rows<2>(x, height, p, fill, phases);
    default:
        return split_rows<0>(x, height, p, fill, phases);
    }
}

[[gnu::always_inline]] inline void merge_plane(const float* phases, int height, const Phases& p,
                                               float* x) {
    switch (p.stride) {
    case 1:
        return merge_rows<1>(phases, height, p, x);
    case 2:
        return merge_rows<2>(phases, height, p, x);
    default:
        return merge_rows<0>(phases, height, p, x);
    }
}

// Scratch of the calling thread (pooling runs on the backend's pool): grown, never shrunk.
float* thread_floats(std::size_t count) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < count) {
        buffer.resize(count);
    }
    return buffer.data();
}

// A second scratch of the calling thread, for when the first holds the plane's phases.
float* thread_floats_2(std::size_t count) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < count) {
        buffer.resize(count);
    }
    return buffer.data();
}

DL_CPU_CLONES
void relu_forward_in_place(std::size_t n, float* __restrict x) {
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = x[i] > 0.0F ? x[i] : 0.0F;
    }
}

DL_CPU_CLONES
void relu_forward_copy(std::size_t n, const float* __restrict x, float* __restrict y) {
    for (std::size_t i = 0; i < n; ++i) {
        y[i] = x[i] > 0.0F ? x[i] : 0.0F;
    }
}

// dy is read whatever y holds: a load under the condition kept GCC from vectorising the loop
// (one compare and branch per element: 4% of a cifar10_quick step).
DL_CPU_CLONES
void relu_backward_in_place(std::size_t n, const float* __restrict y, float* __restrict d) {
    for (std::size_t i = 0; i < n; ++i) {
        const float grad = d[i];
        d[i] = y[i] > 0.0F ? grad : 0.0F;
    }
}

DL_CPU_CLONES
void relu_backward_copy(std::size_t n, const float* __restrict y, const float* __restrict dy,
                        float* __restrict dx) {
    for (std::size_t i = 0; i < n; ++i) {
        const float grad = dy[i];
        dx[i] = y[i] > 0.0F ? grad : 0.0F;
    }
}

} // namespace

bool pool_vectors_pay(const PoolGeometry& g) {
    return g.out_width() >= k_width;
}

DL_CPU_CLONES
void max_pool_plane(const PoolGeometry& geometry, const float* x, float* y, std::int32_t* arg) {
    // A copy the stores below cannot alias: the loops keep its fields in registers.
    const PoolGeometry g = geometry;
    const int out_w = g.out_width();
    const Phases p(g);
    float* phases = thread_floats(p.floats() * static_cast<std::size_t>(g.height));
    // -inf in the padding: never above -FLT_MAX, so the padding never wins.
    split_plane(x, g.height, p, -INFINITY, phases);
    Ints lane{};
    for (int i = 0; i < k_width; ++i) {
        lane[i] = i;
    }
    for (int oh = 0; oh < g.out_height(); ++oh) {
        const Window rows(oh, g.stride, g.pad, g.kernel, g.height);
        for (int ow0 = 0; ow0 < out_w; ow0 += k_width) {
            const Ints ow = ow0 + lane;
            const Ints start = ow * g.stride - g.pad;
            Ints index = rows.first * g.width + (start < 0 ? 0 : start);
            Floats best = Floats{} - FLT_MAX;
            for (int h = rows.first; h < rows.last; ++h) {
                const float* row = phases + p.floats() * static_cast<std::size_t>(h) + ow0;
                Ints pixel = h * g.width + start;
                std::ptrdiff_t column = 0;
                int phase = 0;
                for (int j = 0; j < g.kernel; ++j) {
                    Floats v;
                    load(v, row + column);
                    const Ints larger = v > best;
                    best = larger ? v : best;
                    index = larger ? pixel : index;
                    pixel += 1;
                    column = p.next_column(column, phase);
                }
            }
            const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(oh) * out_w + ow0;
            if (ow0 + k_width <= out_w) {
                store(y + at, best);
                std::memcpy(arg + at, &index, sizeof index);
                continue;
            }
            for (int i = 0; i < out_w - ow0; ++i) {
                y[at + i] = best[i];
                arg[at + i] = index[i];
            }
        }
    }
}

void max_pool_plane_reference(const PoolGeometry& g, const float* x, float* y, std::int32_t* arg) {
    const int out_h = g.out_height();
    const int out_w = g.out_width();
    for (int oh = 0; oh < out_h; ++oh) {
        const Window rows(oh, g.stride, g.pad, g.kernel, g.height);
        for (int ow = 0; ow < out_w; ++ow) {
            const Window cols(ow, g.stride, g.pad, g.kernel, g.width);
            float best = -FLT_MAX;
            int best_index = rows.first * g.width + cols.first;
            for (int h = rows.first; h < rows.last; ++h) {
                for (int w = cols.first; w < cols.last; ++w) {
                    const float v = x[h * g.width + w];
                    if (v > best) {
                        best = v;
                        best_index = h * g.width + w;
                    }
                }
            }
            y[oh * out_w + ow] = best;
            arg[oh * out_w + ow] = best_index;
        }
    }
}

DL_CPU_CLONES
void ave_pool_plane_forward(const PoolGeometry& geometry, const float* x, float* y) {
    // A copy the stores below cannot alias: the loops keep its fields in registers.
    const PoolGeometry g = geometry;
    const int out_w = g.out_width();
    const Phases p(g);
    float* phases = thread_floats(p.floats() * static_cast<std::size_t>(g.height));
    // -0 in the padding: adding it changes no sum, so the sums are the reference's, in its
    // order.
    split_plane(x, g.height, p, -0.0F, phases);
    // The padded width of each output column's window (1 past the last column).
    float* column_sizes = thread_floats_2(static_cast<std::size_t>(round_up(out_w)));
    for (int ow = 0; ow < round_up(out_w); ++ow) {
        column_sizes[ow] =
            ow < out_w
                ? static_cast<float>(Window(ow, g.stride, g.pad, g.kernel, g.width).padded_size)
                : 1.0F;
    }
    for (int oh = 0; oh < g.out_height(); ++oh) {
        const Window rows(oh, g.stride, g.pad, g.kernel, g.height);
        for (int ow0 = 0; ow0 < out_w; ow0 += k_width) {
            Floats sum{};
            for (int h = rows.first; h < rows.last; ++h) {
                const float* row = phases + p.floats() * static_cast<std::size_t>(h) + ow0;
                std::ptrdiff_t column = 0;
                int phase = 0;
                for (int j = 0; j < g.kernel; ++j) {
                    Floats v;
                    load(v, row + column);
                    sum += v;
                    column = p.next_column(column, phase);
                }
            }
            float* out = y + static_cast<std::ptrdiff_t>(oh) * out_w + ow0;
            // The window sizes are small integers: their products convert to float exactly,
            // so dividing by rows x columns in a vector is the reference's division.
            Floats size;
            load(size, column_sizes + ow0);
            const Floats quotient = sum / (static_cast<float>(rows.padded_size) * size);
            if (ow0 + k_width <= out_w) {
                store(out, quotient);
                continue;
            }
            for (int i = 0; i < out_w - ow0; ++i) {
                out[i] = quotient[i];
            }
        }
    }
}

void ave_pool_plane_forward_reference(const PoolGeometry& g, const float* x, float* y) {
    const int out_h = g.out_height();
    const int out_w = g.out_width();
    for (int oh = 0; oh < out_h; ++oh) {
        const Window rows(oh, g.stride, g.pad, g.kernel, g.height);
        for (int ow = 0; ow < out_w; ++ow) {
            const Window cols(ow, g.stride, g.pad, g.kernel, g.width);
            float sum = 0.0F;
            for (int h = rows.first; h < rows.last; ++h) {
                for (int w = cols.first; w < cols.last; ++w) {
                    sum += x[h * g.width + w];
                }
            }
            y[oh * out_w + ow] = sum / static_cast<float>(rows.padded_size * cols.padded_size);
        }
    }
}

DL_CPU_CLONES
void ave_pool_plane_backward(const PoolGeometry& geometry, const float* dy, float* dx) {
    // A copy the stores below cannot alias: the loops keep its fields in registers.
    const PoolGeometry g = geometry;
    const int out_w = g.out_width();
    const Phases p(g);
    // The gradient of every input row (the padding included) in phases, merged at the end.
    const std::size_t grad_floats = p.floats() * static_cast<std::size_t>(g.height);
    float* grad = thread_floats(grad_floats + static_cast<std::size_t>(round_up(out_w)));
    float* share = grad + grad_floats;
    std::fill(grad, grad + grad_floats, 0.0F);
    // -0 past the last output column: the vectors' extra lanes add it, which changes nothing.
    std::fill(share + out_w, share + round_up(out_w), -0.0F);
    for (int oh = 0; oh < g.out_height(); ++oh) {
        const Window rows(oh, g.stride, g.pad, g.kernel, g.height);
        for (int ow = 0; ow < out_w; ++ow) {
            const Window cols(ow, g.stride, g.pad, g.kernel, g.width);
            share[ow] =
                dy[oh * out_w + ow] / static_cast<float>(rows.padded_size * cols.padded_size);
        }
        for (int h = rows.first; h < rows.last; ++h) {
            float* row = grad + p.floats() * static_cast<std::size_t>(h);
            // A pixel takes window column j from output column (pixel - j) / stride: j downwards
            // visits its windows left to right, the reference's order.
            for (int j = g.kernel - 1; j >= 0; --j) {
                float* column = row + p.column(j);
                for (int ow0 = 0; ow0 < out_w; ow0 += k_width) {
                    Floats sum;
                    Floats add;
                    load(sum, column + ow0);
                    load(add, share + ow0);
                    sum += add;
                    store(column + ow0, sum);
                }
            }
        }
    }
    merge_plane(grad, g.height, p, dx);
}

void ave_pool_plane_backward_reference(const PoolGeometry& g, const float* dy, float* dx) {
    const int out_h = g.out_height();
    const int out_w = g.out_width();
    std::fill(dx, dx + static_cast<std::ptrdiff_t>(g.height) * g.width, 0.0F);
    for (int oh = 0; oh < out_h; ++oh) {
        const Window rows(oh, g.stride, g.pad, g.kernel, g.height);
        for (int ow = 0; ow < out_w; ++ow) {
            const Window cols(ow, g.stride, g.pad, g.kernel, g.width);
            const float share =
                dy[oh * out_w + ow] / static_cast<float>(rows.padded_size * cols.padded_size);
            for (int h = rows.first; h < rows.last; ++h) {
                for (int w = cols.first; w < cols.last; ++w) {
                    dx[h * g.width + w] += share;
                }
            }
        }
    }
}

void relu_forward(std::size_t n, const float* x, float* y) {
    if (x == y) {
        relu_forward_in_place(n, y);
    } else {
        relu_forward_copy(n, x, y);
    }
}

void relu_backward(std::size_t n, const float* y, const float* dy, float* dx) {
    if (dy == dx) {
        relu_backward_in_place(n, y, dx);
    } else {
        relu_backward_copy(n, y, dy, dx);
    }
}

} // namespace dl::cpu
