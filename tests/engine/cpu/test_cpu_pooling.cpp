// The CPU backend's pooling and ReLU loops (cpu/pooling.hpp) against their plain reference loops,
// bit for bit: outputs, argmax indices and gradients, on every kernel/stride/pad combination up to
// 5/3/2 over odd and even sizes (Caffe's ceil-mode windows that hang over the edge included), on
// data with ties, NaN and infinities.

#include "cpu/pooling.hpp"
#include "reference/reference.hpp"
#include "reference_checks.hpp"

#include <dl/backend.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace dl {
namespace {

using dl_test::against_reference::describe;

// Bit patterns: NaN compares unequal to itself, and -0.0 equal to 0.0.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
        std::uint32_t a = 0;
        std::uint32_t b = 0;
        std::memcpy(&a, &got[i], sizeof a);
        std::memcpy(&b, &want[i], sizeof b);
        ASSERT_EQ(a, b) << what << ": element " << i << " is " << got[i] << ", expected "
                        << want[i];
    }
}

// Values from a few levels, so windows hold ties; some NaN and infinities when `specials`.
std::vector<float> plane(std::mt19937& rng, std::size_t n, bool specials) {
    std::uniform_int_distribution<int> level(-3, 3);
    std::uniform_int_distribution<int> special(0, 19);
    std::vector<float> v(n);
    for (float& e : v) {
        e = static_cast<float>(level(rng)) * 0.25F;
        if (specials) {
            const int s = special(rng);
            if (s == 0) {
                e = std::numeric_limits<float>::quiet_NaN();
            } else if (s == 1) {
                e = -std::numeric_limits<float>::infinity();
            } else if (s == 2) {
                e = std::numeric_limits<float>::infinity();
            }
        }
    }
    return v;
}

// Every geometry with kernel 1..5, stride 1..3, pad < kernel, sizes 1..9 by 1..9 (a sample of
// the pairs) where Caffe's output size is positive.
std::vector<PoolGeometry> geometries() {
    std::vector<PoolGeometry> out;
    for (int kernel = 1; kernel <= 5; ++kernel) {
        for (int stride = 1; stride <= 3; ++stride) {
            for (int pad = 0; pad < std::min(kernel, 3); ++pad) {
                for (int height = 1; height <= 9; height += 2) {
                    for (int width = std::max(1, kernel - 2 * pad); width <= 9; ++width) {
                        PoolGeometry g{1, 1, height, width, kernel, stride, pad};
                        if (height + 2 * pad < kernel || g.out_height() <= 0 ||
                            g.out_width() <= 0) {
                            continue;
                        }
                        out.push_back(g);
                    }
                }
            }
        }
    }
    // cifar10_quick's pool1, pool2 and pool3 planes.
    out.push_back({1, 1, 32, 32, 3, 2, 0});
    out.push_back({1, 1, 16, 16, 3, 2, 0});
    out.push_back({1, 1, 8, 8, 3, 2, 0});
    // Whole vectors of 8 output columns and a partial one after them (17 and 16 + 1).
    out.push_back({1, 1, 35, 35, 3, 2, 0});
    out.push_back({1, 1, 7, 33, 3, 2, 1});
    // 3x3 / 2 without padding has its own loops (4, 8 or 16 output columns to a vector): every
    // height and width from 2 to 40, so every row length around each vector width, both parities
    // (odd widths end on a pixel only the last window column holds, even ones on a window cut
    // short), rows that fill the vectors exactly, rows one pixel past them (33: 16 output columns
    // and a 33rd pixel) and rows with a partial vector after whole ones (35 to 40).
    for (int height = 2; height <= 40; height += height < 12 ? 1 : 7) {
        for (int width = 2; width <= 40; ++width) {
            out.push_back({1, 1, height, width, 3, 2, 0});
        }
    }
    // Two and more whole vectors of 16 (32, 33 output columns).
    out.push_back({1, 1, 5, 65, 3, 2, 0});
    out.push_back({1, 1, 6, 66, 3, 2, 0});
    return out;
}

