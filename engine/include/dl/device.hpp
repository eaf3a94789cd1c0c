#pragma once
// What this machine offers for training: CPU cores and, when built with CUDA, the GPUs.
// No CUDA type appears here (the CUDA backend fills these plain structs).

#include <cstdint>
#include <string>
#include <vector>

namespace dl {

struct GpuInfo {
    int index = 0;
    std::string name;
    std::uint64_t memory_bytes = 0;
    int compute_major = 0;
    int compute_minor = 0;
    int multiprocessors = 0;
};

struct DeviceReport {
    std::string cpu_model;
    int cpu_threads = 0;
    bool cuda_built = false;     // the engine was compiled with its CUDA backend
    std::string cuda_status;     // why no GPU is listed, when none is
    int cuda_driver_version = 0; // e.g. 13000 for 13.0
    int cuda_runtime_version = 0;
    int cudnn_version = 0;
    std::vector<GpuInfo> gpus;
};

/// Inspects the machine. Never throws for a missing GPU or driver: that goes in cuda_status.
DeviceReport query_devices();

} // namespace dl
