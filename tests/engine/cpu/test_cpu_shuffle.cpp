// DL_SHUFFLE's GCC 10 form (the release is built with GCC 10, docs/install.md) against the
// builtin it stands in for, on the shapes the CPU loops use: same width (pooling's evens, odds
// and shifts, Winograd's transpose), narrowing (Winograd's halves) and widening (pooling's join).
#define DL_SHUFFLE_PORTABLE 1
#include "cpu/clones.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using F4 = float __attribute__((vector_size(4 * sizeof(float))));
using F8 = float __attribute__((vector_size(8 * sizeof(float))));
using F16 = float __attribute__((vector_size(16 * sizeof(float))));
using I8 = std::int32_t __attribute__((vector_size(8 * sizeof(std::int32_t))));

// By reference, as the CPU loops pass vectors (a by-value vector changes the ABI per target).
template <class V> void ramp(V& v, float from) {
    for (std::size_t i = 0; i < sizeof(V) / sizeof(v[0]); ++i) {
        v[i] = static_cast<decltype(v[0] + 0)>(from + static_cast<float>(i));
    }
}

template <class V> void expect_lanes(const V& got, const V& want) {
    for (std::size_t i = 0; i < sizeof(V) / sizeof(got[0]); ++i) {
        EXPECT_EQ(got[i], want[i]) << "lane " << i;
    }
}

#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
TEST(CpuShuffle, SameWidthMatchesTheBuiltin) {
    F8 a;
    F8 b;
    ramp(a, 0.0F);
    ramp(b, 100.0F);
    expect_lanes<F8>(DL_SHUFFLE(a, b, 0, 8, 2, 10, 4, 12, 6, 14),
                     __builtin_shufflevector(a, b, 0, 8, 2, 10, 4, 12, 6, 14));
    expect_lanes<F8>(DL_SHUFFLE(a, b, 1, 2, 3, 4, 5, 6, 7, 8),
                     __builtin_shufflevector(a, b, 1, 2, 3, 4, 5, 6, 7, 8));
    expect_lanes<F8>(DL_SHUFFLE(a, b, 8, 0, 1, 2, 8, 4, 5, 6),
                     __builtin_shufflevector(a, b, 8, 0, 1, 2, 8, 4, 5, 6));
    I8 ia;
    I8 ib;
    ramp(ia, 0.0F);
    ramp(ib, 50.0F);
    expect_lanes<I8>(DL_SHUFFLE(ia, ib, 0, 2, 4, 6, 8, 10, 12, 14),
                     __builtin_shufflevector(ia, ib, 0, 2, 4, 6, 8, 10, 12, 14));
}

TEST(CpuShuffle, NarrowingAndWideningMatchTheBuiltin) {
    F8 both;
    ramp(both, 3.0F);
    expect_lanes<F4>(DL_SHUFFLE(both, both, 4, 5, 6, 7),
                     __builtin_shufflevector(both, both, 4, 5, 6, 7));
    F8 low;
    F8 high;
    ramp(low, 0.0F);
    ramp(high, 20.0F);
    expect_lanes<F16>(
        DL_SHUFFLE(low, high, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
#endif

TEST(CpuShuffle, PortableFormPicksTheNamedLanes) {
    F4 a;
    F4 b;
    ramp(a, 0.0F);
    ramp(b, 10.0F);
    const F4 got = DL_SHUFFLE(a, b, 7, 0, 5, 2);
    const F4 want = {13.0F, 0.0F, 11.0F, 2.0F};
    expect_lanes<F4>(got, want);
}

} // namespace