TEST(CpuPooling, MaxPoolingMatchesTheReferenceBitForBitArgmaxIncluded) {
    std::mt19937 rng(11);
    int checked = 0;
    for (const PoolGeometry& g : geometries()) {
        for (bool specials : {false, true}) {
            const auto x = plane(rng, static_cast<std::size_t>(g.height) * g.width, specials);
            const std::size_t n = static_cast<std::size_t>(g.out_height()) * g.out_width();
            std::vector<float> y(n, 7.0F);
            std::vector<float> want_y(n, -7.0F);
            std::vector<std::int32_t> arg(n, -1);
            std::vector<std::int32_t> want_arg(n, -2);
            cpu::max_pool_planes(g, 1, x.data(), y.data(), arg.data());
            cpu::max_pool_plane_reference(g, x.data(), want_y.data(), want_arg.data());
            expect_same_bits(y, want_y, describe(g));
            ASSERT_EQ(arg, want_arg) << describe(g);
            ++checked;
        }
    }
    EXPECT_GT(checked, 500);
}

TEST(CpuPooling, MaxPoolingBackwardMatchesTheReferenceBitForBit) {
    // The argmax of tie-heavy data: neighbouring windows often choose the same pixel (up to 4
    // with 3x3 / 2), whose gradient then sums theirs; real-valued dy, so a different order of
    // those sums would show, and some -0 in dy, which must leave a chosen pixel at +0 as the
    // reference's 0 + -0 does.
    std::mt19937 rng(14);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    for (const PoolGeometry& g : geometries()) {
        // A kernel smaller than the stride can leave the last window past the image: its argmax
        // then names no pixel of the plane, and neither version can add its gradient anywhere.
        if ((g.out_height() - 1) * g.stride - g.pad >= g.height ||
            (g.out_width() - 1) * g.stride - g.pad >= g.width) {
            continue;
        }
        for (bool specials : {false, true}) {
            const auto x = plane(rng, static_cast<std::size_t>(g.height) * g.width, specials);
            const std::size_t n = static_cast<std::size_t>(g.out_height()) * g.out_width();
            std::vector<float> y(n);
            std::vector<std::int32_t> arg(n);
            cpu::max_pool_plane_reference(g, x.data(), y.data(), arg.data());
            std::vector<float> dy(n);
            for (float& e : dy) {
                e = uniform(rng) > 0.9F ? -0.0F : uniform(rng);
            }
            std::vector<float> dx(x.size(), 7.0F);
            std::vector<float> want_dx(x.size(), -7.0F);
            cpu::max_pool_planes_backward(g, 1, dy.data(), arg.data(), dx.data());
            cpu::max_pool_plane_backward_reference(g, dy.data(), arg.data(), want_dx.data());
            expect_same_bits(dx, want_dx, "max backward " + describe(g));
        }
    }
}

TEST(CpuPooling, MaxPoolingBackwardSumsAPixelsWindowsInRowMajorOrder) {
    // 3x3 / 2 on 5x5: all four windows choose the centre. Row-major order adds
    // ((1 + 1e8) - 1e8) + 0.5 = 0.5 (1e8 + 1 rounds to 1e8); the reverse order would give 1.5.
    PoolGeometry g{1, 1, 5, 5, 3, 2, 0};
    std::vector<float> x(25, 0.0F);
    x[12] = 1.0F;
    std::vector<float> y(4);
    std::vector<std::int32_t> arg(4);
    cpu::max_pool_planes(g, 1, x.data(), y.data(), arg.data());
    ASSERT_EQ(arg, (std::vector<std::int32_t>{12, 12, 12, 12}));
    const std::vector<float> dy = {1.0F, 1e8F, -1e8F, 0.5F};
    std::vector<float> dx(25, 7.0F);
    cpu::max_pool_planes_backward(g, 1, dy.data(), arg.data(), dx.data());
    EXPECT_EQ(dx[12], 0.5F);
    EXPECT_EQ(std::count(dx.begin(), dx.end(), 0.0F), 24);
}

