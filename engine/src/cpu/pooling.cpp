// Pooling and ReLU loops of the CPU backend (cpu/pooling.hpp).

#include "cpu/pooling.hpp"

#include "cpu/clones.hpp"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
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

// cifar10_quick's (and Caffe's usual) pooling, 3x3 windows at stride 2 without padding, without
// the phase rows: whole output rows at a time, N output columns to a vector (16 for rows of 12 and
// more, else 8 or 4, so that narrow planes waste few lanes). An input row is read once per output
// row strip and split with shuffles into the three window columns; max pooling reduces it to its
// row maxima there and reuses them for both output rows whose windows share the row.
template <int N> struct Lanes;
template <> struct Lanes<16> {
    using Floats = float __attribute__((vector_size(16 * sizeof(float))));
    using Ints = std::int32_t __attribute__((vector_size(16 * sizeof(std::int32_t))));
};
template <> struct Lanes<8> {
    using Floats = float __attribute__((vector_size(8 * sizeof(float))));
    using Ints = std::int32_t __attribute__((vector_size(8 * sizeof(std::int32_t))));
};
template <> struct Lanes<4> {
    using Floats = float __attribute__((vector_size(4 * sizeof(float))));
    using Ints = std::int32_t __attribute__((vector_size(4 * sizeof(std::int32_t))));
};

// The shuffles take and give vectors by reference, like load and store above (cpu/clones.hpp).
// out[i] = (a, b)[2i] and (a, b)[2i + 1]: the even and the odd pixels of 2N.
template <class V, std::size_t... K>
[[gnu::always_inline]] inline void take_evens(V& out, const V& a, const V& b,
                                              std::index_sequence<K...> /*lanes*/) {
    out = DL_SHUFFLE(a, b, (2 * K)...);
}
template <class V, std::size_t... K>
[[gnu::always_inline]] inline void take_odds(V& out, const V& a, const V& b,
                                             std::index_sequence<K...> /*lanes*/) {
    out = DL_SHUFFLE(a, b, (2 * K + 1)...);
}
// out[i] = (a, b)[i + 1]: a one lane down, b's first lane last.
template <class V, std::size_t... K>
[[gnu::always_inline]] inline void shift_down(V& out, const V& a, const V& b,
                                              std::index_sequence<K...> /*lanes*/) {
    out = DL_SHUFFLE(a, b, (K + 1)...);
}
// out[i] = (a, b)[i + N - 1]: b one lane up, a's last lane first.
template <class V, std::size_t... K>
[[gnu::always_inline]] inline void shift_up(V& out, const V& a, const V& b,
                                            std::index_sequence<K...> /*lanes*/) {
    out = DL_SHUFFLE(a, b, (K + sizeof...(K) - 1)...);
}
// out = a[0], b[0], a[1], b[1], ... from lane `from` of a and b on.
template <class V, std::size_t From, std::size_t... K>
[[gnu::always_inline]] inline void interleave(V& out, const V& a, const V& b,
                                              std::index_sequence<K...> /*lanes*/) {
    out = DL_SHUFFLE(a, b, (From + K / 2 + (K % 2) * sizeof...(K))...);
}

// out = low, high: two vectors joined into one twice as wide.
template <class V, class W, std::size_t... K>
[[gnu::always_inline]] inline void join(V& out, const W& low, const W& high,
                                        std::index_sequence<K...> /*lanes*/) {
    out = DL_SHUFFLE(low, high, K...);
}

// The vector of half the lanes.
template <class V> struct Half;
template <> struct Half<Lanes<16>::Floats> { using Type = Lanes<8>::Floats; };
template <> struct Half<Lanes<16>::Ints> { using Type = Lanes<8>::Ints; };
template <> struct Half<Lanes<8>::Floats> { using Type = Lanes<4>::Floats; };
template <> struct Half<Lanes<8>::Ints> { using Type = Lanes<4>::Ints; };

