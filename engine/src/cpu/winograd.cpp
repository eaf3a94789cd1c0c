// The transforms of F(2x2, 5x5) and their adjoints. The matrices come from Toom-Cook
// interpolation at the points 0, 1, -1, 2, -2 and infinity (docs/engine.md shows how they were
// derived and checked); the fractions sit in G, which is applied once per kernel per step, so
// the per-tile transforms B^T and A^T have small integer coefficients and are exact additions.
//
//   B^T = |4  0 -5  0  1  0|   A^T = |1  1  1  1  1  0|   G = | 1/4     0    0     0    0 |
//         |0  4  4 -1 -1  0|         |0  1 -1  2 -2  1|       | 1/6   1/6  1/6   1/6  1/6 |
//         |0 -4  4  1 -1  0|                                  | 1/6  -1/6  1/6  -1/6  1/6 |
//         |0 -2 -1  2  1  0|                                  | 1/24  1/12 1/6   1/3  2/3 |
//         |0  2 -1 -2  1  0|                                  | 1/24 -1/12 1/6  -1/3  2/3 |
//         |0  4  0 -5  0  1|                                  | 0       0    0     0    1 |
//
// y = A^T [(G g G^T) . (B^T d B)] A computes the 2x2 correlation of a 6x6 patch d with a 5x5
// kernel g.

#include "cpu/winograd.hpp"

#include "cpu/clones.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

