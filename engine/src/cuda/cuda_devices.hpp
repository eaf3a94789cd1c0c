#pragma once
// Bridge from the engine core to the CUDA backend: plain C++ only, so core files that include
// it never see a CUDA header.

#include <dl/device.hpp>

namespace dl::cuda {

/// Lists the visible GPUs (CUDA_VISIBLE_DEVICES applies) and the driver, runtime and cuDNN
/// versions. A missing driver or GPU is reported in report.cuda_status, not thrown.
void fill_gpu_report(DeviceReport& report);

} // namespace dl::cuda
