// The direct convolution kernels (cpu/direct_conv.hpp). Every image is first copied into
// zero-padded planes, wide enough for whole vectors past the right edge, so that the tap loops
// need no bounds checks; the columns computed past the output's edge are dropped.

#include "cpu/direct_conv.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace dl::cpu::direct_conv {
namespace {

constexpr int k_max_taps = 256;
constexpr int k_min_width = 16;
constexpr std::size_t k_max_scratch_floats = std::size_t{1} << 21U; // 8 MB

// A register blocking. forward: fwd_outs output channels x fwd_vecs vectors along a row in
// accumulators; weight gradient: grad_outs output channels x grad_taps taps. Each fits the
// register file of its target with room for the operands: 16 + 20 of AVX-512's 32 registers,
// 8 + 10 of AVX2's (and SSE's) 16.
struct Wide {
    using V = float __attribute__((vector_size(64)));
    static constexpr int width = 16;
    static constexpr int fwd_outs = 8;
    static constexpr int fwd_vecs = 2;
    static constexpr int grad_outs = 4;
    static constexpr int grad_taps = 5;
};
struct Narrow {
    using V = float __attribute__((vector_size(32)));
    static constexpr int width = 8;
    static constexpr int fwd_outs = 4;
    static constexpr int fwd_vecs = 2;
    static constexpr int grad_outs = 2;
    static constexpr int grad_taps = 5;
};
struct Base {
    using V = float __attribute__((vector_size(16)));
    static constexpr int width = 4;
    static constexpr int fwd_outs = 4;
    static constexpr int fwd_vecs = 2;
    static constexpr int grad_outs = 2;
    static constexpr int grad_taps = 5;
};

constexpr int round_up(int n, int to) {
    return (n + to - 1) / to * to;
}

// Sizes of one blocking's buffers. The padded planes are the image with `pad` zeros around it,
// widened to cover the last forward segment's vectors at every tap. Scratch: the padded planes,
// the forward's weights [output block][tap][fwd_outs], the gradient's vector sums
// [outputs][taps][width] and the bias gradient's [outputs][width].
template <class C> struct Layout {
    explicit Layout(const ConvGeometry& g)
        : out_h(g.out_height()), out_w(g.out_width()), taps(g.channels * g.kernel * g.kernel),
          grad_taps(round_up(taps, C::grad_taps)), rows(g.height + 2 * g.pad),
          cols(round_up(out_w, C::width * C::fwd_vecs) + g.kernel - 1),
          plane(static_cast<std::ptrdiff_t>(rows) * cols),
          fwd_outputs(round_up(g.outputs, C::fwd_outs)),
          grad_outputs(round_up(g.outputs, C::grad_outs)),
          x_floats(static_cast<std::size_t>(g.channels) * static_cast<std::size_t>(plane)),
          w_floats(static_cast<std::size_t>(fwd_outputs) * taps),
          dw_floats(static_cast<std::size_t>(grad_outputs) * grad_taps * C::width),
          db_floats(static_cast<std::size_t>(g.outputs) * C::width) {}
    int out_h;
    int out_w;
    int taps;
    int grad_taps; // taps rounded up to whole gradient blocks
    int rows;      // of a padded plane
    int cols;
    std::ptrdiff_t plane;
    int fwd_outputs; // outputs rounded up to whole blocks
    int grad_outputs;
    std::size_t x_floats;
    std::size_t w_floats;
    std::size_t dw_floats;
    std::size_t db_floats;
    [[nodiscard]] std::size_t scratch() const {
        return x_floats + std::max(w_floats, dw_floats + db_floats);
    }
};

// Offset of each tap's input from an output's in the padded planes; taps past the last (in a
// partial gradient block) read the first tap's, and their sums are dropped.
using Offsets = std::array<std::ptrdiff_t, k_max_taps + 8>;
template <class C> Offsets tap_offsets(const ConvGeometry& g, const Layout<C>& l) {
    Offsets offsets{};
    int t = 0;
    for (int c = 0; c < g.channels; ++c) {
        for (int ky = 0; ky < g.kernel; ++ky) {
            for (int kx = 0; kx < g.kernel; ++kx) {
                offsets[static_cast<std::size_t>(t++)] = c * l.plane + ky * l.cols + kx;
            }
        }
    }
    return offsets;
}

// Vectors through memcpy: any alignment, and no vector passed by value (cpu/clones.hpp).
template <class V> [[gnu::always_inline]] inline void load(V& v, const float* p) {
    std::memcpy(&v, p, sizeof v);
}
template <class V> [[gnu::always_inline]] inline void store(float* p, const V& v) {
    std::memcpy(p, &v, sizeof v);
}
// The first n floats at p, zeros after them.
template <class V> [[gnu::always_inline]] inline void load_part(V& v, const float* p, int n) {
    v = V{};
    std::memcpy(&v, p, sizeof(float) * static_cast<std::size_t>(n));
}
// Lanes added in lane order.
template <class C> [[gnu::always_inline]] inline float lane_sum(const float* p) {
    float sum = 0.0F;
    for (int lane = 0; lane < C::width; ++lane) {
        sum += p[lane];
    }
    return sum;
}

// One image's planes into the padded planes at xp.
template <class C>
[[gnu::always_inline]] inline void pad_image(const ConvGeometry& g, const Layout<C>& l,
                                             const float* x, float* xp) {
    std::fill(xp, xp + l.x_floats, 0.0F);
    for (int c = 0; c < g.channels; ++c) {
        for (int h = 0; h < g.height; ++h) {
            std::memcpy(xp + c * l.plane + (h + g.pad) * l.cols + g.pad,
                        x + (static_cast<std::ptrdiff_t>(c) * g.height + h) * g.width,
                        sizeof(float) * static_cast<std::size_t>(g.width));
        }
    }
}

template <class C>
[[gnu::always_inline]] inline void forward_images(const ConvGeometry& g, const float* x,
                                                  const float* w, const float* b, int first,
                                                  int last, float* y, float* scratch) {
    using V = typename C::V;
    constexpr int outs = C::fwd_outs;
    constexpr int vecs = C::fwd_vecs;
    constexpr int segment = C::width * vecs;
    const Layout<C> l(g);
    const Offsets offsets = tap_offsets(g, l);
    float* xp = scratch;
    // wt[block][tap][o]: the block's weights of one tap side by side, zeros past the outputs.
    float* wt = xp + l.x_floats;
    std::fill(wt, wt + l.w_floats, 0.0F);
    for (int o = 0; o < g.outputs; ++o) {
        for (int t = 0; t < l.taps; ++t) {
            wt[(o / outs * l.taps + t) * outs + o % outs] = w[o * l.taps + t];
        }
    }
    const std::ptrdiff_t in_size = static_cast<std::ptrdiff_t>(g.channels) * g.height * g.width;
    const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(l.out_h) * l.out_w;
    for (int n = first; n < last; ++n) {
        pad_image(g, l, x + n * in_size, xp);
        float* y_n = y + n * g.outputs * out_plane;
        for (int o0 = 0; o0 < g.outputs; o0 += outs) {
            const float* w_block = wt + o0 * l.taps;
            const int valid = std::min(outs, g.outputs - o0);
            std::array<float, outs> bias{};
            for (int o = 0; b != nullptr && o < valid; ++o) {
                bias[o] = b[o0 + o];
            }
            for (int row = 0; row < l.out_h; ++row) {
                for (int x0 = 0; x0 < l.out_w; x0 += segment) {
                    V acc[outs][vecs];
#pragma GCC unroll 16
                    for (int o = 0; o < outs; ++o) {
#pragma GCC unroll 4
                        for (int v = 0; v < vecs; ++v) {
                            acc[o][v] = V{} + bias[o];
                        }
                    }
                    const float* in = xp + row * l.cols + x0;
                    for (int t = 0; t < l.taps; ++t) {
                        const float* p = in + offsets[static_cast<std::size_t>(t)];
                        V xv[vecs];
#pragma GCC unroll 4
                        for (int v = 0; v < vecs; ++v) {
                            load(xv[v], p + v * C::width);
                        }
                        const float* wk = w_block + t * outs;
#pragma GCC unroll 16
                        for (int o = 0; o < outs; ++o) {
                            const float weight = wk[o];
#pragma GCC unroll 4
                            for (int v = 0; v < vecs; ++v) {
                                acc[o][v] += weight * xv[v];
                            }
                        }
                    }
                    const int columns = std::min(segment, l.out_w - x0);
                    for (int o = 0; o < valid; ++o) {
                        float* dst = y_n + (o0 + o) * out_plane + row * l.out_w + x0;
                        if (columns == segment) {
#pragma GCC unroll 4
                            for (int v = 0; v < vecs; ++v) {
                                store(dst + v * C::width, acc[o][v]);
                            }
                        } else {
                            std::array<float, segment> part{};
#pragma GCC unroll 4
                            for (int v = 0; v < vecs; ++v) {
                                store(part.data() + v * C::width, acc[o][v]);
                            }
                            std::memcpy(dst, part.data(), sizeof(float) * columns);
                        }
                    }
                }
            }
        }
    }
}

// acc[o][t] += d[o] * (the input at p shifted by tap t), for one block of gradient taps.
template <class C>
[[gnu::always_inline]] inline void gradient_step(typename C::V (&acc)[C::grad_outs][C::grad_taps],
                                                 const typename C::V (&d)[C::grad_outs],
                                                 const float* p, const std::ptrdiff_t* offsets) {
#pragma GCC unroll 8
    for (int t = 0; t < C::grad_taps; ++t) {
        typename C::V xv;
        load(xv, p + offsets[t]);
#pragma GCC unroll 8
        for (int o = 0; o < C::grad_outs; ++o) {
            acc[o][t] += d[o] * xv;
        }
    }
}

// One block of grad_outs outputs by grad_taps taps of one image: each tap's weight gradient
// (a vector of partial sums per output and tap, at `sums`) += dy * the input under the tap.
template <class C>
[[gnu::always_inline]] inline void
gradient_block(const Layout<C>& l, const std::array<const float*, C::grad_outs>& planes,
               const float* xp, const std::ptrdiff_t* off, float* sums) {
    using V = typename C::V;
    constexpr int outs = C::grad_outs;
    constexpr int taps = C::grad_taps;
    const int full = l.out_w / C::width * C::width;
    V acc[outs][taps];
#pragma GCC unroll 8
    for (int o = 0; o < outs; ++o) {
#pragma GCC unroll 8
        for (int t = 0; t < taps; ++t) {
            load(acc[o][t], sums + (o * l.grad_taps + t) * C::width);
        }
    }
    // Down the columns of vectors: with rows as the inner loop, its bound and pointer steps do
    // not change, where a row of cifar10_quick's conv1 is only 2 vectors and the setup per row
    // took a third of the time.
    for (int x0 = 0; x0 < full; x0 += C::width) {
        for (int row = 0; row < l.out_h; ++row) {
            const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(row) * l.out_w + x0;
            V d[outs];
#pragma GCC unroll 8
            for (int o = 0; o < outs; ++o) {
                load(d[o], planes[o] + at);
            }
            gradient_step<C>(acc, d, xp + row * l.cols + x0, off);
        }
    }
    if (full < l.out_w) {
        for (int row = 0; row < l.out_h; ++row) {
            const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(row) * l.out_w + full;
            V d[outs];
            for (int o = 0; o < outs; ++o) {
                load_part(d[o], planes[o] + at, l.out_w - full);
            }
            gradient_step<C>(acc, d, xp + row * l.cols + full, off);
        }
    }
#pragma GCC unroll 8
    for (int o = 0; o < outs; ++o) {
#pragma GCC unroll 8
        for (int t = 0; t < taps; ++t) {
            store(sums + (o * l.grad_taps + t) * C::width, acc[o][t]);
        }
    }
}

// One image's bias gradient: each output's dy summed into a vector of partial sums.
template <class C>
[[gnu::always_inline]] inline void bias_sums(const ConvGeometry& g, const float* dy_n,
                                             std::ptrdiff_t out_plane, float* dbv) {
    using V = typename C::V;
    for (int o = 0; o < g.outputs; ++o) {
        const float* plane = dy_n + o * out_plane;
        V sum;
        load(sum, dbv + o * C::width);
        std::ptrdiff_t k = 0;
        for (; k + C::width <= out_plane; k += C::width) {
            V v;
            load(v, plane + k);
            sum += v;
        }
        if (k < out_plane) {
            V v;
            load_part(v, plane + k, static_cast<int>(out_plane - k));
            sum += v;
        }
        store(dbv + o * C::width, sum);
    }
}

template <class C>
[[gnu::always_inline]] inline void gradient_images(const ConvGeometry& g, const float* x,
                                                   const float* dy, int first, int last, float* dw,
                                                   float* db, float* scratch) {
    constexpr int outs = C::grad_outs;
    constexpr int taps = C::grad_taps;
    const Layout<C> l(g);
    const Offsets offsets = tap_offsets(g, l);
    float* xp = scratch;
    float* dwv = xp + l.x_floats; // [grad_outputs][grad_taps][width]
    float* dbv = dwv + l.dw_floats;
    std::fill(dwv, dwv + l.dw_floats + l.db_floats, 0.0F);
    const std::ptrdiff_t in_size = static_cast<std::ptrdiff_t>(g.channels) * g.height * g.width;
    const std::ptrdiff_t out_plane = static_cast<std::ptrdiff_t>(l.out_h) * l.out_w;
    for (int n = first; n < last; ++n) {
        pad_image(g, l, x + n * in_size, xp);
        const float* dy_n = dy + n * g.outputs * out_plane;
        for (int o0 = 0; o0 < g.outputs; o0 += outs) {
            // Outputs past the last (a partial block) read the last one's dy; dropped below.
            std::array<const float*, outs> planes{};
            for (int o = 0; o < outs; ++o) {
                planes[o] = dy_n + std::min(o0 + o, g.outputs - 1) * out_plane;
            }
            for (int t0 = 0; t0 < l.grad_taps; t0 += taps) {
                gradient_block<C>(l, planes, xp, offsets.data() + t0,
                                  dwv + (static_cast<std::ptrdiff_t>(o0) * l.grad_taps + t0) *
                                            C::width);
            }
        }
        if (db != nullptr) {
            bias_sums<C>(g, dy_n, out_plane, dbv);
        }
    }
    for (int o = 0; o < g.outputs; ++o) {
        for (int t = 0; t < l.taps; ++t) {
            dw[o * l.taps + t] =
                lane_sum<C>(dwv + (static_cast<std::ptrdiff_t>(o) * l.grad_taps + t) * C::width);
        }
        if (db != nullptr) {
            db[o] = lane_sum<C>(dbv + o * C::width);
        }
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DL_DIRECT_CONV_X86 1
// What this CPU has, asked once.
struct Features {
    bool wide = false;
    bool narrow = false;
};
const Features& features() {
    static const Features found = [] {
        __builtin_cpu_init();
        Features f;
        f.narrow = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
        f.wide = f.narrow && __builtin_cpu_supports("avx512f") != 0 &&
                 __builtin_cpu_supports("avx512vl") != 0 &&
                 __builtin_cpu_supports("avx512bw") != 0 && __builtin_cpu_supports("avx512dq") != 0;
        return f;
    }();
    return found;
}

#define DL_TARGET_WIDE __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define DL_TARGET_NARROW __attribute__((target("avx2,fma")))

DL_TARGET_WIDE void forward_wide(const ConvGeometry& g, const float* x, const float* w,
                                 const float* b, int first, int last, float* y, float* scratch) {
    forward_images<Wide>(g, x, w, b, first, last, y, scratch);
}
DL_TARGET_NARROW void forward_narrow(const ConvGeometry& g, const float* x, const float* w,
                                     const float* b, int first, int last, float* y,
                                     float* scratch) {
    forward_images<Narrow>(g, x, w, b, first, last, y, scratch);
}
DL_TARGET_WIDE void gradient_wide(const ConvGeometry& g, const float* x, const float* dy, int first,
                                  int last, float* dw, float* db, float* scratch) {
    gradient_images<Wide>(g, x, dy, first, last, dw, db, scratch);
}
DL_TARGET_NARROW void gradient_narrow(const ConvGeometry& g, const float* x, const float* dy,
                                      int first, int last, float* dw, float* db, float* scratch) {
    gradient_images<Narrow>(g, x, dy, first, last, dw, db, scratch);
}
#endif

} // namespace

bool runs(Blocking blocking) {
#ifdef DL_DIRECT_CONV_X86
    switch (blocking) {
    case Blocking::wide:
        return features().wide;
    case Blocking::narrow:
        return features().narrow;
    case Blocking::base:
        break;
    }
    return true;
#else
    return blocking == Blocking::base;
#endif
}

Blocking best_blocking() {
    static const Blocking best = runs(Blocking::wide)     ? Blocking::wide
                                 : runs(Blocking::narrow) ? Blocking::narrow
                                                          : Blocking::base;
    return best;
}

bool applies(const ConvGeometry& g) {
    if (g.stride != 1 || g.group != 1 || g.channels * g.kernel * g.kernel > k_max_taps ||
        g.out_width() < k_min_width || g.out_height() < 1) {
        return false;
    }
    // The widest blocking needs the most scratch.
    return Layout<Wide>(g).scratch() <= k_max_scratch_floats;
}

std::size_t scratch_floats_with(Blocking blocking, const ConvGeometry& g) {
    switch (blocking) {
    case Blocking::wide:
        return Layout<Wide>(g).scratch();
    case Blocking::narrow:
        return Layout<Narrow>(g).scratch();
    case Blocking::base:
        break;
    }
    return Layout<Base>(g).scratch();
}

std::size_t scratch_floats(const ConvGeometry& g) {
    return scratch_floats_with(best_blocking(), g);
}

void forward_with(Blocking blocking, const ConvGeometry& g, const float* x, const float* w,
                  const float* b, int first, int last, float* y, float* scratch) {
#ifdef DL_DIRECT_CONV_X86
    if (blocking == Blocking::wide) {
        forward_wide(g, x, w, b, first, last, y, scratch);
        return;
    }
    if (blocking == Blocking::narrow) {
        forward_narrow(g, x, w, b, first, last, y, scratch);
        return;
    }
#endif
    forward_images<Base>(g, x, w, b, first, last, y, scratch);
}

void weight_gradients_with(Blocking blocking, const ConvGeometry& g, const float* x,
                           const float* dy, int first, int last, float* dw, float* db,
                           float* scratch) {
#ifdef DL_DIRECT_CONV_X86
    if (blocking == Blocking::wide) {
        gradient_wide(g, x, dy, first, last, dw, db, scratch);
        return;
    }
    if (blocking == Blocking::narrow) {
        gradient_narrow(g, x, dy, first, last, dw, db, scratch);
        return;
    }
#endif
    gradient_images<Base>(g, x, dy, first, last, dw, db, scratch);
}

void forward(const ConvGeometry& g, const float* x, const float* w, const float* b, int first,
             int last, float* y, float* scratch) {
    forward_with(best_blocking(), g, x, w, b, first, last, y, scratch);
}

void weight_gradients(const ConvGeometry& g, const float* x, const float* dy, int first, int last,
                      float* dw, float* db, float* scratch) {
    weight_gradients_with(best_blocking(), g, x, dy, first, last, dw, db, scratch);
}

} // namespace dl::cpu::direct_conv