TEST(CpuPooling, MaxPoolingTakesTheFirstMaximumInRowMajorOrder) {
    // 3x3 / 2 on 5x5, pad 0: window (0, 0) holds 1.0 at (0, 2) and at (1, 0); row-major order
    // reaches (0, 2) first, a column-first order would report (1, 0).
    PoolGeometry g{1, 1, 5, 5, 3, 2, 0};
    std::vector<float> x(25, 0.0F);
    x[2] = 1.0F;
    x[5] = 1.0F;
    std::vector<float> y(4);
    std::vector<std::int32_t> arg(4);
    cpu::max_pool_planes(g, 1, x.data(), y.data(), arg.data());
    EXPECT_EQ(y[0], 1.0F);
    EXPECT_EQ(arg[0], 2);
    // A window of NaN only reports -FLT_MAX at its first pixel, like Caffe.
    std::fill(x.begin(), x.end(), std::numeric_limits<float>::quiet_NaN());
    cpu::max_pool_planes(g, 1, x.data(), y.data(), arg.data());
    EXPECT_EQ(y[3], -std::numeric_limits<float>::max());
    EXPECT_EQ(arg[3], 2 * 5 + 2);
}

TEST(CpuPooling, AveragePoolingMatchesTheReferenceBitForBit) {
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    for (const PoolGeometry& g : geometries()) {
        // Real-valued data: the sums round, so a different order would show.
        std::vector<float> x(static_cast<std::size_t>(g.height) * g.width);
        for (float& e : x) {
            e = uniform(rng);
        }
        const std::size_t n = static_cast<std::size_t>(g.out_height()) * g.out_width();
        std::vector<float> y(n, 7.0F);
        std::vector<float> want_y(n, -7.0F);
        cpu::ave_pool_planes_forward(g, 1, x.data(), y.data());
        cpu::ave_pool_plane_forward_reference(g, x.data(), want_y.data());
        expect_same_bits(y, want_y, "forward " + describe(g));

        std::vector<float> dy(n);
        for (float& e : dy) {
            e = uniform(rng);
        }
        std::vector<float> dx(x.size(), 7.0F);
        std::vector<float> want_dx(x.size(), -7.0F);
        cpu::ave_pool_planes_backward(g, 1, dy.data(), dx.data());
        cpu::ave_pool_plane_backward_reference(g, dy.data(), want_dx.data());
        expect_same_bits(dx, want_dx, "backward " + describe(g));
    }
}

TEST(CpuPooling, AveragePoolingDividesByTheWindowClippedToTheImagePlusPadding) {
    // 3x3 / 2, pad 1 on 4x4 of ones: out 3x3, windows over rows (and columns) -1..1, 1..3 and
    // 3..5. Window (0, 0): 4 pixels inside, divisor 9. Window (1, 1): 9 inside, divisor 9.
    // Window (2, 2): 3..5 clipped to the image plus pad (3..4) is 2 x 2, with 1 pixel inside.
    PoolGeometry g{1, 1, 4, 4, 3, 2, 1};
    ASSERT_EQ(g.out_height(), 3);
    std::vector<float> x(16, 1.0F);
    std::vector<float> y(9);
    cpu::ave_pool_planes_forward(g, 1, x.data(), y.data());
    EXPECT_FLOAT_EQ(y[0], 4.0F / 9.0F);
    EXPECT_FLOAT_EQ(y[4], 1.0F);
    EXPECT_FLOAT_EQ(y[8], 1.0F / 4.0F);
}

