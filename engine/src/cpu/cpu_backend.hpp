#pragma once
// The CPU reference backend: readable loops plus OpenBLAS sgemm, on the engine's own thread pool.

#include <dl/backend.hpp>

#include <memory>

namespace dl::cpu {

std::unique_ptr<Backend> make_cpu_backend(int threads);

} // namespace dl::cpu
