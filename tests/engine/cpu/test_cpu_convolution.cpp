// The CPU backend's convolution against the definition (dl::ref, engine/reference/), for
// its three paths: Winograd F(4x4, 5x5) (5x5, stride 1, at least 8 input channels), direct loops
// (stride 1, ungrouped, at most 256 taps, outputs at least 16 wide; dw and db only, as for a
// first layer) and im2col + sgemm (everything else, one image per sgemm from 32 x 32 outputs
// up). Forward, dx, dw and db, on LeNet's conv2 and cifar10_quick's conv1 and on shapes that
// take the edge cases: padding, odd output sizes (a tile partly outside, a vector past the edge),
// a batch that is not a multiple of the 8 images a Winograd tile group holds, and more tile
// positions than one block.

#include "cpu/direct_conv.hpp"
#include "cpu/winograd.hpp"
#include "reference/reference.hpp"

#include <dl/backend.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace dl {
namespace {

struct Reference {
    std::vector<double> y, dx, dw, db;
};

// The definition: engine/reference/reference.hpp (dl::ref), summed in double.
Reference reference(const ConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy) {
    ref::ConvGradients gradients = ref::conv_backward(g, x, w, dy);
    return {ref::conv_forward(g, x, w, b), std::move(gradients.dx), std::move(gradients.dw),
            std::move(gradients.db)};
}

// |got - want| <= tolerance * max |want|: 1e-5 for float sums of a few hundred terms (im2col,
// the direct loops); 2e-5 for Winograd, whose transforms add their rounding (up to 1.4e-5 of
// the largest output with F(6x6, 3x3) over 256 channels, 1e-5 over 64; F(4x4, 5x5) 9e-6 at 256).
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what, double tolerance = 1e-5) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 1.0;
    for (double v : want) {
        scale = std::max(scale, std::fabs(v));
    }
    double worst = 0.0;
    std::size_t worst_at = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double error = std::fabs(got[i] - want[i]);
        if (error > worst) {
            worst = error;
            worst_at = i;
        }
    }
    EXPECT_LE(worst, tolerance * scale) << what << ": element " << worst_at << " is "
                                        << got[worst_at] << ", expected " << want[worst_at];
}

enum class Path { winograd, direct, im2col };

std::ostream& operator<<(std::ostream& out, Path path) {
    constexpr std::array<const char*, 3> k_names = {"winograd", "direct", "im2col"};
    return out << k_names[static_cast<std::size_t>(path)];
}

Path path_of(const ConvGeometry& g) {
    if (cpu::winograd::applies(g)) {
        return Path::winograd;
    }
    return cpu::direct_conv::applies(g) ? Path::direct : Path::im2col;
}

// Uniform random x, w, b and dy for g, drawn in that order from seed.
struct Inputs {
    std::vector<float> x, w, b, dy;
};
Inputs random_inputs(const ConvGeometry& g, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    const auto random = [&](std::size_t n) {
        std::vector<float> v(n);
        for (float& e : v) {
            e = uniform(rng);
        }
        return v;
    };
    Inputs in;
    in.x = random(static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width);
    in.w = random(static_cast<std::size_t>(g.outputs) * g.channels / g.group * g.kernel * g.kernel);
    in.b = random(static_cast<std::size_t>(g.outputs));
    in.dy = random(static_cast<std::size_t>(g.batch) * g.outputs * g.out_height() * g.out_width());
    return in;
}

// The backward pass runs twice: with dx (which the direct path leaves to im2col) and without it
// (a first layer: the direct path's own weight gradient).
void check(const ConvGeometry& g, Path path, int threads = 2) {
    ASSERT_EQ(path_of(g), path) << "the shape does not take the intended path";
    const auto [x, w, b, dy] = random_inputs(g, 7);
    const Reference want = reference(g, x, w, b, dy);

    auto backend = make_backend("cpu", threads);
    std::vector<float> y(want.y.size(), 1e30F); // garbage: every output must be written
    std::vector<float> dx(x.size(), 1e30F);
    std::vector<float> dw(w.size(), 1e30F);
    std::vector<float> db(b.size(), 1e30F);
    backend->conv_forward(g, x.data(), w.data(), b.data(), y.data());
    backend->conv_backward(g, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    const double tolerance = path == Path::winograd ? 2e-5 : 1e-5;
    expect_close(y, want.y, "y", tolerance);
    expect_close(dx, want.dx, "dx", tolerance);
    expect_close(dw, want.dw, "dw", tolerance);
    expect_close(db, want.db, "db", tolerance);
    std::fill(dw.begin(), dw.end(), 1e30F);
    std::fill(db.begin(), db.end(), 1e30F);
    backend->conv_backward(g, x.data(), w.data(), dy.data(), nullptr, dw.data(), db.data());
    expect_close(dw, want.dw, "dw without dx", tolerance);
    expect_close(db, want.db, "db without dx", tolerance);
}

// Results of forward and backward (dx included when with_dx) on 1, 2 and 3 threads.
std::vector<std::vector<float>> results_by_threads(const ConvGeometry& g, bool with_dx) {
    const auto [x, w, b, dy] = random_inputs(g, 3);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
        auto backend = make_backend("cpu", threads);
        std::vector<float> y(dy.size());
        std::vector<float> dx(x.size());
        std::vector<float> dw(w.size());
        std::vector<float> db(b.size());
        backend->conv_forward(g, x.data(), w.data(), b.data(), y.data());
        backend->conv_backward(g, x.data(), w.data(), dy.data(), with_dx ? dx.data() : nullptr,
                               dw.data(), db.data());
        if (with_dx) {
            y.insert(y.end(), dx.begin(), dx.end());
        }
        y.insert(y.end(), dw.begin(), dw.end());
        y.insert(y.end(), db.begin(), db.end());
        results.push_back(y);
    }
    return results;
}

