// The plugin's one exported symbol (cuda_plugin.hpp): everything else it offers is reached
// through the returned table, so the loader depends on nothing but this name.

#include "cuda/cuda_plugin.hpp"

#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_devices.hpp"
#include "cuda/nccl_communicator.hpp"

#include <cstring>

extern "C" __attribute__((visibility("default"))) const dl::cuda::PluginApi*
dltrain_cuda_plugin(const char* engine_abi_stamp) {
    static const dl::cuda::PluginApi api{
        &dl::cuda::make_cuda_backend,
        &dl::cuda::visible_gpu_count,
        &dl::cuda::fill_gpu_report,
        &dl::cuda::make_nccl_communicator,
    };
    if (engine_abi_stamp == nullptr ||
        std::strcmp(engine_abi_stamp, dl::cuda::plugin_abi_stamp) != 0) {
        return nullptr;
    }
    return &api;
}