TEST(CpuPooling, SeveralPlanesAtOnceMatchThePlaneReference) {
    // 3x3 / 2 planes 16 and 8 pixels wide go two and four to a vector (cifar10_quick's pool2
    // and pool3): every count of planes up to 9, so whole groups and the planes left over, on
    // heights of both parities; other widths and a padded geometry go one plane at a time.
    std::mt19937 rng(15);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    std::vector<PoolGeometry> shapes;
    for (int height : {3, 4, 7, 8, 16}) {
        for (int width : {7, 8, 9, 15, 16, 17, 32}) {
            shapes.push_back({1, 1, height, width, 3, 2, 0});
        }
    }
    shapes.push_back({1, 1, 8, 8, 3, 2, 1});
    for (const PoolGeometry& g : shapes) {
        const std::size_t in_plane = static_cast<std::size_t>(g.height) * g.width;
        const std::size_t out_plane = static_cast<std::size_t>(g.out_height()) * g.out_width();
        for (int planes = 1; planes <= 9; ++planes) {
            const std::string what = describe(g) + ", " + std::to_string(planes) + " planes";
            const std::size_t n = static_cast<std::size_t>(planes);
            const auto x = plane(rng, n * in_plane, true);
            std::vector<float> real(n * in_plane);
            std::vector<float> dy(n * out_plane);
            for (float& e : real) {
                e = uniform(rng);
            }
            for (float& e : dy) {
                e = uniform(rng);
            }
            std::vector<float> y(n * out_plane, 7.0F);
            std::vector<std::int32_t> arg(n * out_plane, -1);
            std::vector<float> max_dx(n * in_plane, 7.0F);
            std::vector<float> ave(n * out_plane, 7.0F);
            std::vector<float> ave_dx(n * in_plane, 7.0F);
            cpu::max_pool_planes(g, planes, x.data(), y.data(), arg.data());
            cpu::max_pool_planes_backward(g, planes, dy.data(), arg.data(), max_dx.data());
            cpu::ave_pool_planes_forward(g, planes, real.data(), ave.data());
            cpu::ave_pool_planes_backward(g, planes, dy.data(), ave_dx.data());
            std::vector<float> want_y(y.size());
            std::vector<std::int32_t> want_arg(arg.size());
            std::vector<float> want_max_dx(max_dx.size());
            std::vector<float> want_ave(ave.size());
            std::vector<float> want_ave_dx(ave_dx.size());
            for (std::size_t p = 0; p < n; ++p) {
                cpu::max_pool_plane_reference(g, x.data() + p * in_plane,
                                              want_y.data() + p * out_plane,
                                              want_arg.data() + p * out_plane);
                cpu::max_pool_plane_backward_reference(g, dy.data() + p * out_plane,
                                                       want_arg.data() + p * out_plane,
                                                       want_max_dx.data() + p * in_plane);
                cpu::ave_pool_plane_forward_reference(g, real.data() + p * in_plane,
                                                      want_ave.data() + p * out_plane);
                cpu::ave_pool_plane_backward_reference(g, dy.data() + p * out_plane,
                                                       want_ave_dx.data() + p * in_plane);
            }
            expect_same_bits(y, want_y, "max " + what);
            ASSERT_EQ(arg, want_arg) << what;
            expect_same_bits(max_dx, want_max_dx, "max backward " + what);
            expect_same_bits(ave, want_ave, "ave " + what);
            expect_same_bits(ave_dx, want_ave_dx, "ave backward " + what);
        }
    }
}