// With S < N, a vector holds `group` = N / S planes' rows of S output columns: planes of width
// 2S (cifar10_quick's pool2, 16 wide, and pool3, 8 wide) a group at a time, not one plane to a
// vector that is half or three quarters empty.
template <int N, int S = N> struct Pool3x2 {
    using Floats = typename Lanes<N>::Floats;
    using Ints = typename Lanes<N>::Ints;
    static constexpr std::make_index_sequence<N> lanes{};
    static constexpr int group = N / S;

    // out[i] = v[i + 1] within each plane's S lanes, tail[0] after a plane's last.
    template <class V, std::size_t... K>
    [[gnu::always_inline]] static void next_in_plane(V& out, const V& v, const V& tail,
                                                     std::index_sequence<K...> /*lanes*/) {
        out = DL_SHUFFLE(v, tail, (K % S < S - 1 ? K + 1 : N)...);
    }
    // out[i] = v[i - 1] within each plane's S lanes, none[0] before a plane's first.
    template <class V, std::size_t... K>
    [[gnu::always_inline]] static void previous_in_plane(V& out, const V& v, const V& none,
                                                         std::index_sequence<K...> /*lanes*/) {
        out = DL_SHUFFLE(v, none, (K % S == 0 ? N : K - 1)...);
    }

    // v = N / P pieces of P lanes, `stride` apart in memory, P = N, N / 2 or N / 4.
    template <int P, class V>
    [[gnu::always_inline]] static void load_pieces(V& v, const void* p, std::ptrdiff_t stride) {
        using T = std::remove_reference_t<decltype(v[0])>;
        const T* at = static_cast<const T*>(p);
        if constexpr (P == N) {
            load(v, at);
        } else if constexpr (P == N / 2) {
            typename Half<V>::Type low;
            typename Half<V>::Type high;
            load(low, at);
            load(high, at + stride);
            join(v, low, high, lanes);
        } else {
            static_assert(P == N / 4);
            typename Half<typename Half<V>::Type>::Type q0;
            typename Half<typename Half<V>::Type>::Type q1;
            typename Half<typename Half<V>::Type>::Type q2;
            typename Half<typename Half<V>::Type>::Type q3;
            load(q0, at);
            load(q1, at + stride);
            load(q2, at + 2 * stride);
            load(q3, at + 3 * stride);
            typename Half<V>::Type low;
            typename Half<V>::Type high;
            join(low, q0, q1, std::make_index_sequence<N / 2>{});
            join(high, q2, q3, std::make_index_sequence<N / 2>{});
            join(v, low, high, lanes);
        }
    }
    // The adjoint: the pieces of P lanes of v to memory, `stride` apart.
    template <int P, class V>
    [[gnu::always_inline]] static void store_pieces(void* p, std::ptrdiff_t stride, const V& v) {
        using T = std::remove_cv_t<std::remove_reference_t<decltype(v[0])>>;
        T* at = static_cast<T*>(p);
        if constexpr (P == N) {
            std::memcpy(at, &v, sizeof v);
        } else {
            constexpr int pieces = N / P;
            for (int q = 0; q < pieces; ++q) {
                std::memcpy(at + q * stride, reinterpret_cast<const T*>(&v) + q * P, P * sizeof(T));
            }
        }
    }

    template <class V> [[gnu::always_inline]] static void load(V& v, const void* p) {
        std::memcpy(&v, p, sizeof v);
    }
    // The first n (<= N) lanes of v, `fill` in the others.
    template <class V, class T>
    [[gnu::always_inline]] static void load_first(V& v, const T* p, int n, T fill) {
        std::array<T, N> staged{};
        staged.fill(fill);
        if (n > 0) {
            std::memcpy(staged.data(), p, static_cast<std::size_t>(n) * sizeof(T));
        }
        std::memcpy(&v, staged.data(), sizeof v);
    }
    template <class V> [[gnu::always_inline]] static void store_first(void* p, const V& v, int n) {
        if (n >= N) {
            std::memcpy(p, &v, sizeof v);
        } else {
            std::memcpy(p, &v, static_cast<std::size_t>(n) * sizeof(v[0]));
        }
    }
    template <std::size_t... K>
    [[gnu::always_inline]] static void splat(Floats& v, float f, std::index_sequence<K...> /*l*/) {
        v = Floats{(static_cast<void>(K), f)...};
    }
    [[gnu::always_inline]] static void splat(Floats& v, float f) { splat(v, f, lanes); }
    [[gnu::always_inline]] static void iota(Ints& v, int first, int step) {
        for (int i = 0; i < N; ++i) {
            v[i] = first + step * i;
        }
    }

    // Window columns 0, 1 and 2 of output columns ow0 .. ow0 + N - 1 in one input row: pixels
    // 2 ow, 2 ow + 1 and 2 ow + 2, `fill` past the row.
    struct Taps {
        Floats left;
        Floats middle;
        Floats right;
    };
    [[gnu::always_inline]] static void taps(Taps& t, const float* row, int width, int ow0,
                                            float fill, std::ptrdiff_t plane) {
        if constexpr (group > 1) {
            // The group's whole rows (2S pixels): window column 2 of each plane's last output
            // column is past its row.
            Floats a;
            Floats b;
            load_pieces<2 * S>(a, row, plane);
            load_pieces<2 * S>(b, row + group / 2 * plane, plane);
            take_evens(t.left, a, b, lanes);
            take_odds(t.middle, a, b, lanes);
            const Floats tail{fill};
            next_in_plane(t.right, t.left, tail, lanes);
            return;
        }
        const int c = 2 * ow0;
        const int n = width - c;
        Floats a;
        Floats b;
        float extra = fill;
        if (n >= 2 * N) {
            load(a, row + c);
            load(b, row + c + N);
            if (n > 2 * N) {
                extra = row[c + 2 * N];
            }
        } else {
            std::array<float, 2 * N> staged{};
            staged.fill(fill);
            std::memcpy(staged.data(), row + c, static_cast<std::size_t>(n) * sizeof(float));
            load(a, staged.data());
            load(b, staged.data() + N);
        }
        take_evens(t.left, a, b, lanes);
        take_odds(t.middle, a, b, lanes);
        const Floats tail{extra}; // only its first lane moves in
        shift_down(t.right, t.left, tail, lanes);
    }

    // The maximum of each window's part in one input row and its column (Caffe's rules: the
    // first maximum, never NaN, the window's first pixel if nothing is above -FLT_MAX).
    struct RowMax {
        Floats best;
        Ints column;
    };
    [[gnu::always_inline]] static void row_max(RowMax& m, const float* row, int width, int ow0,
                                               const Ints& first, std::ptrdiff_t plane) {
        Taps t{};
        taps(t, row, width, ow0, -INFINITY, plane);
        Floats floor;
        splat(floor, -FLT_MAX);
        Ints larger = t.left > floor;
        m.best = larger ? t.left : floor;
        m.column = first;
        larger = t.middle > m.best;
        m.best = larger ? t.middle : m.best;
        m.column = larger ? first + 1 : m.column;
        larger = t.right > m.best;
        m.best = larger ? t.right : m.best;
        m.column = larger ? first + 2 : m.column;
    }

    // Each lane's window's first column, 2 (ow0 + lane) in its plane (with S < N, the lanes of
    // the next plane start over).
    [[gnu::always_inline]] static void first_columns(Ints& v, int ow0) {
        for (int i = 0; i < N; ++i) {
            v[i] = 2 * (ow0 + i % S);
        }
    }
    // Output row oh's lanes from ow0 on (n of them in a plane).
    template <class V>
    [[gnu::always_inline]] static void store_row(void* p, std::ptrdiff_t plane, const V& v, int n) {
        if constexpr (group > 1) {
            store_pieces<S>(p, plane, v);
        } else {
            store_first(p, v, n);
        }
    }

    // The row-major scan of a window is the scan of its rows' maxima in row order: a row's
    // first maximum is where a scan coming from the rows above would stop, if it is larger.
    [[gnu::always_inline]] static void max_forward(const PoolGeometry& g, const float* x, float* y,
                                                   std::int32_t* arg) {
        const int out_h = g.out_height();
        const int out_w = g.out_width();
        const int width = g.width;
        const int height = g.height;
        const std::ptrdiff_t in_plane = static_cast<std::ptrdiff_t>(height) * width;
        const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(out_h) * out_w;
        for (int ow0 = 0; ow0 < out_w; ow0 += N) {
            Ints first;
            first_columns(first, ow0);
            RowMax top{};
            row_max(top, x, width, ow0, first, in_plane);
            for (int oh = 0; oh < out_h; ++oh) {
                const int h = 2 * oh;
                Floats best = top.best;
                Ints index = top.column + h * width;
                if (h + 1 < height) {
                    RowMax middle{};
                    row_max(middle, x + static_cast<std::ptrdiff_t>(h + 1) * width, width, ow0,
                            first, in_plane);
                    const Ints larger = middle.best > best;
                    best = larger ? middle.best : best;
                    index = larger ? middle.column + (h + 1) * width : index;
                }
                // The next output row's first.
                if (h + 2 < height) {
                    row_max(top, x + static_cast<std::ptrdiff_t>(h + 2) * width, width, ow0, first,
                            in_plane);
                    const Ints larger = top.best > best;
                    best = larger ? top.best : best;
                    index = larger ? top.column + (h + 2) * width : index;
                }
                const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(oh) * out_w + ow0;
                store_row(y + at, out_plane, best, out_w - ow0);
                store_row(arg + at, out_plane, index, out_w - ow0);
            }
        }
    }

    [[gnu::always_inline]] static void add_taps(Floats& sum, const Taps& t) {
        sum += t.left;
        sum += t.middle;
        sum += t.right;
    }

    [[gnu::always_inline]] static void ave_forward(const PoolGeometry& g, const float* x,
                                                   float* y) {
        const int out_h = g.out_height();
        const int out_w = g.out_width();
        const int width = g.width;
        const int height = g.height;
        const std::ptrdiff_t in_plane = static_cast<std::ptrdiff_t>(height) * width;
        const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(out_h) * out_w;
        for (int ow0 = 0; ow0 < out_w; ow0 += N) {
            // The windows' widths, clipped to the image (1 past the last output column).
            Floats columns;
            for (int i = 0; i < N; ++i) {
                const int ow = ow0 + i % S;
                columns[i] =
                    ow < out_w ? static_cast<float>(std::min(2 * ow + 3, width) - 2 * ow) : 1.0F;
            }
            // -0 past the row: adding it changes no sum, so the sums are the reference's.
            Taps top{};
            taps(top, x, width, ow0, -0.0F, in_plane);
            for (int oh = 0; oh < out_h; ++oh) {
                const int h = 2 * oh;
                Floats sum{};
                add_taps(sum, top);
                if (h + 1 < height) {
                    Taps middle{};
                    taps(middle, x + static_cast<std::ptrdiff_t>(h + 1) * width, width, ow0, -0.0F,
                         in_plane);
                    add_taps(sum, middle);
                }
                // The next output row's first.
                if (h + 2 < height) {
                    taps(top, x + static_cast<std::ptrdiff_t>(h + 2) * width, width, ow0, -0.0F,
                         in_plane);
                    add_taps(sum, top);
                }
                // Small integers: the product is exact, the reference's divisor.
                const float rows = static_cast<float>(std::min(h + 3, height) - h);
                const Floats quotient = sum / (rows * columns);
                store_row(y + static_cast<std::ptrdiff_t>(oh) * out_w + ow0, out_plane, quotient,
                          out_w - ow0);
            }
        }
    }

    // The backward passes gather: input pixel pairs (2k, 2k + 1), k = k0 .. k0 + N - 1, of an
    // input row sum what their windows send them, in the windows' row-major order (the
    // reference's scatter order): pixel 2k lies in window columns k - 1 and k, pixel 2k + 1 in
    // k only, and a row 2m in window rows m - 1 and m, a row 2m + 1 in m only. A window that
    // sends nothing (or does not exist) adds -0, which changes no sum.
    struct Sent {
        Ints arg;      // window column k's argmax (max pooling), -1 where none
        Floats value;  // what it sends, -0 where none
        Ints arg_left; // the same for window column k - 1
        Floats value_left;
    };
    [[gnu::always_inline]] static void sent(Sent& s, const float* dy, const std::int32_t* arg,
                                            int out_w, int k0, std::ptrdiff_t out_plane) {
        if constexpr (group > 1) {
            // The group's whole window rows; window column k - 1 of each plane's first is none.
            load_pieces<S>(s.value, dy, out_plane);
            Floats none;
            splat(none, -0.0F);
            previous_in_plane(s.value_left, s.value, none, lanes);
            if (arg != nullptr) {
                load_pieces<S>(s.arg, arg, out_plane);
                previous_in_plane(s.arg_left, s.arg, Ints{} - 1, lanes);
            }
            return;
        }
        if (k0 + N <= out_w) {
            load(s.value, dy + k0);
            if (arg != nullptr) {
                load(s.arg, arg + k0);
            }
        } else {
            load_first(s.value, dy + k0, out_w - k0, -0.0F);
            if (arg != nullptr) {
                load_first(s.arg, arg + k0, out_w - k0, -1);
            }
        }
        if (k0 == 0) {
            Floats none;
            splat(none, -0.0F);
            shift_up(s.value_left, none, s.value, lanes);
            if (arg != nullptr) {
                shift_up(s.arg_left, Ints{} - 1, s.arg, lanes);
            }
        } else if (k0 - 1 + N <= out_w) {
            load(s.value_left, dy + k0 - 1);
            if (arg != nullptr) {
                load(s.arg_left, arg + k0 - 1);
            }
        } else {
            load_first(s.value_left, dy + k0 - 1, out_w - k0 + 1, -0.0F);
            if (arg != nullptr) {
                load_first(s.arg_left, arg + k0 - 1, out_w - k0 + 1, -1);
            }
        }
    }

    // Stores the even and the odd pixels' sums interleaved: pixels 2 k0 .. 2 k0 + 2N - 1 of row.
    [[gnu::always_inline]] static void store_pairs(float* row, int width, int k0,
                                                   const Floats& even, const Floats& odd,
                                                   std::ptrdiff_t plane) {
        Floats low;
        Floats high;
        interleave<Floats, 0>(low, even, odd, lanes);
        interleave<Floats, N / 2>(high, even, odd, lanes);
        if constexpr (group > 1) {
            // The first group / 2 planes' rows, then the others'.
            store_pieces<2 * S>(row, plane, low);
            store_pieces<2 * S>(row + group / 2 * plane, plane, high);
            return;
        }
        const int n = width - 2 * k0;
        store_first(row + 2 * k0, low, n);
        if (n > N) {
            store_first(row + 2 * k0 + N, high, n - N);
        }
    }

    // The widths of window columns k and k - 1, k = k0 + lane, clipped to the image (1 where
    // there is no window: -0 over 1 stays -0).
    struct Widths {
        Floats columns;
        Floats columns_left;
    };
    [[gnu::always_inline]] static void widths(Widths& w, int width, int out_w, int k0) {
        for (int i = 0; i < N; ++i) {
            const int k = k0 + i % S;
            w.columns[i] =
                k < out_w ? static_cast<float>(std::min(2 * k + 3, width) - 2 * k) : 1.0F;
            w.columns_left[i] = k >= 1 && k - 1 < out_w
                                    ? static_cast<float>(std::min(2 * k + 1, width) - 2 * k + 2)
                                    : 1.0F;
        }
    }

    // What window row oh sends to the pixel pairs from k0 on: max pooling sends dy to its
    // argmax, average pooling dy over the window's size (clipped to the image: exact integers,
    // so the reference's division) to every pixel, -0 where there is no window.
    template <bool Max>
    [[gnu::always_inline]] static void load_sent(Sent& s, const PoolGeometry& g, const float* dy,
                                                 const std::int32_t* arg, int oh, int k0,
                                                 const Widths& w) {
        const int out_w = g.out_width();
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(oh) * out_w;
        sent(s, dy + at, Max ? arg + at : nullptr, out_w, k0,
             static_cast<std::ptrdiff_t>(g.out_height()) * out_w);
        if constexpr (!Max) {
            const float rows = static_cast<float>(std::min(2 * oh + 3, g.height) - 2 * oh);
            s.value = s.value / (rows * w.columns);
            // Window column k - 1's share is column k's one lane up where that is in the vector
            // (the same quotient): one division, not two.
            Floats none;
            splat(none, -0.0F);
            if constexpr (group > 1) {
                previous_in_plane(s.value_left, s.value, none, lanes);
            } else if (k0 == 0) {
                shift_up(s.value_left, none, s.value, lanes);
            } else {
                s.value_left = s.value_left / (rows * w.columns_left);
            }
        }
    }

    // Adds what window row s sends to input row pixel pairs (pixel: the even ones' indices in
    // the plane). Max pooling adds only where the argmax is the pixel: adding -0 elsewhere would
    // change nothing.
    template <bool Max>
    [[gnu::always_inline]] static void add_sent(Floats& even, Floats& odd, const Sent& s,
                                                const Ints& pixel) {
        if constexpr (Max) {
            even = s.arg_left == pixel ? even + s.value_left : even;
            even = s.arg == pixel ? even + s.value : even;
            odd = s.arg == pixel + 1 ? odd + s.value : odd;
        } else {
            even += s.value_left;
            even += s.value;
            odd += s.value;
        }
    }

    // dx: each input row's pixel pairs sum what the window rows that hold it send, in order:
    // row 2m gets window rows m - 1 and m, row 2m + 1 window row m.
    template <bool Max>
    [[gnu::always_inline]] static void gather(const PoolGeometry& g, const float* dy,
                                              const std::int32_t* arg, float* dx) {
        const int out_h = g.out_height();
        const int width = g.width;
        const int height = g.height;
        const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(height) * width;
        Ints lane;
        first_columns(lane, 0);
        for (int k0 = 0; 2 * k0 < width; k0 += N) {
            Widths w{};
            if constexpr (!Max) {
                widths(w, width, g.out_width(), k0);
            }
            Sent above{};
            Sent below{};
            for (int m = 0; 2 * m < height; ++m) {
                float* row = dx + static_cast<std::ptrdiff_t>(2 * m) * width;
                const Ints pixel = lane + (2 * m * width + 2 * k0);
                Floats even{};
                Floats odd{};
                if (m >= 1) {
                    add_sent<Max>(even, odd, above, pixel);
                }
                if (m >= out_h) { // the last row, below the last window's first
                    store_pairs(row, width, k0, even, odd, plane);
                    break;
                }
                load_sent<Max>(below, g, dy, arg, m, k0, w);
                add_sent<Max>(even, odd, below, pixel);
                store_pairs(row, width, k0, even, odd, plane);
                if (2 * m + 1 < height) {
                    Floats even_below{};
                    Floats odd_below{};
                    add_sent<Max>(even_below, odd_below, below, pixel + width);
                    store_pairs(row + width, width, k0, even_below, odd_below, plane);
                }
                above = below;
            }
        }
    }
};

