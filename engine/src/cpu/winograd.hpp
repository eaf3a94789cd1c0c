#pragma once
// Winograd F(4x4, 5x5) and F(6x6, 3x3) convolution (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016) for the CPU backend's stride-1, ungrouped 5x5 and 3x3
// convolutions: LeNet's and cifar10_quick's conv2, ResNet's and VGG's 3x3 layers. Both take 8x8
// input tiles, at the same interpolation points and with the same B^T: a 3x3 kernel gives a
// 6x6 block of outputs per tile (64 multiplications per 36 outputs instead of 324). What follows
// says it for 5x5. Each 4x4 block of outputs is computed from the 8x8 block of
// inputs under it, transformed so that the convolution becomes 64 elementwise products; summed
// over channels, those are 64 small matrix products (sgemm): 64 multiplications per 16 outputs
// instead of 400 (F(2x2, 5x5), which this replaced, needs 36 per 4: 2.25 times as many, and
// as many more transformed values to store and read back). The backward pass is the exact
// adjoint of the same transforms (the gradient of what the forward pass computed), so dW and dx
// are 64 sgemms each too. Results differ from im2col + sgemm by rounding only: about 5e-6 of
// the largest output with these interpolation points (0, +-1, +-2, +-1/2, inf), against 2e-6
// for F(2x2, 5x5).
//
// Tiles are handled k_lanes images at a time at the same tile position, one image per lane of
// an 8-float vector, so every transform is plain vector arithmetic with no shuffles.
// This file holds the transforms; cpu_backend.cpp owns the sgemms and the threading.
//
// Layouts: u and du are [64][outputs][channels]; a block's v and dv are [64][channels][columns]
// and m and dm are [64][outputs][columns], column (p - p_first) * k_lanes + lane, with
// point_stride floats between the 64 matrices.

#include <dl/backend.hpp>

#include <cstddef>

namespace dl::cpu::winograd {

inline constexpr int k_lanes = 8;   // images per tile group
inline constexpr int k_tile = 8;    // inputs per tile side: outputs per side + kernel - 1
inline constexpr int k_points = 64; // transformed values per 8x8 tile

/// Outputs per tile side: 4 for a 5x5 kernel (F(4x4, 5x5)), 6 for a 3x3 one (F(6x6, 3x3)).
[[nodiscard]] inline int outputs_per_tile(const ConvGeometry& g) {
    return k_tile - g.kernel + 1;
}

/// Whether the Winograd path computes this convolution. Below 8 input channels (LeNet's conv1)
/// the 64 products are too thin for sgemm and im2col is faster; on images large enough that a
/// group's transposed planes would pass 4 MB, im2col's bounded chunks use less memory.
[[nodiscard]] bool applies(const ConvGeometry& g);

/// The output tiles of one image (4x4 or 6x6): ceil(out / side) per side (a tile over the edge
/// computes outputs outside the image, which are dropped).
struct Tiling {
    explicit Tiling(const ConvGeometry& g)
        : out(outputs_per_tile(g)), kernel(g.kernel), rows((g.out_height() + out - 1) / out),
          cols((g.out_width() + out - 1) / out), positions(rows * cols) {}
    int out;    // outputs per tile side
    int kernel; // the kernel's side
    int rows;
    int cols;
    int positions;
};

/// A block of tiles: images [image, image + images) with images <= k_lanes (missing lanes are
/// zeros), tile positions [p_first, p_first + p_count).
struct Block {
    int image = 0;
    int images = 0;
    int p_first = 0;
    int p_count = 0;
    [[nodiscard]] int columns() const { return p_count * k_lanes; }
};

/// Floats from one transformed point to the next in a block's v and dv (rows = channels) or m
/// and dm (rows = outputs). A cache line more than rows x columns: rows x 128 floats is a multiple
/// of 2 KB, and the vectors one tile writes would all land in two sets of the L1 cache (the
/// input transform ran 2.4 times slower that way).
[[nodiscard]] inline std::ptrdiff_t point_stride(int rows, const Block& block) {
    constexpr int k_line_floats = 16;
    return static_cast<std::ptrdiff_t>(rows) * block.columns() + k_line_floats;
}

/// A group's planes transposed so that the k_lanes images of one pixel are one vector, with a
/// border of zeros wide enough for every tile: [planes][rows][cols][k_lanes]. Every pixel is
/// moved once, instead of once per overlapping tile, and the tile loops need no bounds checks.
struct Lanes2d {
    int rows;
    int cols;
    [[nodiscard]] std::size_t floats(int planes) const {
        return static_cast<std::size_t>(planes) * rows * cols * k_lanes;
    }
};
/// The inputs under all tiles (the padding included): out * tiles + kernel - 1 per side.
[[nodiscard]] Lanes2d input_lanes(const Tiling& tiling);
/// The outputs of all tiles (those over the edge included).
[[nodiscard]] Lanes2d output_lanes(const Tiling& tiling);

/// u = G w G^T for the kernels [first, last) of the outputs x channels kernels (o * C + c).
void transform_kernels(const ConvGeometry& g, const float* w, int first, int last, float* u);
/// dw = G^T du G for the kernels [first, last): the adjoint of transform_kernels.
void kernel_gradients(const ConvGeometry& g, const float* du, int first, int last, float* dw);

/// xt (input_lanes, channels planes) = the block's images of x, zeros outside the image.
void gather_inputs(const ConvGeometry& g, const Tiling& tiling, const Block& block, const float* x,
                   float* xt);
/// v = B^T d B for each tile's 8x8 input patch d, read from gather_inputs' xt.
void transform_inputs(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                      const float* xt, float* v);
/// y = A^T m A + bias at each tile's outputs inside the image; bias may be null.
void transform_outputs(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                       const float* m, const float* bias, float* y);
/// dyt (output_lanes, outputs planes) = the block's images of dy, zeros outside the image.
void gather_output_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                             const float* dy, float* dyt);
/// dm = A dy A^T, dy read from dyt: the adjoint of transform_outputs.
void output_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                      const float* dyt, float* dm);
/// dst (columns x rows, row stride rows) = the transpose of src (rows x columns, row stride
/// src_ld); columns is a multiple of k_lanes. OpenBLAS runs the weight gradient's 32 x 32 x 64
/// products twice as fast from dm transposed (`du += dm^T^T v^T`) as from dm (`du += dm v^T`).
void transpose(const float* src, int rows, int columns, std::ptrdiff_t src_ld, float* dst);
/// dxt += B dv B^T at each tile's inputs: the adjoint of transform_inputs. Tiles overlap, so
/// dxt (input_lanes) must be zeroed before a group's first block.
void input_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                     const float* dv, float* dxt);
/// dx = the image part of dxt for the block's images: the adjoint of gather_inputs.
void scatter_input_gradients(const ConvGeometry& g, const Tiling& tiling, const Block& block,
                             const float* dxt, float* dx);

} // namespace dl::cpu::winograd