TEST(CpuConvolution, WinogradMatchesTheDefinitionOnLeNetConv2) {
    check({64, 20, 12, 12, 50, 5, 1, 0, 1}, Path::winograd);
}

TEST(CpuConvolution, WinogradMatchesTheDefinitionWithPaddingOddSizesAndAPartialGroup) {
    // Output 9 x 7: the last tile row and column are partly outside; 11 images: a group of 3.
    check({11, 8, 11, 9, 6, 5, 1, 2, 1}, Path::winograd);
    // Output 20 x 20 = 100 tile positions: more than one block of them.
    check({3, 9, 24, 24, 4, 5, 1, 0, 1}, Path::winograd, 1);
}

// F(6x6, 3x3): ResNet-20's three stages (6x6 tiles over 32, 16 and 8 outputs: the last
// tiles of each row partly outside), and no padding with odd sizes.
TEST(CpuConvolution, Winograd3x3MatchesTheDefinition) {
    check({9, 16, 32, 32, 16, 3, 1, 1, 1}, Path::winograd);
    check({10, 32, 16, 16, 32, 3, 1, 1, 1}, Path::winograd);
    check({3, 64, 8, 8, 64, 3, 1, 1, 1}, Path::winograd);
    check({5, 8, 13, 11, 6, 3, 1, 0, 1}, Path::winograd, 1);
    // AlexNet's conv3 depth (256 channels at 13 x 13): the rounding over a long channel sum.
    check({1, 256, 13, 13, 8, 3, 1, 1, 1}, Path::winograd);
}

TEST(CpuConvolution, WinogradResultsDoNotDependOnTheThreadCount) {
    for (const ConvGeometry& g :
         {ConvGeometry{19, 8, 10, 10, 7, 5, 1, 1, 1}, ConvGeometry{19, 8, 14, 10, 7, 3, 1, 1, 1}}) {
        ASSERT_EQ(path_of(g), Path::winograd);
        const auto results = results_by_threads(g, true);
        EXPECT_EQ(results[0], results[1]);
        EXPECT_EQ(results[0], results[2]);
    }
}

// cifar10_quick's conv1 (3 x 32 x 32, 32 outputs, 5x5, pad 2), 11 images: 8 tasks of 1 or 2.
TEST(CpuConvolution, DirectResultsDoNotDependOnTheThreadCount) {
    const ConvGeometry g{11, 3, 32, 32, 32, 5, 1, 2, 1};
    ASSERT_EQ(path_of(g), Path::direct);
    const auto results = results_by_threads(g, false);
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
}

TEST(CpuConvolution, DirectMatchesTheDefinition) {
    check({3, 3, 32, 32, 32, 5, 1, 2, 1}, Path::direct);    // cifar10_quick's conv1, batch 3
    check({1, 3, 32, 32, 32, 5, 1, 2, 1}, Path::direct, 1); // batch 1 on one thread
    // LeNet's conv1: 24 x 24 outputs, a partial vector at every row's end.
    check({4, 1, 28, 28, 20, 5, 1, 0, 1}, Path::direct);
    // Odd sizes (19 x 37 outputs), 3x3, 7 outputs (a partial block of them), 13 images on 3
    // threads.
    check({13, 4, 19, 37, 7, 3, 1, 1, 1}, Path::direct, 3);
    // 7x7 with pad 4 (more than the kernel's half: outputs wider than the image), 2 channels: 98
    // taps, not a whole number of gradient blocks; 5 outputs.
    check({5, 2, 17, 20, 5, 7, 1, 4, 1}, Path::direct);
    // 1x1: one tap per channel.
    check({2, 6, 16, 16, 3, 1, 1, 0, 1}, Path::direct, 1);
    // 3 channels of 9x9: 243 taps, 49 gradient blocks with a partial last one.
    check({2, 3, 24, 24, 4, 9, 1, 4, 1}, Path::direct);
}