bool is_3x3_stride_2(const PoolGeometry& g) {
    return g.kernel == 3 && g.stride == 2 && g.pad == 0;
}

enum class Pass { max_forward, ave_forward, max_backward, ave_backward };

// Planes p .. of `planes` one after the other (arg: max pooling's argmax, written forward and read
// backward) a group at a time, as many groups as there are.
template <Pass P, int N, int S>
[[gnu::always_inline]] inline void
pool_3x3_stride_2_planes(const PoolGeometry& g, int& p, int planes, const float* from, float* to,
                         const std::int32_t* arg_in, std::int32_t* arg_out) {
    using Pool = Pool3x2<N, S>;
    constexpr bool forward = P == Pass::max_forward || P == Pass::ave_forward;
    const std::ptrdiff_t in_plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
    const std::ptrdiff_t from_plane = forward ? in_plane : out_plane;
    const std::ptrdiff_t to_plane = forward ? out_plane : in_plane;
    for (; p + Pool::group <= planes; p += Pool::group) {
        const float* x = from + p * from_plane;
        float* y = to + p * to_plane;
        if constexpr (P == Pass::max_forward) {
            Pool::max_forward(g, x, y, arg_out + p * out_plane);
        } else if constexpr (P == Pass::ave_forward) {
            Pool::ave_forward(g, x, y);
        } else if constexpr (P == Pass::max_backward) {
            Pool::template gather<true>(g, x, arg_in + p * out_plane, y);
        } else {
            Pool::template gather<false>(g, x, nullptr, y);
        }
    }
}

