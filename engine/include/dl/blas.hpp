#pragma once
// The CPU backend's BLAS (OpenBLAS): which kernel set runs, and a better one where OpenBLAS's
// own pick leaves the CPU's vector units unused (engine/src/cpu/blas_core.cpp says when).

#include <string>
#include <string_view>

namespace dl {

/// OpenBLAS's kernel set in this process ("SkylakeX", "Haswell", "Zen", ...).
std::string blas_core();

/// The OPENBLAS_CORETYPE to ask for instead of `picked` on a CPU with these features, or ""
/// when `picked` stands. Pure, for tests.
std::string choose_blas_core(std::string_view picked, bool avx512, bool avx2);

/// choose_blas_core for this process's pick and this CPU.
std::string better_blas_core();
/// choose_blas_core for `picked` and this CPU.
std::string better_blas_core(std::string_view picked);

} // namespace dl
