#pragma once
// Finds and loads the CUDA backend plugin (cuda/cuda_plugin.hpp) at most once per process.
//
// Where it looks, first match wins:
//   1. $DLTRAIN_CUDA_PLUGIN (a file; set, it is the only place looked at);
//   2. libdltrain-cuda.so next to the running executable (the build tree);
//   3. ../lib/dljob/libdltrain-cuda.so from the executable's folder (an installed prefix).

#include "cuda/cuda_plugin.hpp"

#include <filesystem>
#include <string>

namespace dl::cuda_loader {

/// The plugin file dltrain would load, or empty when there is none (no CUDA build).
std::filesystem::path plugin_path();

/// The loaded plugin's API, or nullptr with `why` saying what failed (missing file, a shared
/// library the plugin needs, such as libcudnn.so.9, not on the library path, a plugin from
/// another build). Thread-safe; loads once.
const cuda::PluginApi* load(std::string& why);

/// Whether this machine may have an NVIDIA GPU at all (/dev/nvidiactl, or WSL 2's /dev/dxg),
/// checked without loading anything, so a CPU-only node never pays for loading cuBLAS and cuDNN.
bool gpu_driver_present();

} // namespace dl::cuda_loader
