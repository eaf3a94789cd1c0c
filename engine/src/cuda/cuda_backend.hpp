#pragma once
// Bridge from the engine core to the CUDA backend: plain C++ only, so core files that include
// it never see a CUDA header.

#include <dl/backend.hpp>

#include <memory>

namespace dl::cuda {

/// The CUDA/cuDNN backend on the index-th visible GPU; throws dl::Error(device) naming the
/// reason when there is no such GPU or the driver is missing.
std::unique_ptr<Backend> make_cuda_backend(int index);

/// GPUs the CUDA runtime sees (CUDA_VISIBLE_DEVICES applies); 0 without a driver.
int visible_gpu_count();

} // namespace dl::cuda
