// The transforms of F(4x4, 5x5) and their adjoints. The matrices come from Toom-Cook
// interpolation at the points 0, 1, -1, 2, -2, 1/2, -1/2 and infinity (docs/engine.md shows how
// they were derived and checked); the awkward fractions sit in G, which is applied once per
// kernel per step, so the per-tile transforms B^T and A^T have coefficients that are sums of
// powers of two (exact in binary). B^T is the one F(6x6, 3x3) uses at the same points (NNPACK).
//
//   B^T = |1    0  -21/4     0  21/4     0  -1  0|   A^T = |1  1  1  1  1    1    1  0|
//         |0    1      1 -17/4 -17/4     1   1  0|         |0  1 -1  2 -2  1/2 -1/2  0|
//         |0   -1      1  17/4 -17/4    -1   1  0|         |0  1  1  4  4  1/4  1/4  0|
//         |0  1/2    1/4  -5/2  -5/4     2   1  0|         |0  1 -1  8 -8  1/8 -1/8  1|
//         |0 -1/2    1/4   5/2  -5/4    -2   1  0|
//         |0    2      4  -5/2    -5   1/2   1  0|   G = the 8 x 5 matrix k_g below
//         |0   -2      4   5/2    -5  -1/2   1  0|
//         |0   -1      0  21/4     0 -21/4   0  1|
//
// y = A^T [(G g G^T) . (B^T d B)] A computes the 4x4 correlation of an 8x8 patch d with a 5x5
// kernel g. F(6x6, 3x3) at the same points has the same B^T, G of 8 x 3 (k_g3) and A^T of 6 x 8
// (rows p^0 to p^5; at_line<6>) (docs/engine.md derives both). The line functions below apply these
// matrices with their common terms shared (the rows come in pairs that differ in the sign of the
// odd-indexed inputs).

#include "cpu/winograd.hpp"

#include "cpu/clones.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