// The backend runs the widest blocking the CPU has; the others (AVX2, the 4-float baseline) are
// called here by name, so each is checked on a machine that has it, not only on one that picks
// it.
TEST(CpuConvolution, EveryDirectBlockingThisCpuRunsMatchesTheDefinition) {
    using cpu::direct_conv::Blocking;
    ASSERT_TRUE(cpu::direct_conv::runs(Blocking::base));
    ASSERT_TRUE(cpu::direct_conv::runs(cpu::direct_conv::best_blocking()));
    const std::vector<ConvGeometry> shapes = {
        {3, 3, 32, 32, 32, 5, 1, 2, 1}, // cifar10_quick's conv1
        {4, 1, 28, 28, 20, 5, 1, 0, 1}, // LeNet's conv1: a partial vector at each row's end
        {5, 4, 19, 37, 7, 3, 1, 1, 1},  // odd sizes, a partial block of outputs
        {2, 3, 24, 24, 4, 9, 1, 4, 1},  // 243 taps
    };
    int checked = 0;
    for (const Blocking blocking : {Blocking::wide, Blocking::narrow, Blocking::base}) {
        if (!cpu::direct_conv::runs(blocking)) {
            continue;
        }
        ++checked;
        for (const ConvGeometry& g : shapes) {
            ASSERT_TRUE(cpu::direct_conv::applies(g));
            const auto [x, w, b, dy] = random_inputs(g, 11);
            const Reference want = reference(g, x, w, b, dy);
            std::vector<float> scratch(cpu::direct_conv::scratch_floats_with(blocking, g));
            std::vector<float> y(want.y.size(), 1e30F);
            std::vector<float> dw(w.size(), 1e30F);
            std::vector<float> db(b.size(), 1e30F);
            cpu::direct_conv::forward_with(blocking, g, x.data(), w.data(), b.data(), 0, g.batch,
                                           y.data(), scratch.data());
            cpu::direct_conv::weight_gradients_with(blocking, g, x.data(), dy.data(), 0, g.batch,
                                                    dw.data(), db.data(), scratch.data());
            const std::string what = "blocking " + std::to_string(static_cast<int>(blocking)) +
                                     ", " + std::to_string(g.channels) + " channels of " +
                                     std::to_string(g.kernel) + "x" + std::to_string(g.kernel);
            expect_close(y, want.y, what + ": y");
            expect_close(dw, want.dw, what + ": dw");
            expect_close(db, want.db, what + ": db");
        }
    }
    EXPECT_GE(checked, 1);
}

TEST(CpuConvolution, Im2colMatchesTheDefinition) {
    // LeNet's conv1 on 18 x 18 images: outputs too narrow for a vector, too few channels for
    // Winograd.
    check({4, 1, 18, 18, 20, 5, 1, 0, 1}, Path::im2col);
    // 5x5 on 72 x 72 x 32: a group's transposed planes would take 5.3 MB, im2col instead.
    check({1, 32, 72, 72, 2, 5, 1, 0, 1}, Path::im2col);
    check({3, 8, 9, 9, 4, 3, 2, 1, 1}, Path::im2col);
    check({2, 8, 8, 8, 4, 5, 1, 1, 2}, Path::im2col); // grouped
    // 6 channels of 7x7: 294 taps, more than the direct loops take.
    check({2, 6, 24, 24, 4, 7, 1, 3, 1}, Path::im2col);
}

// From 1024 outputs per plane on, im2col takes one image per sgemm, writes y and reads dy in
// place (no gathered copy) and sums the weight gradient transposed.
TEST(CpuConvolution, Im2colOneImagePerSgemmMatchesTheDefinition) {
    // 32 x 32 outputs of 16 channels with a 7x7 kernel (784 taps: too many for the direct loops,
    // no Winograd form), batch 3 on 2 threads, and batch 1.
    check({3, 16, 38, 38, 8, 7, 1, 0, 1}, Path::im2col);
    check({1, 16, 38, 38, 8, 7, 1, 0, 1}, Path::im2col);
    // Odd sizes (33 x 35 outputs), two groups, padding.
    check({2, 4, 33, 35, 6, 3, 1, 1, 2}, Path::im2col);
    // Stride 2 (35 x 33 outputs) on 3 threads.
    check({5, 3, 70, 66, 4, 3, 2, 1, 1}, Path::im2col, 3);
}

} // namespace
} // namespace dl
