#pragma once
// The CUDA backend is built as a plugin, libdltrain-cuda.so, that dltrain loads with dlopen only
// when a GPU is asked for or queried (backends/cuda_loader.cpp). Linking cuBLAS and cuDNN into
// dltrain itself cost every CPU run about 200 MB of resident memory and a quarter second of
// relocations, and stopped dltrain from starting at all on a node where the cudnn module is not
// loaded. Plain C++ only: the core includes this and never sees a CUDA header.

#include <dl/backend.hpp>
#include <dl/communicator.hpp>
#include <dl/device.hpp>

#include <memory>

namespace dl::cuda {

/// What the plugin offers the core; the bridges of cuda_backend.hpp and cuda_devices.hpp.
struct PluginApi {
    std::unique_ptr<Backend> (*make_backend)(int index);
    int (*visible_gpu_count)();
    void (*fill_gpu_report)(DeviceReport& report);
    /// DLTRAIN_COMM=nccl: NCCL over `bootstrap`'s ranks on `backend`'s stream
    /// (nccl_communicator.hpp).
    std::unique_ptr<Communicator> (*make_nccl_communicator)(Backend& backend,
                                                            Communicator& bootstrap,
                                                            double timeout_s);
};

inline constexpr const char* plugin_file_name = "libdltrain-cuda.so";
inline constexpr const char* plugin_entry_name = "dltrain_cuda_plugin";

/// The plugin shares C++ types with the engine compiled into dltrain, so both must come from the
/// same sources and compiler: the loader passes its own stamp and the plugin refuses another.
inline constexpr const char* plugin_abi_stamp = DL_ENGINE_ABI_STAMP " " __VERSION__;

/// Signature of the plugin's one exported symbol: the API, or nullptr when `engine_abi_stamp`
/// is not the plugin's own.
using PluginEntry = const PluginApi* (*)(const char* engine_abi_stamp);

} // namespace dl::cuda