namespace dl::cpu::winograd {
namespace {

// One float per image lane (GCC/Clang vector extension: one AVX register, or two SSE ones).
using Lanes = float __attribute__((vector_size(k_lanes * sizeof(float))));
// An 8x8 tile of lanes, row-major.
using Tile = std::array<Lanes, k_points>;

// G's rows are p^k scaled by the same 1 / prod(p - q) per point for both kernels (the scaling
// B^T leaves to G), and for the point at infinity the kernel's last tap.
constexpr float k_ninth = 2.0F / 9;
constexpr std::array<std::array<float, 5>, k_tile> k_g5 = {{
    {1.0F, 0.0F, 0.0F, 0.0F, 0.0F},
    {-k_ninth, -k_ninth, -k_ninth, -k_ninth, -k_ninth},
    {-k_ninth, k_ninth, -k_ninth, k_ninth, -k_ninth},
    {1.0F / 90, 1.0F / 45, 2.0F / 45, 4.0F / 45, 8.0F / 45},
    {1.0F / 90, -1.0F / 45, 2.0F / 45, -4.0F / 45, 8.0F / 45},
    {32.0F / 45, 16.0F / 45, 8.0F / 45, 4.0F / 45, 2.0F / 45},
    {32.0F / 45, -16.0F / 45, 8.0F / 45, -4.0F / 45, 2.0F / 45},
    {0.0F, 0.0F, 0.0F, 0.0F, 1.0F},
}};
constexpr std::array<std::array<float, 3>, k_tile> k_g3 = {{
    {1.0F, 0.0F, 0.0F},
    {-k_ninth, -k_ninth, -k_ninth},
    {-k_ninth, k_ninth, -k_ninth},
    {1.0F / 90, 1.0F / 45, 2.0F / 45},
    {1.0F / 90, -1.0F / 45, 2.0F / 45},
    {32.0F / 45, 16.0F / 45, 8.0F / 45},
    {32.0F / 45, -16.0F / 45, 8.0F / 45},
    {0.0F, 0.0F, 1.0F},
}};

// B^T applied to the 8 lanes p[0], p[s], ..., p[7s], in place.
[[gnu::always_inline]] inline void bt_line(Lanes* p, int s) {
    const Lanes d0 = p[0];
    const Lanes d1 = p[s];
    const Lanes d2 = p[2 * s];
    const Lanes d3 = p[3 * s];
    const Lanes d4 = p[4 * s];
    const Lanes d5 = p[5 * s];
    const Lanes d6 = p[6 * s];
    const Lanes d7 = p[7 * s];
    p[0] = d0 - d6 + 5.25F * (d4 - d2);
    p[7 * s] = d7 - d1 + 5.25F * (d3 - d5);
    const Lanes even1 = d2 + d6 - 4.25F * d4;
    const Lanes odd1 = d1 + d5 - 4.25F * d3;
    p[s] = even1 + odd1;
    p[2 * s] = even1 - odd1;
    const Lanes even2 = 0.25F * d2 + d6 - 1.25F * d4;
    const Lanes odd2 = 0.5F * d1 - 2.5F * d3 + 2.0F * d5;
    p[3 * s] = even2 + odd2;
    p[4 * s] = even2 - odd2;
    const Lanes even3 = 4.0F * d2 + d6 - 5.0F * d4;
    const Lanes odd3 = 2.0F * d1 - 2.5F * d3 + 0.5F * d5;
    p[5 * s] = even3 + odd3;
    p[6 * s] = even3 - odd3;
}

// B (the transpose of B^T) applied to 8 lanes at stride s, in place.
[[gnu::always_inline]] inline void b_line(Lanes* p, int s) {
    const Lanes w0 = p[0];
    const Lanes w7 = p[7 * s];
    const Lanes sum1 = p[s] + p[2 * s];
    const Lanes diff1 = p[s] - p[2 * s];
    const Lanes sum2 = p[3 * s] + p[4 * s];
    const Lanes diff2 = p[3 * s] - p[4 * s];
    const Lanes sum3 = p[5 * s] + p[6 * s];
    const Lanes diff3 = p[5 * s] - p[6 * s];
    p[s] = diff1 + 0.5F * diff2 + 2.0F * diff3 - w7;
    p[2 * s] = sum1 + 0.25F * sum2 + 4.0F * sum3 - 5.25F * w0;
    p[3 * s] = 5.25F * w7 - 4.25F * diff1 - 2.5F * (diff2 + diff3);
    p[4 * s] = 5.25F * w0 - 4.25F * sum1 - 1.25F * sum2 - 5.0F * sum3;
    p[5 * s] = diff1 + 2.0F * diff2 + 0.5F * diff3 - 5.25F * w7;
    p[6 * s] = sum1 + sum2 + sum3 - w0;
}

// A^T, rows p^0 to p^(Out - 1) at the points 0, 1, -1, 2, -2, 1/2, -1/2 (the last row also
// takes the point at infinity), applied to 8 lanes at stride s: Out outputs written at stride t.
// Out is 4 (F(4x4, 5x5)) or 6 (F(6x6, 3x3)); row i is the pairs' sums (even i) or differences
// (odd i) weighted by 1, 2^i and 2^-i, all exact in binary.
template <int Out>
[[gnu::always_inline]] inline void at_line(const Lanes* p, int s, Lanes* o, int t) {
    const Lanes sum1 = p[s] + p[2 * s];
    const Lanes diff1 = p[s] - p[2 * s];
    const Lanes sum2 = p[3 * s] + p[4 * s];
    const Lanes diff2 = p[3 * s] - p[4 * s];
    const Lanes sum3 = p[5 * s] + p[6 * s];
    const Lanes diff3 = p[5 * s] - p[6 * s];
    float up = 1.0F;   // 2^i
    float down = 1.0F; // 2^-i
    for (int i = 0; i < Out; ++i) {
        o[i * t] = i % 2 == 0 ? sum1 + up * sum2 + down * sum3 : diff1 + up * diff2 + down * diff3;
        up *= 2.0F;
        down *= 0.5F;
    }
    o[0] += p[0];
    o[(Out - 1) * t] += p[7 * s];
}

// A (the transpose of A^T) applied to Out lanes at stride s: 8 lanes written at stride t. Point
// pairs +-c share the sums of the even- and odd-indexed inputs weighted by c^i.
template <int Out>
[[gnu::always_inline]] inline void a_line(const Lanes* e, int s, Lanes* p, int t) {
    constexpr std::array<float, 3> k_points_c = {1.0F, 2.0F, 0.5F};
    p[0] = e[0];
    for (int k = 0; k < 3; ++k) {
        Lanes even{};
        Lanes odd{};
        float power = 1.0F; // c^i
        for (int i = 0; i < Out; ++i) {
            (i % 2 == 0 ? even : odd) += power * e[i * s];
            power *= k_points_c[k];
        }
        p[(2 * k + 1) * t] = even + odd;
        p[(2 * k + 2) * t] = even - odd;
    }
    p[7 * t] = e[(Out - 1) * s];
}

// G of a kernel side (A^T and A follow from the outputs per tile side: at_line, a_line).
template <int Kernel> constexpr const auto& g_of() {
    if constexpr (Kernel == 3) {
        return k_g3;
    } else {
        return k_g5;
    }
}

// The 8 x 8 block of floats in a, one row per vector, transposed in registers: three rounds of
// interleaves, of single lanes, pairs and quads.
[[gnu::always_inline]] inline void transpose8(std::array<Lanes, k_lanes>& a) {
    static_assert(k_lanes == 8);
    std::array<Lanes, k_lanes> b{};
    for (int i = 0; i < k_lanes; i += 2) {
        b[i] = DL_SHUFFLE(a[i], a[i + 1], 0, 8, 2, 10, 4, 12, 6, 14);
        b[i + 1] = DL_SHUFFLE(a[i], a[i + 1], 1, 9, 3, 11, 5, 13, 7, 15);
    }
    for (int i = 0; i < k_lanes; i += 4) {
        for (int j = i; j < i + 2; ++j) {
            a[j] = DL_SHUFFLE(b[j], b[j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            a[j + 2] = DL_SHUFFLE(b[j], b[j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    }
    for (int j = 0; j < 4; ++j) {
        b[j] = DL_SHUFFLE(a[j], a[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        b[j + 4] = DL_SHUFFLE(a[j], a[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
    a = b;
}

// The corner of tile position `position`: its first output, and its first input in the padded
// coordinates of input_lanes (the pad shifts both by the same amount).
struct TileAt {
    TileAt(const Tiling& tiling, int position)
        : y(tiling.out * (position / tiling.cols)), x(tiling.out * (position % tiling.cols)) {}
    int y;
    int x;
};

// Offset of pixel (row, col) of plane `plane` in a Lanes2d buffer.
std::ptrdiff_t lanes_at(const Lanes2d& shape, int plane, int row, int col) {
    return ((static_cast<std::ptrdiff_t>(plane) * shape.rows + row) * shape.cols + col) * k_lanes;
}

std::ptrdiff_t plane_offset(int image, int channels, int channel, std::ptrdiff_t plane_size) {
    return (static_cast<std::ptrdiff_t>(image) * channels + channel) * plane_size;
}

// One plane of a Lanes2d buffer (dst) from the planes src[0, images) (height x width each),
// placed `offset` rows and columns in from its corner; zeros everywhere else. A full group
// writes each pixel's 8 lanes as one vector and zeros only the border: lane by lane, the plane
// was passed over 8 times in strided scalar stores, after a fill of the whole of it.
[[gnu::always_inline]] inline void gather_plane(const std::array<const float*, k_lanes>& src,
                                                int images, int height, int width,
                                                const Lanes2d& shape, int offset, float* dst) {
    const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(shape.cols) * k_lanes;
    if (images < k_lanes) {
        std::fill(dst, dst + row * shape.rows, 0.0F);
        for (int lane = 0; lane < images; ++lane) {
            for (int h = 0; h < height; ++h) {
                float* out = dst + (h + offset) * row + offset * k_lanes + lane;
                for (int w = 0; w < width; ++w) {
                    out[static_cast<std::ptrdiff_t>(w) * k_lanes] = src[lane][h * width + w];
                }
            }
        }
        return;
    }
    std::fill(dst, dst + offset * row, 0.0F);
    std::fill(dst + (offset + height) * row, dst + shape.rows * row, 0.0F);
    for (int h = 0; h < height; ++h) {
        float* out = dst + (h + offset) * row;
        std::fill(out, out + offset * k_lanes, 0.0F);
        std::fill(out + (offset + width) * k_lanes, out + row, 0.0F);
        out += offset * k_lanes;
        const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(h) * width;
        int w = 0;
        // 8 pixels of the 8 images at a time: 8 row loads, a register transpose, and 8 pixel
        // stores, where lane by lane it was 64 scalar loads and inserts.
        for (; w + k_lanes <= width; w += k_lanes) {
            std::array<Lanes, k_lanes> block{};
            for (int lane = 0; lane < k_lanes; ++lane) {
                std::memcpy(&block[lane], src[lane] + at + w, sizeof(Lanes));
            }
            transpose8(block);
            std::memcpy(out + static_cast<std::ptrdiff_t>(w) * k_lanes, block.data(), sizeof block);
        }
        for (; w < width; ++w) {
            Lanes pixel;
            for (int lane = 0; lane < k_lanes; ++lane) {
                pixel[lane] = src[lane][at + w];
            }
            std::memcpy(out + static_cast<std::ptrdiff_t>(w) * k_lanes, &pixel, sizeof pixel);
        }
    }
}

} // namespace

bool applies(const ConvGeometry& g) {
    constexpr int k_min_channels = 8;
    // A group's transposed inputs and output gradients live in per-thread scratch; on large
    // images (a 5x5 layer at 224 x 224 x 64) they would take hundreds of MB, where im2col works
    // in bounded chunks. 1M floats (4 MB) each covers CIFAR-sized layers.
    constexpr std::size_t k_max_lane_floats = 1U << 20U;
    if ((g.kernel != 5 && g.kernel != 3) || g.stride != 1 || g.group != 1 ||
        g.channels < k_min_channels) {
        return false;
    }
    const Tiling tiling(g);
    return input_lanes(tiling).floats(g.channels) <= k_max_lane_floats &&
           output_lanes(tiling).floats(g.outputs) <= k_max_lane_floats;
}

template <int Kernel>
[[gnu::always_inline]] inline void transform_kernels_of(const ConvGeometry& g, const float* w,
                                                        int first, int last, float* u) {
    constexpr int k_kernel = Kernel;
    constexpr auto& k_g = g_of<Kernel>();
    const std::ptrdiff_t kernels = static_cast<std::ptrdiff_t>(g.outputs) * g.channels;
    constexpr int k_size = k_kernel * k_kernel;
    for (int k0 = first; k0 < last; k0 += k_lanes) {
        const int lanes = std::min(k_lanes, last - k0);
        std::array<Lanes, k_size> kernel{};
        for (int lane = 0; lane < lanes; ++lane) {
            const float* src = w + static_cast<std::ptrdiff_t>(k0 + lane) * k_size;
            for (int e = 0; e < k_size; ++e) {
                kernel[e][lane] = src[e];
            }
        }
        // t = G g (8 x K), then u = t G^T (8x8).
        std::array<Lanes, k_tile * k_kernel> t{};
        for (int i = 0; i < k_tile; ++i) {
            for (int j = 0; j < k_kernel; ++j) {
                for (int k = 0; k < k_kernel; ++k) {
                    t[i * k_kernel + j] += k_g[i][k] * kernel[k * k_kernel + j];
                }
            }
        }
        for (int i = 0; i < k_tile; ++i) {
            for (int j = 0; j < k_tile; ++j) {
                Lanes sum{};
                for (int k = 0; k < k_kernel; ++k) {
                    sum += t[i * k_kernel + k] * k_g[j][k];
                }
                float* dst = u + (i * k_tile + j) * kernels + k0;
                if (lanes == k_lanes) {
                    std::memcpy(dst, &sum, sizeof sum);
                    continue;
                }
                for (int lane = 0; lane < lanes; ++lane) {
                    dst[lane] = sum[lane];
                }
            }
        }
    }
}

template <int Kernel>
[[gnu::always_inline]] inline void kernel_gradients_of(const ConvGeometry& g, const float* du,
                                                       int first, int last, float* dw) {
    constexpr int k_kernel = Kernel;
    constexpr auto& k_g = g_of<Kernel>();
    const std::ptrdiff_t kernels = static_cast<std::ptrdiff_t>(g.outputs) * g.channels;
    constexpr int k_size = k_kernel * k_kernel;
    for (int k0 = first; k0 < last; k0 += k_lanes) {
        const int lanes = std::min(k_lanes, last - k0);
        Tile d{};
        for (int xi = 0; xi < k_points; ++xi) {
            const float* src = du + xi * kernels + k0;
            if (lanes == k_lanes) {
                std::memcpy(&d[xi], src, sizeof(Lanes));
                continue;
            }
            for (int lane = 0; lane < lanes; ++lane) {
                d[xi][lane] = src[lane];
            }
        }
        // t = G^T du (K x 8), then dg = t G (K x K).
        std::array<Lanes, k_kernel * k_tile> t{};
        for (int a = 0; a < k_kernel; ++a) {
            for (int j = 0; j < k_tile; ++j) {
                for (int i = 0; i < k_tile; ++i) {
                    t[a * k_tile + j] += k_g[i][a] * d[i * k_tile + j];
                }
            }
        }
        for (int a = 0; a < k_kernel; ++a) {
            for (int b = 0; b < k_kernel; ++b) {
                Lanes sum{};
                for (int j = 0; j < k_tile; ++j) {
                    sum += t[a * k_tile + j] * k_g[j][b];
                }
                for (int lane = 0; lane < lanes; ++lane) {
                    dw[static_cast<std::ptrdiff_t>(k0 + lane) * k_size + a * k_kernel + b] =
                        sum[lane];
                }
            }
        }
    }
}

DL_CPU_CLONES
void transform_kernels(const ConvGeometry& g, const float* w, int first, int last, float* u) {
    if (g.kernel == 3) {
        transform_kernels_of<3>(g, w, first, last, u);
    } else {
        transform_kernels_of<5>(g, w, first, last, u);
    }
}

DL_CPU_CLONES
void kernel_gradients(const ConvGeometry& g, const float* du, int first, int last, float* dw) {
    if (g.kernel == 3) {
        kernel_gradients_of<3>(g, du, first, last, dw);
    } else {
        kernel_gradients_of<5>(g, du, first, last, dw);
    }
}

Lanes2d input_lanes(const Tiling& tiling) {
    return {tiling.out * tiling.rows + tiling.kernel - 1,
            tiling.out * tiling.cols + tiling.kernel - 1};
}

Lanes2d output_lanes(const Tiling& tiling) {
    return {tiling.out * tiling.rows, tiling.out * tiling.cols};
}

DL_CPU_CLONES
void gather_inputs(const ConvGeometry& g, const Tiling& tiling, const Block& block, const float* x,
                   float* xt) {
    const Lanes2d shape = input_lanes(tiling);
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    for (int c = 0; c < g.channels; ++c) {
        std::array<const float*, k_lanes> src{};
        for (int lane = 0; lane < block.images; ++lane) {
            src[lane] = x + plane_offset(block.image + lane, g.channels, c, plane);
        }
        gather_plane(src, block.images, g.height, g.width, shape, g.pad,
                     xt + lanes_at(shape, c, 0, 0));
    }
}

DL_CPU_CLONES
void transform_inputs(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                      const float* xt, float* v) {
    const Lanes2d shape = input_lanes(tiling);
    const std::ptrdiff_t columns = block.columns();
    const std::ptrdiff_t stride = point_stride(g.channels, block);
    for (int c = 0; c < g.channels; ++c) {
        for (int p = 0; p < block.p_count; ++p) {
            const TileAt at(tiling, block.p_first + p);
            Tile d;
            for (int i = 0; i < k_tile; ++i) {
                std::memcpy(&d[i * k_tile], xt + lanes_at(shape, c, at.y + i, at.x),
                            k_tile * sizeof(Lanes));
            }
            for (int j = 0; j < k_tile; ++j) {
                bt_line(&d[j], k_tile);
            }
            for (int i = 0; i < k_tile; ++i) {
                bt_line(&d[i * k_tile], 1);
            }
            float* dst = v + c * columns + static_cast<std::ptrdiff_t>(p) * k_lanes;
            for (int xi = 0; xi < k_points; ++xi) {
                std::memcpy(dst + xi * stride, &d[xi], sizeof(Lanes));
            }
        }
    }
}

// A whole tile of a full group into y: the 8 images' rows through a register transpose, each
// image's row of outputs stored as one vector (lane by lane it was a scalar store per output
// and image). 4x4 tiles: two rows per transpose; 6x6 tiles: one row per transpose.
template <int Out>
[[gnu::always_inline]] inline void
store_full_tile(const std::array<Lanes, Out * Out>& out, float b, const Block& block, int outputs,
                int o, std::ptrdiff_t plane, int out_w, const TileAt& at, float* y) {
    if constexpr (Out == 4) {
        using Quad = float __attribute__((vector_size(4 * sizeof(float))));
        for (int a = 0; a < Out; a += 2) {
            std::array<Lanes, k_lanes> rows_of_lanes{};
            std::copy_n(&out[a * Out], k_lanes, rows_of_lanes.begin());
            transpose8(rows_of_lanes);
            for (int lane = 0; lane < k_lanes; ++lane) {
                float* dst = y + plane_offset(block.image + lane, outputs, o, plane) +
                             static_cast<std::ptrdiff_t>(at.y + a) * out_w + at.x;
                const Lanes both = rows_of_lanes[lane] + b;
                const Quad first = DL_SHUFFLE(both, both, 0, 1, 2, 3);
                const Quad second = DL_SHUFFLE(both, both, 4, 5, 6, 7);
                std::memcpy(dst, &first, sizeof first);
                std::memcpy(dst + out_w, &second, sizeof second);
            }
        }
    } else {
        for (int a = 0; a < Out; ++a) {
            std::array<Lanes, k_lanes> row{};
            std::copy_n(&out[a * Out], Out, row.begin());
            transpose8(row);
            for (int lane = 0; lane < k_lanes; ++lane) {
                float* dst = y + plane_offset(block.image + lane, outputs, o, plane) +
                             static_cast<std::ptrdiff_t>(at.y + a) * out_w + at.x;
                const Lanes values = row[lane] + b;
                std::memcpy(dst, &values, Out * sizeof(float));
            }
        }
    }
}

template <int Kernel>
[[gnu::always_inline]] inline void transform_outputs_of(const ConvGeometry& g, const Tiling& tiling,
                                                        const Block& block, const float* m,
                                                        const float* bias, float* y) {
    constexpr int k_out = k_tile - Kernel + 1;
    const int out_h = g.out_height();
    const int out_w = g.out_width();
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(out_h) * out_w;
    const std::ptrdiff_t columns = block.columns();
    const std::ptrdiff_t stride = point_stride(g.outputs, block);
    for (int o = 0; o < g.outputs; ++o) {
        const float b = bias != nullptr ? bias[o] : 0.0F;
        for (int p = 0; p < block.p_count; ++p) {
            const float* src = m + o * columns + static_cast<std::ptrdiff_t>(p) * k_lanes;
            Tile t;
            for (int xi = 0; xi < k_points; ++xi) {
                std::memcpy(&t[xi], src + xi * stride, sizeof(Lanes));
            }
            std::array<Lanes, k_out * k_tile> half{}; // A^T t: out x 8
            for (int j = 0; j < k_tile; ++j) {
                at_line<k_out>(&t[j], k_tile, &half[j], k_tile);
            }
            std::array<Lanes, k_out * k_out> out{}; // (A^T t) A: out x out
            for (int a = 0; a < k_out; ++a) {
                at_line<k_out>(&half[a * k_tile], 1, &out[a * k_out], 1);
            }
            const TileAt at(tiling, block.p_first + p);
            const int rows = std::min(k_out, out_h - at.y);
            const int cols = std::min(k_out, out_w - at.x);
            if (rows == k_out && cols == k_out && block.images == k_lanes) {
                store_full_tile<k_out>(out, b, block, g.outputs, o, plane, out_w, at, y);
                continue;
            }
            for (int lane = 0; lane < block.images; ++lane) {
                float* dst = y + plane_offset(block.image + lane, g.outputs, o, plane) +
                             static_cast<std::ptrdiff_t>(at.y) * out_w + at.x;
                for (int a = 0; a < rows; ++a) {
                    for (int bx = 0; bx < cols; ++bx) {
                        dst[a * out_w + bx] = out[a * k_out + bx][lane] + b;
                    }
                }
            }
        }
    }
}

DL_CPU_CLONES
void transform_outputs(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                       const float* m, const float* bias, float* y) {
    if (g.kernel == 3) {
        transform_outputs_of<3>(g, tiling, block, m, bias, y);
    } else {
        transform_outputs_of<5>(g, tiling, block, m, bias, y);
    }
}

DL_CPU_CLONES
void gather_output_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                             const float* dy, float* dyt) {
    const Lanes2d shape = output_lanes(tiling);
    const int out_h = g.out_height();
    const int out_w = g.out_width();
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(out_h) * out_w;
    for (int o = 0; o < g.outputs; ++o) {
        std::array<const float*, k_lanes> src{};
        for (int lane = 0; lane < block.images; ++lane) {
            src[lane] = dy + plane_offset(block.image + lane, g.outputs, o, plane);
        }
        gather_plane(src, block.images, out_h, out_w, shape, 0, dyt + lanes_at(shape, o, 0, 0));
    }
}

template <int Kernel>
[[gnu::always_inline]] inline void output_gradients_of(const ConvGeometry& g, const Tiling& tiling,
                                                       const Block& block, const float* dyt,
                                                       float* dm) {
    constexpr int k_out = k_tile - Kernel + 1;
    const Lanes2d shape = output_lanes(tiling);
    const std::ptrdiff_t columns = block.columns();
    const std::ptrdiff_t stride = point_stride(g.outputs, block);
    for (int o = 0; o < g.outputs; ++o) {
        for (int p = 0; p < block.p_count; ++p) {
            const TileAt at(tiling, block.p_first + p);
            std::array<Lanes, k_out * k_out> e{};
            for (int a = 0; a < k_out; ++a) {
                std::memcpy(&e[a * k_out], dyt + lanes_at(shape, o, at.y + a, at.x),
                            k_out * sizeof(Lanes));
            }
            std::array<Lanes, k_tile * k_out> half{}; // A e: 8 x out
            for (int bx = 0; bx < k_out; ++bx) {
                a_line<k_out>(&e[bx], k_out, &half[bx], k_out);
            }
            Tile t; // (A e) A^T: 8 x 8
            for (int i = 0; i < k_tile; ++i) {
                a_line<k_out>(&half[i * k_out], 1, &t[i * k_tile], 1);
            }
            float* dst = dm + o * columns + static_cast<std::ptrdiff_t>(p) * k_lanes;
            for (int xi = 0; xi < k_points; ++xi) {
                std::memcpy(dst + xi * stride, &t[xi], sizeof(Lanes));
            }
        }
    }
}

DL_CPU_CLONES
void output_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                      const float* dyt, float* dm) {
    if (g.kernel == 3) {
        output_gradients_of<3>(g, tiling, block, dyt, dm);
    } else {
        output_gradients_of<5>(g, tiling, block, dyt, dm);
    }
}

DL_CPU_CLONES
void transpose(const float* src, int rows, int columns, std::ptrdiff_t src_ld, float* dst) {
    int r0 = 0;
    for (; r0 + k_lanes <= rows; r0 += k_lanes) {
        for (int c0 = 0; c0 < columns; c0 += k_lanes) {
            std::array<Lanes, k_lanes> block{};
            for (int i = 0; i < k_lanes; ++i) {
                std::memcpy(&block[i], src + (r0 + i) * src_ld + c0, sizeof(Lanes));
            }
            transpose8(block);
            for (int i = 0; i < k_lanes; ++i) {
                std::memcpy(dst + static_cast<std::ptrdiff_t>(c0 + i) * rows + r0, &block[i],
                            sizeof(Lanes));
            }
        }
    }
    for (; r0 < rows; ++r0) {
        for (int c = 0; c < columns; ++c) {
            dst[static_cast<std::ptrdiff_t>(c) * rows + r0] = src[r0 * src_ld + c];
        }
    }
}

DL_CPU_CLONES
void input_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                     const float* dv, float* dxt) {
    const Lanes2d shape = input_lanes(tiling);
    const std::ptrdiff_t columns = block.columns();
    const std::ptrdiff_t stride = point_stride(g.channels, block);
    for (int c = 0; c < g.channels; ++c) {
        for (int p = 0; p < block.p_count; ++p) {
            const float* src = dv + c * columns + static_cast<std::ptrdiff_t>(p) * k_lanes;
            Tile d;
            for (int xi = 0; xi < k_points; ++xi) {
                std::memcpy(&d[xi], src + xi * stride, sizeof(Lanes));
            }
            for (int j = 0; j < k_tile; ++j) {
                b_line(&d[j], k_tile);
            }
            for (int i = 0; i < k_tile; ++i) {
                b_line(&d[i * k_tile], 1);
            }
            const TileAt at(tiling, block.p_first + p);
            for (int i = 0; i < k_tile; ++i) {
                float* row = dxt + lanes_at(shape, c, at.y + i, at.x);
                for (int j = 0; j < k_tile; ++j) {
                    Lanes sum;
                    std::memcpy(&sum, row + j * k_lanes, sizeof(Lanes));
                    sum += d[i * k_tile + j];
                    std::memcpy(row + j * k_lanes, &sum, sizeof(Lanes));
                }
            }
        }
    }
}

DL_CPU_CLONES
void scatter_input_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                             const float* dxt, float* dx) {
    const Lanes2d shape = input_lanes(tiling);
    const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    // A full group: 8 pixels of the 8 images at a time, transposed back in registers.
    const int vector_width = block.images == k_lanes ? g.width / k_lanes * k_lanes : 0;
    if (vector_width > 0) {
        for (int c = 0; c < g.channels; ++c) {
            std::array<float*, k_lanes> dst{};
            for (int lane = 0; lane < k_lanes; ++lane) {
                dst[lane] = dx + plane_offset(block.image + lane, g.channels, c, plane);
            }
            for (int h = 0; h < g.height; ++h) {
                const float* src = dxt + lanes_at(shape, c, h + g.pad, g.pad);
                const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(h) * g.width;
                for (int w = 0; w < vector_width; w += k_lanes) {
                    std::array<Lanes, k_lanes> pixels{};
                    std::memcpy(pixels.data(), src + static_cast<std::ptrdiff_t>(w) * k_lanes,
                                sizeof pixels);
                    transpose8(pixels);
                    for (int lane = 0; lane < k_lanes; ++lane) {
                        std::memcpy(dst[lane] + at + w, &pixels[lane], sizeof(Lanes));
                    }
                }
            }
        }
    }
    // The rest: partial groups, and the columns past the last whole vector.
    for (int lane = 0; lane < block.images; ++lane) {
        for (int c = 0; c < g.channels; ++c) {
            float* dst = dx + plane_offset(block.image + lane, g.channels, c, plane);
            for (int h = 0; h < g.height; ++h) {
                const float* src = dxt + lanes_at(shape, c, h + g.pad, g.pad) + lane;
                for (int w = vector_width; w < g.width; ++w) {
                    dst[h * g.width + w] = src[static_cast<std::ptrdiff_t>(w) * k_lanes];
                }
            }
        }
    }
}

} // namespace dl::cpu::winograd
