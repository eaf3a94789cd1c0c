// The CPU backend's convolution against a plain double-precision loop over the definition, for
// both of its paths: Winograd F(2x2, 5x5) (5x5, stride 1, at least 8 input channels) and im2col
// + sgemm (everything else, one image per sgemm from 32 x 32 outputs up). Forward, dx, dw and db,
// on LeNet's conv2 and on shapes that take the edge cases: padding, odd output sizes (a tile half
// outside), a batch that is not a multiple of the 8 images a Winograd tile group holds, and more
// tile positions than one block.

#include "cpu/winograd.hpp"

#include <dl/backend.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace dl {
namespace {

struct Reference {
    std::vector<double> y, dx, dw, db;
};

// y[n][o][i][j] = b[o] + sum over c, ki, kj of x[n][c][i*s - p + ki][j*s - p + kj] w[o][c][ki][kj]
// (c over the channels of o's group)
// and the three gradients of sum(y * dy), straight from that definition.
Reference reference(const ConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy) {
    const int oh = g.out_height();
    const int ow = g.out_width();
    const int k = g.kernel;
    Reference r;
    r.y.assign(static_cast<std::size_t>(g.batch) * g.outputs * oh * ow, 0.0);
    r.dx.assign(x.size(), 0.0);
    r.dw.assign(w.size(), 0.0);
    r.db.assign(b.size(), 0.0);
    const auto x_at = [&](int n, int c, int h, int v) {
        return ((static_cast<std::size_t>(n) * g.channels + c) * g.height + h) * g.width + v;
    };
    for (int n = 0; n < g.batch; ++n) {
        for (int o = 0; o < g.outputs; ++o) {
            for (int i = 0; i < oh; ++i) {
                for (int j = 0; j < ow; ++j) {
                    const std::size_t at =
                        ((static_cast<std::size_t>(n) * g.outputs + o) * oh + i) * ow + j;
                    double sum = b[o];
                    r.db[o] += dy[at];
                    const int group_channels = g.channels / g.group;
                    const int first_channel = o / (g.outputs / g.group) * group_channels;
                    for (int cl = 0; cl < group_channels; ++cl) {
                        const int c = first_channel + cl;
                        for (int ki = 0; ki < k; ++ki) {
                            for (int kj = 0; kj < k; ++kj) {
                                const int h = i * g.stride - g.pad + ki;
                                const int v = j * g.stride - g.pad + kj;
                                if (h < 0 || h >= g.height || v < 0 || v >= g.width) {
                                    continue;
                                }
                                const std::size_t wi =
                                    ((static_cast<std::size_t>(o) * group_channels + cl) * k + ki) *
                                        k +
                                    kj;
                                sum += static_cast<double>(x[x_at(n, c, h, v)]) * w[wi];
                                r.dw[wi] += static_cast<double>(x[x_at(n, c, h, v)]) * dy[at];
                                r.dx[x_at(n, c, h, v)] += static_cast<double>(w[wi]) * dy[at];
                            }
                        }
                    }
                    r.y[at] = sum;
                }
            }
        }
    }
    return r;
}

// |got - want| <= 1e-5 * max |want| (float rounding of sums of a few hundred terms).
void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what) {
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
    EXPECT_LE(worst, 1e-5 * scale) << what << ": element " << worst_at << " is " << got[worst_at]
                                   << ", expected " << want[worst_at];
}

