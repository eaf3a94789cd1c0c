#pragma once
// Direct convolution for the CPU backend's stride-1, ungrouped layers with few input channels,
// cifar10_quick's conv1 (3 channels, 5x5: 75 taps per output) among them. There im2col + sgemm
// multiplies a 32 x 75 matrix by a 75 x 1024 one per image: 75 is too thin a dimension for
// sgemm's blocking (about 55 GFLOP/s forward and 48 for the weight gradient on one core, against
// 140 for sgemm in cache), and the 75 x 1024 im2col matrix is written and read back per image.
//
// Here a block of output vectors (a segment of one output row, for a block of output channels)
// stays in registers while all taps are added into it: per tap one load of the zero-padded input
// serves the whole block of channels, and each broadcast weight the whole segment. The weight
// gradient runs the same loops with the roles exchanged: for a block of (output channel, tap)
// pairs, vectors of dy times the input shifted by the tap are summed over x in registers, and
// added across lanes once per task. Each task's sums run in a fixed order, so with the backend's
// fixed task split the results do not depend on the thread count.
//
// The kernels are compiled for 16-float vectors on x86-64-v4, 8-float vectors on AVX2 + FMA and
// 4-float vectors everywhere else, picked once at run time (the register blocks differ with the
// register file, which target_clones cannot express). The baseline rounds differently from the
// others (no FMA), as the other cloned loops do (cpu/clones.hpp).

#include <dl/backend.hpp>

#include <cstddef>

namespace dl::cpu::direct_conv {

/// Whether the direct kernels compute this convolution: stride 1, one group, at most 256 taps
/// (channels x kernel x kernel), an output at least 16 wide (one full vector), and per-thread
/// scratch under 8 MB. On 32 x 32 images with 32 outputs they ran 1.6-2.5 times faster than
/// im2col + sgemm up to 243 taps (3 channels of 9x9; AVX-512, one core); more taps are left to
/// sgemm, whose inner dimension is then long enough for its speed, unmeasured against these loops.
[[nodiscard]] bool applies(const ConvGeometry& g);

/// The register blockings: 16-float vectors (x86-64 with AVX-512), 8-float vectors (AVX2 + FMA)
/// and 4-float vectors (any CPU).
enum class Blocking { wide, narrow, base };

/// The widest blocking this CPU runs: the one forward and weight_gradients use.
[[nodiscard]] Blocking best_blocking();
/// Whether this CPU runs `blocking` (base everywhere; the others on x86-64 with their ISA).
[[nodiscard]] bool runs(Blocking blocking);

/// Floats of per-thread scratch that forward and weight_gradients need for g (the _with
/// forms: the same with the blocking named).
[[nodiscard]] std::size_t scratch_floats(const ConvGeometry& g);
[[nodiscard]] std::size_t scratch_floats_with(Blocking blocking, const ConvGeometry& g);

/// y = x * w + b for the images [first, last); b may be null.
void forward(const ConvGeometry& g, const float* x, const float* w, const float* b, int first,
             int last, float* y, float* scratch);

/// dw (w's layout) = the weight gradient summed over the images [first, last), and db
/// (outputs), if not null, their bias gradient. The input gradient is im2col's (cpu_backend).
void weight_gradients(const ConvGeometry& g, const float* x, const float* dy, int first, int last,
                      float* dw, float* db, float* scratch);

/// The same with a named blocking, which this CPU must run (runs()): the tests check every
/// blocking the machine has, not only the one it picks.
void forward_with(Blocking blocking, const ConvGeometry& g, const float* x, const float* w,
                  const float* b, int first, int last, float* y, float* scratch);
void weight_gradients_with(Blocking blocking, const ConvGeometry& g, const float* x,
                           const float* dy, int first, int last, float* dw, float* db,
                           float* scratch);

} // namespace dl::cpu::direct_conv
