#pragma once
// DL_CPU_CLONES before a function definition compiles it three times, for AVX-512 machines
// (x86-64-v4), for AVX2+FMA machines (x86-64-v3) and for the x86-64 baseline, and the loader
// picks one at start-up (GCC/Clang function multi-versioning). The engine stays a portable binary
// (Big Red II's Interlagos Opterons have no AVX2) while its hot own loops get 8-wide vectors where
// the CPU has them, and on AVX-512 also its 32 vector registers: the 6x6 Winograd tiles and the
// pooling windows then spill less (cifar10_quick's step took 10-15% less CPU than with the v3
// clone alone). GCC contracts a * b + c into an FMA where the target has one, so the baseline
// clone can round differently in the last bits from the others (and, in principle, v4 from v3):
// a run is repeatable on one machine, not bit-identical across CPU generations.
// Only for functions whose arguments are pointers and scalars: a vector type passed by value
// would change the calling convention between the clones.
//
// GCC 10, which builds the release (docs/install.md), knows no x86-64-v3/v4 levels: there the
// clones are by instruction set, AVX-512F and AVX2 (without FMA contraction: one ISA a clone).

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

// DL_CPU_NO_CLONES compiles each once, for the baseline: the sanitizer build (scripts/
// sanitize-hostile.sh) checks what dltrain does with its inputs, not its speed, in a third of the
// compile time.
#if defined(DL_CPU_NO_CLONES)
#define DL_CPU_CLONES
#elif defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))
#define DL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif defined(__x86_64__) && defined(__GNUC__)
#define DL_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DL_CPU_CLONES
#endif

// DL_SHUFFLE(a, b, I...): lanes I of the concatenation (a, b), as many lanes as indices, as
// Clang's and GCC 12's __builtin_shufflevector. GCC 10 and 11 have only __builtin_shuffle, whose
// result is as wide as its inputs: there a same-width shuffle goes through it and a narrowing or
// widening one is built lane by lane (which GCC turns back into shuffles where it can).
// DL_SHUFFLE_PORTABLE picks the GCC 10 form on any compiler (tests/engine/cpu/test_cpu_shuffle.cpp
// holds it to __builtin_shufflevector).
#if !defined(DL_SHUFFLE_PORTABLE) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))
#define DL_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
// Vectors are returned by value here, which -Wpsabi flags (at every call) as an ABI change
// between targets; an always_inline function has no call ABI, so the warning is off wherever
// this form is used (the loops themselves pass vectors by reference for that reason).
#pragma GCC diagnostic ignored "-Wpsabi"
namespace dl::cpu::shuffle_detail {
template <class V>
using Lane = std::remove_cv_t<std::remove_reference_t<decltype(std::declval<V>()[0])>>;
// Spelled out per lane type and count: GCC 10 drops a vector_size that depends on a template
// parameter.
template <class T, std::size_t N> struct Vector;
#define DL_SHUFFLE_VECTOR(T, N)                                                                    \
    template <> struct Vector<T, N> { using Type = T __attribute__((vector_size(N * sizeof(T)))); };
DL_SHUFFLE_VECTOR(float, 4)
DL_SHUFFLE_VECTOR(float, 8)
DL_SHUFFLE_VECTOR(float, 16)
DL_SHUFFLE_VECTOR(std::int32_t, 4)
DL_SHUFFLE_VECTOR(std::int32_t, 8)
DL_SHUFFLE_VECTOR(std::int32_t, 16)
#undef DL_SHUFFLE_VECTOR

template <std::size_t... I, class V>
[[gnu::always_inline]] inline auto shuffle(const V& a, const V& b) {
    using T = Lane<V>;
    constexpr std::size_t n = sizeof(V) / sizeof(T);
    if constexpr (sizeof...(I) == n) {
        using Mask = typename Vector<std::int32_t, n>::Type;
        static_assert(sizeof(T) == sizeof(std::int32_t), "lanes of 32 bits");
        return __builtin_shuffle(a, b, Mask{static_cast<std::int32_t>(I)...});
    } else {
        using Result = typename Vector<T, sizeof...(I)>::Type;
        return Result{(I < n ? a[I % n] : b[I % n])...};
    }
}
} // namespace dl::cpu::shuffle_detail
#define DL_SHUFFLE(a, b, ...) ::dl::cpu::shuffle_detail::shuffle<__VA_ARGS__>(a, b)
#endif
