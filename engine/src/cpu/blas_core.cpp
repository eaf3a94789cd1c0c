// Which OpenBLAS kernels this process runs, and which it should. OpenBLAS picks its kernels
// from the CPU when it loads; Debian's 0.3.21 picks "Cooperlake" on Xeons that report Cooper
// Lake-like features (seen on a 2-vCPU cloud VM) and then runs its SSE3 (Prescott) sgemm
// kernel there: dltrain's LeNet step took 2.3x the CPU time it takes with the SkylakeX kernels
// that this CPU's AVX-512 runs (docs/benchmarks.md, LeNet CPU run 11).
#include <dl/blas.hpp>

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace dl {

std::string blas_core() {
    const char* name = openblas_get_corename();
    return name != nullptr ? std::string(name) : std::string();
}

std::string choose_blas_core(std::string_view picked, bool avx512, bool avx2) {
    std::string lower(picked);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    // Cores older than Haswell, whose kernels leave AVX2/AVX-512 unused, and Cooperlake (above).
    static constexpr std::array<std::string_view, 14> weak = {
        "cooperlake", "prescott",    "core2",     "penryn", "dunnington",
        "nehalem",    "sandybridge", "atom",      "katmai", "coppermine",
        "northwood",  "banias",      "barcelona", "bobcat"};
    if (std::find(weak.begin(), weak.end(), lower) == weak.end()) {
        return {};
    }
    if (avx512 && lower != "skylakex") {
        return "SkylakeX";
    }
    if (avx2) {
        return "Haswell";
    }
    return {};
}

std::string better_blas_core() {
    return better_blas_core(blas_core());
}

std::string better_blas_core(std::string_view picked) {
    __builtin_cpu_init();
    const bool avx512 =
        __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
        __builtin_cpu_supports("avx512dq") != 0 && __builtin_cpu_supports("avx512vl") != 0;
    const bool avx2 = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
    return choose_blas_core(picked, avx512, avx2);
}

} // namespace dl