void check(const ConvGeometry& g, bool winograd, int threads = 2) {
    ASSERT_EQ(cpu::winograd::applies(g), winograd) << "the shape does not take the intended path";
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    const auto random = [&](std::size_t n) {
        std::vector<float> v(n);
        for (float& e : v) {
            e = uniform(rng);
        }
        return v;
    };
    const std::size_t kernel = static_cast<std::size_t>(g.kernel) * g.kernel;
    const auto x = random(static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width);
    const auto w = random(static_cast<std::size_t>(g.outputs) * g.channels / g.group * kernel);
    const auto b = random(static_cast<std::size_t>(g.outputs));
    const auto dy =
        random(static_cast<std::size_t>(g.batch) * g.outputs * g.out_height() * g.out_width());
    const Reference want = reference(g, x, w, b, dy);

    auto backend = make_backend("cpu", threads);
    std::vector<float> y(want.y.size(), 1e30F); // garbage: every output must be written
    std::vector<float> dx(x.size(), 1e30F);
    std::vector<float> dw(w.size(), 1e30F);
    std::vector<float> db(b.size(), 1e30F);
    backend->conv_forward(g, x.data(), w.data(), b.data(), y.data());
    backend->conv_backward(g, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    expect_close(y, want.y, "y");
    expect_close(dx, want.dx, "dx");
    expect_close(dw, want.dw, "dw");
    expect_close(db, want.db, "db");
}

TEST(CpuConvolution, WinogradMatchesTheDefinitionOnLeNetConv2) {
    check({64, 20, 12, 12, 50, 5, 1, 0, 1}, true);
}

TEST(CpuConvolution, WinogradMatchesTheDefinitionWithPaddingOddSizesAndAPartialGroup) {
    // Output 9 x 7: the last tile row and column are half outside; 11 images: a group of 3.
    check({11, 8, 11, 9, 6, 5, 1, 2, 1}, true);
    // Output 20 x 20 = 100 tile positions: more than one block of them.
    check({3, 9, 24, 24, 4, 5, 1, 0, 1}, true, 1);
}

TEST(CpuConvolution, WinogradResultsDoNotDependOnTheThreadCount) {
    const ConvGeometry g{19, 8, 10, 10, 7, 5, 1, 1, 1};
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    std::vector<float> x(static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width);
    std::vector<float> w(static_cast<std::size_t>(g.outputs) * g.channels * 25);
    std::vector<float> dy(static_cast<std::size_t>(g.batch) * g.outputs * g.out_height() *
                          g.out_width());
    for (auto* v : {&x, &w, &dy}) {
        for (float& e : *v) {
            e = uniform(rng);
        }
    }
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
        auto backend = make_backend("cpu", threads);
        std::vector<float> y(dy.size());
        std::vector<float> dx(x.size());
        std::vector<float> dw(w.size());
        backend->conv_forward(g, x.data(), w.data(), nullptr, y.data());
        backend->conv_backward(g, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr);
        y.insert(y.end(), dx.begin(), dx.end());
        y.insert(y.end(), dw.begin(), dw.end());
        results.push_back(y);
    }
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
}

TEST(CpuConvolution, Im2colMatchesTheDefinition) {
    check({4, 1, 28, 28, 20, 5, 1, 0, 1}, false); // LeNet's conv1: too few channels
    // 5x5 on 72 x 72 x 32: a group's transposed planes would take 5.3 MB, im2col instead.
    check({1, 32, 72, 72, 2, 5, 1, 0, 1}, false);
    check({3, 8, 9, 9, 4, 3, 2, 1, 1}, false);
    check({2, 8, 8, 8, 4, 5, 1, 1, 2}, false); // grouped
}

// From 1024 outputs per plane on, im2col takes one image per sgemm, writes y and reads dy in
// place (no gathered copy) and sums the weight gradient transposed.
TEST(CpuConvolution, Im2colOneImagePerSgemmMatchesTheDefinition) {
    check({3, 3, 32, 32, 8, 5, 1, 2, 1}, false); // cifar10_quick's conv1, batch 3 on 2 threads
    check({1, 3, 32, 32, 8, 5, 1, 2, 1}, false); // batch 1
    // Odd sizes (33 x 35 outputs), two groups, padding.
    check({2, 4, 33, 35, 6, 3, 1, 1, 2}, false);
    // Stride 2 (35 x 33 outputs) on 3 threads.
    check({5, 3, 70, 66, 4, 3, 2, 1, 1}, false, 3);
}

} // namespace
} // namespace dl