// Planes 16 or 8 pixels wide two or four to a vector, the others (and those left over) one at a
// time. Inlined into the clones of its callers.
template <Pass P>
[[gnu::always_inline]] inline void
pool_3x3_stride_2(const PoolGeometry& geometry, int planes, const float* from, float* to,
                  const std::int32_t* arg_in, std::int32_t* arg_out) {
    // A copy the stores cannot alias: the loops keep its fields in registers.
    const PoolGeometry g = geometry;
    int p = 0;
    if (g.width == 16) {
        pool_3x3_stride_2_planes<P, 16, 8>(g, p, planes, from, to, arg_in, arg_out);
    } else if (g.width == 8) {
        pool_3x3_stride_2_planes<P, 16, 4>(g, p, planes, from, to, arg_in, arg_out);
    }
    const int columns = g.out_width();
    if (columns >= 12) {
        pool_3x3_stride_2_planes<P, 16, 16>(g, p, planes, from, to, arg_in, arg_out);
    } else if (columns >= 6) {
        pool_3x3_stride_2_planes<P, 8, 8>(g, p, planes, from, to, arg_in, arg_out);
    } else {
        pool_3x3_stride_2_planes<P, 4, 4>(g, p, planes, from, to, arg_in, arg_out);
    }
}

// The general loops, one plane.
DL_CPU_CLONES
void max_pool_plane_phases(const PoolGeometry& geometry, const float* x, float* y,
                           std::int32_t* arg) {
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

DL_CPU_CLONES
void ave_pool_plane_phases_forward(const PoolGeometry& geometry, const float* x, float* y) {
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

DL_CPU_CLONES
void ave_pool_plane_phases_backward(const PoolGeometry& geometry, const float* dy, float* dx) {
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

} // namespace

bool pool_vectors_pay(const PoolGeometry& g) {
    return is_3x3_stride_2(g) || g.out_width() >= k_width;
}

DL_CPU_CLONES
void max_pool_planes(const PoolGeometry& g, int planes, const float* x, float* y,
                     std::int32_t* arg) {
    if (is_3x3_stride_2(g)) {
        pool_3x3_stride_2<Pass::max_forward>(g, planes, x, y, nullptr, arg);
        return;
    }
    const std::ptrdiff_t in_plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
    for (int p = 0; p < planes; ++p) {
        max_pool_plane_phases(g, x + p * in_plane, y + p * out_plane, arg + p * out_plane);
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
void ave_pool_planes_forward(const PoolGeometry& g, int planes, const float* x, float* y) {
    if (is_3x3_stride_2(g)) {
        pool_3x3_stride_2<Pass::ave_forward>(g, planes, x, y, nullptr, nullptr);
        return;
    }
    const std::ptrdiff_t in_plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
    for (int p = 0; p < planes; ++p) {
        ave_pool_plane_phases_forward(g, x + p * in_plane, y + p * out_plane);
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
void ave_pool_planes_backward(const PoolGeometry& g, int planes, const float* dy, float* dx) {
    if (is_3x3_stride_2(g)) {
        pool_3x3_stride_2<Pass::ave_backward>(g, planes, dy, dx, nullptr, nullptr);
        return;
    }
    const std::ptrdiff_t in_plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
    for (int p = 0; p < planes; ++p) {
        ave_pool_plane_phases_backward(g, dy + p * out_plane, dx + p * in_plane);
    }
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

DL_CPU_CLONES
void max_pool_planes_backward(const PoolGeometry& g, int planes, const float* dy,
                              const std::int32_t* arg, float* dx) {
    if (is_3x3_stride_2(g)) {
        pool_3x3_stride_2<Pass::max_backward>(g, planes, dy, dx, arg, nullptr);
        return;
    }
    const std::ptrdiff_t in_plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
    for (int p = 0; p < planes; ++p) {
        max_pool_plane_backward_reference(g, dy + p * out_plane, arg + p * out_plane,
                                          dx + p * in_plane);
    }
}

void max_pool_plane_backward_reference(const PoolGeometry& g, const float* dy,
                                       const std::int32_t* arg, float* dx) {
    const std::ptrdiff_t out_size = static_cast<std::ptrdiff_t>(g.out_height()) * g.out_width();
    std::fill(dx, dx + static_cast<std::ptrdiff_t>(g.height) * g.width, 0.0F);
    for (std::ptrdiff_t i = 0; i < out_size; ++i) {
        dx[arg[i]] += dy[i];
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