TEST(CpuPooling, BackendPoolingMatchesThePlaneReferenceOnABatch) {
    // Through the backend's threads and plane split (8 tasks on 2 threads): cifar10_quick's
    // pool1, pool2 and pool3 shapes, with slices of whole groups of 2 and 4 planes and, on 15
    // planes, slices that leave planes over, and one the 3x3 / 2 loops leave to the general ones
    // (padded).
    auto backend = make_backend("cpu", 2);
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    for (PoolGeometry g : {PoolGeometry{3, 5, 32, 32, 3, 2, 0}, PoolGeometry{4, 8, 16, 16, 3, 2, 0},
                           PoolGeometry{4, 8, 8, 8, 3, 2, 0}, PoolGeometry{3, 5, 8, 8, 3, 2, 0},
                           PoolGeometry{2, 3, 9, 7, 3, 2, 1}}) {
        const std::size_t in_plane = static_cast<std::size_t>(g.height) * g.width;
        const std::size_t out_plane = static_cast<std::size_t>(g.out_height()) * g.out_width();
        const std::size_t planes = static_cast<std::size_t>(g.batch) * g.channels;
        std::vector<float> x(planes * in_plane);
        std::vector<float> dy(planes * out_plane);
        for (float& e : x) {
            e = uniform(rng);
        }
        for (float& e : dy) {
            e = uniform(rng);
        }
        std::vector<float> y(dy.size());
        std::vector<float> ave(dy.size());
        std::vector<float> dx(x.size());
        std::vector<std::int32_t> arg(dy.size());
        backend->max_pool_forward(g, x.data(), y.data(), arg.data());
        backend->ave_pool_forward(g, x.data(), ave.data());
        backend->ave_pool_backward(g, dy.data(), dx.data());
        std::vector<float> max_dx(x.size());
        backend->max_pool_backward(g, x.data(), y.data(), dy.data(), arg.data(), max_dx.data());
        std::vector<float> want_y(dy.size());
        std::vector<float> want_ave(dy.size());
        std::vector<float> want_dx(x.size());
        std::vector<float> want_max_dx(x.size());
        std::vector<std::int32_t> want_arg(dy.size());
        for (std::size_t p = 0; p < planes; ++p) {
            cpu::max_pool_plane_reference(g, x.data() + p * in_plane, want_y.data() + p * out_plane,
                                          want_arg.data() + p * out_plane);
            cpu::ave_pool_plane_forward_reference(g, x.data() + p * in_plane,
                                                  want_ave.data() + p * out_plane);
            cpu::ave_pool_plane_backward_reference(g, dy.data() + p * out_plane,
                                                   want_dx.data() + p * in_plane);
            cpu::max_pool_plane_backward_reference(g, dy.data() + p * out_plane,
                                                   want_arg.data() + p * out_plane,
                                                   want_max_dx.data() + p * in_plane);
        }
        expect_same_bits(y, want_y, "max " + describe(g));
        EXPECT_EQ(arg, want_arg) << describe(g);
        expect_same_bits(ave, want_ave, "ave " + describe(g));
        expect_same_bits(dx, want_dx, "ave backward " + describe(g));
        expect_same_bits(max_dx, want_max_dx, "max backward " + describe(g));
    }
}

TEST(CpuRelu, ForwardAndBackwardInPlaceAndNot) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    // 37 values: a vector loop's body and its remainder.
    std::vector<float> x(37);
    std::vector<float> dy(37);
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
        dy[i] = static_cast<float>(i) + 0.5F;
    }
    x[3] = nan;
    x[4] = inf;
    x[5] = -inf;
    dy[6] = nan;  // x[6] = 2: passes through
    dy[10] = inf; // x[10] = -2: blocked
    // The definition (dl::ref); a ReLU's values and gradients are inputs, exact in float.
    const std::vector<double> ref_y = ref::activation_forward(Activation::relu, x);
    const std::vector<double> ref_dx = ref::activation_backward(Activation::relu, x, dy);
    const std::vector<float> want_y(ref_y.begin(), ref_y.end());
    const std::vector<float> want_dx(ref_dx.begin(), ref_dx.end());
    std::vector<float> y(x.size(), 9.0F);
    cpu::relu_forward(x.size(), x.data(), y.data());
    expect_same_bits(y, want_y, "relu forward");
    std::vector<float> in_place = x;
    cpu::relu_forward(in_place.size(), in_place.data(), in_place.data());
    expect_same_bits(in_place, want_y, "relu forward in place");

    std::vector<float> dx(x.size(), 9.0F);
    cpu::relu_backward(x.size(), want_y.data(), dy.data(), dx.data());
    expect_same_bits(dx, want_dx, "relu backward");
    std::vector<float> d = dy;
    cpu::relu_backward(d.size(), want_y.data(), d.data(), d.data());
    expect_same_bits(d, want_dx, "relu backward in place");
}

} // namespace
} // namespace dl
