#include "cuda/cuda_devices.hpp"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace dl::cuda {

void fill_gpu_report(DeviceReport& report) {
    cudaRuntimeGetVersion(&report.cuda_runtime_version);
    cudaDriverGetVersion(&report.cuda_driver_version);
    report.cudnn_version = static_cast<int>(cudnnGetVersion());
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        report.cuda_status = std::string("no usable GPU: ") + cudaGetErrorString(status);
        return;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
            continue;
        }
        GpuInfo gpu;
        gpu.index = i;
        gpu.name = prop.name;
        gpu.memory_bytes = prop.totalGlobalMem;
        gpu.compute_major = prop.major;
        gpu.compute_minor = prop.minor;
        gpu.multiprocessors = prop.multiProcessorCount;
        report.gpus.push_back(gpu);
    }
    if (report.gpus.empty()) {
        report.cuda_status = "no GPU visible (check CUDA_VISIBLE_DEVICES)";
    }
}

} // namespace dl::cuda