namespace dl::cpu::winograd {
namespace {

constexpr int k_kernel = 5;
constexpr int k_tile = 6;
constexpr int k_out = 2;

// One float per image lane (GCC/Clang vector extension: one AVX register, or two SSE ones).
using Lanes = float __attribute__((vector_size(k_lanes * sizeof(float))));
// A 6x6 tile of lanes, row-major.
using Tile = std::array<Lanes, k_points>;

constexpr std::array<std::array<float, k_kernel>, k_tile> k_g = {{
    {1.0F / 4, 0.0F, 0.0F, 0.0F, 0.0F},
    {1.0F / 6, 1.0F / 6, 1.0F / 6, 1.0F / 6, 1.0F / 6},
    {1.0F / 6, -1.0F / 6, 1.0F / 6, -1.0F / 6, 1.0F / 6},
    {1.0F / 24, 1.0F / 12, 1.0F / 6, 1.0F / 3, 2.0F / 3},
    {1.0F / 24, -1.0F / 12, 1.0F / 6, -1.0F / 3, 2.0F / 3},
    {0.0F, 0.0F, 0.0F, 0.0F, 1.0F},
}};

// B^T applied to the 6 lanes p[0], p[s], ..., p[5s], in place.
[[gnu::always_inline]] inline void bt_line(Lanes* p, int s) {
    const Lanes d0 = p[0];
    const Lanes d1 = p[s];
    const Lanes d2 = p[2 * s];
    const Lanes d3 = p[3 * s];
    const Lanes d4 = p[4 * s];
    const Lanes d5 = p[5 * s];
    p[0] = 4.0F * d0 - 5.0F * d2 + d4;
    p[s] = 4.0F * (d1 + d2) - d3 - d4;
    p[2 * s] = 4.0F * (d2 - d1) + d3 - d4;
    p[3 * s] = 2.0F * (d3 - d1) - d2 + d4;
    p[4 * s] = 2.0F * (d1 - d3) - d2 + d4;
    p[5 * s] = 4.0F * d1 - 5.0F * d3 + d5;
}

// B (the transpose of B^T) applied to 6 lanes at stride s, in place.
[[gnu::always_inline]] inline void b_line(Lanes* p, int s) {
    const Lanes w0 = p[0];
    const Lanes w1 = p[s];
    const Lanes w2 = p[2 * s];
    const Lanes w3 = p[3 * s];
    const Lanes w4 = p[4 * s];
    const Lanes w5 = p[5 * s];
    p[0] = 4.0F * w0;
    p[s] = 4.0F * (w1 - w2 + w5) + 2.0F * (w4 - w3);
    p[2 * s] = 4.0F * (w1 + w2) - 5.0F * w0 - w3 - w4;
    p[3 * s] = w2 - w1 + 2.0F * (w3 - w4) - 5.0F * w5;
    p[4 * s] = w0 - w1 - w2 + w3 + w4;
    p[5 * s] = w5;
}

// A^T applied to 6 lanes at stride s: the two outputs.
[[gnu::always_inline]] inline void at_line(const Lanes* p, int s, Lanes& o0, Lanes& o1) {
    o0 = p[0] + p[s] + p[2 * s] + p[3 * s] + p[4 * s];
    o1 = p[s] - p[2 * s] + 2.0F * (p[3 * s] - p[4 * s]) + p[5 * s];
}

// A applied to two lanes: 6 lanes written at stride s.
[[gnu::always_inline]] inline void a_line(const Lanes& e0, const Lanes& e1, Lanes* p, int s) {
    p[0] = e0;
    p[s] = e0 + e1;
    p[2 * s] = e0 - e1;
    p[3 * s] = e0 + 2.0F * e1;
    p[4 * s] = e0 - 2.0F * e1;
    p[5 * s] = e1;
}

// The corner of tile position `position`: its first output, and its first input in the padded
// coordinates of input_lanes (the pad shifts both by the same amount).
struct TileAt {
    TileAt(const Tiling& tiling, int position)
        : y(k_out * (position / tiling.cols)), x(k_out * (position % tiling.cols)) {}
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
        for (int w = 0; w < width; ++w) {
            Lanes pixel;
            for (int lane = 0; lane < k_lanes; ++lane) {
                pixel[lane] = src[lane][h * width + w];
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
    if (g.kernel != k_kernel || g.stride != 1 || g.group != 1 || g.channels < k_min_channels) {
        return false;
    }
    const Tiling tiling(g);
    return input_lanes(tiling).floats(g.channels) <= k_max_lane_floats &&
           output_lanes(tiling).floats(g.outputs) <= k_max_lane_floats;
}

DL_CPU_CLONES
void transform_kernels(const ConvGeometry& g, const float* w, int first, int last, float* u) {
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
        // t = G g (6x5), then u = t G^T (6x6).
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
                for (int lane = 0; lane < lanes; ++lane) {
                    dst[lane] = sum[lane];
                }
            }
        }
    }
}

DL_CPU_CLONES
void kernel_gradients(const ConvGeometry& g, const float* du, int first, int last, float* dw) {
    const std::ptrdiff_t kernels = static_cast<std::ptrdiff_t>(g.outputs) * g.channels;
    constexpr int k_size = k_kernel * k_kernel;
    for (int k0 = first; k0 < last; k0 += k_lanes) {
        const int lanes = std::min(k_lanes, last - k0);
        Tile d{};
        for (int xi = 0; xi < k_points; ++xi) {
            const float* src = du + xi * kernels + k0;
            for (int lane = 0; lane < lanes; ++lane) {
                d[xi][lane] = src[lane];
            }
        }
        // t = G^T du (5x6), then dg = t G (5x5).
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

Lanes2d input_lanes(const Tiling& tiling) {
    return {k_out * tiling.rows + k_kernel - 1, k_out * tiling.cols + k_kernel - 1};
}

Lanes2d output_lanes(const Tiling& tiling) {
    return {k_out * tiling.rows, k_out * tiling.cols};
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

DL_CPU_CLONES
void transform_outputs(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                       const float* m, const float* bias, float* y) {
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
            std::array<Lanes, k_out * k_tile> half{}; // A^T t: 2 x 6
            for (int j = 0; j < k_tile; ++j) {
                at_line(&t[j], k_tile, half[j], half[k_tile + j]);
            }
            std::array<Lanes, k_out * k_out> out{}; // (A^T t) A: 2 x 2
            for (int a = 0; a < k_out; ++a) {
                at_line(&half[a * k_tile], 1, out[a * k_out], out[a * k_out + 1]);
            }
            const TileAt at(tiling, block.p_first + p);
            const int rows = std::min(k_out, out_h - at.y);
            const int cols = std::min(k_out, out_w - at.x);
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

DL_CPU_CLONES
void output_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                      const float* dyt, float* dm) {
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
            std::array<Lanes, k_tile * k_out> half{}; // A e: 6 x 2
            for (int bx = 0; bx < k_out; ++bx) {
                a_line(e[bx], e[k_out + bx], &half[bx], k_out);
            }
            Tile t; // (A e) A^T: 6 x 6
            for (int i = 0; i < k_tile; ++i) {
                a_line(half[i * k_out], half[i * k_out + 1], &t[i * k_tile], 1);
            }
            float* dst = dm + o * columns + static_cast<std::ptrdiff_t>(p) * k_lanes;
            for (int xi = 0; xi < k_points; ++xi) {
                std::memcpy(dst + xi * stride, &t[xi], sizeof(Lanes));
            }
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
    for (int lane = 0; lane < block.images; ++lane) {
        for (int c = 0; c < g.channels; ++c) {
            float* dst = dx + plane_offset(block.image + lane, g.channels, c, plane);
            for (int h = 0; h < g.height; ++h) {
                const float* src = dxt + lanes_at(shape, c, h + g.pad, g.pad) + lane;
                for (int w = 0; w < g.width; ++w) {
                    dst[h * g.width + w] = src[static_cast<std::ptrdiff_t>(w) * k_lanes];
                }
            }
        }
    }
}

} // namespace dl::cpu::winograd
