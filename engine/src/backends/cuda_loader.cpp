// dlopen of the CUDA plugin. RTLD_NOW so a missing symbol or library is reported here, with the
// dynamic loader's own message, instead of killing a training run at its first GPU call.

#include "backends/cuda_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <system_error>

namespace dl::cuda_loader {
namespace {

std::filesystem::path executable_dir() {
    std::error_code error;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
    return error ? std::filesystem::path() : exe.parent_path();
}

struct Loaded {
    const cuda::PluginApi* api = nullptr;
    std::string why;
};

Loaded load_once() {
    Loaded loaded;
    const auto path = plugin_path();
    if (path.empty()) {
        loaded.why = "dltrain was built without CUDA (no libdltrain-cuda.so next to it; "
                     "configure with -DDLJOB_CUDA=ON)";
        return loaded;
    }
    // The handle is kept for the life of the process: backends made by the plugin live in it.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* error = ::dlerror();
        loaded.why = std::string("the CUDA backend did not load: ") +
                     (error != nullptr ? error : path.string()) +
                     " (load the site's cuda and cudnn modules, or set LD_LIBRARY_PATH)";
        return loaded;
    }
    auto entry = reinterpret_cast<cuda::PluginEntry>( // NOLINT(*-reinterpret-cast): dlsym
        ::dlsym(handle, cuda::plugin_entry_name));
    if (entry == nullptr) {
        loaded.why =
            path.string() + " is not a dltrain CUDA plugin (no " + cuda::plugin_entry_name + ")";
        return loaded;
    }
    loaded.api = entry(cuda::plugin_abi_stamp);
    if (loaded.api == nullptr) {
        loaded.why = path.string() + " was built from other sources than this dltrain (" +
                     cuda::plugin_abi_stamp + "): reinstall both together";
    }
    return loaded;
}

} // namespace

std::filesystem::path plugin_path() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread that sets the environment
    if (const char* forced = std::getenv("DLTRAIN_CUDA_PLUGIN"); forced != nullptr && *forced) {
        return forced;
    }
    const auto dir = executable_dir();
    if (dir.empty()) {
        return {};
    }
    for (const auto& candidate : {dir / cuda::plugin_file_name,
                                  dir.parent_path() / "lib" / "dljob" / cuda::plugin_file_name}) {
        std::error_code error;
        if (std::filesystem::is_regular_file(candidate, error)) {
            return candidate;
        }
    }
    return {};
}

const cuda::PluginApi* load(std::string& why) {
    static std::once_flag once;
    static Loaded loaded;
    std::call_once(once, [] { loaded = load_once(); });
    why = loaded.why;
    return loaded.api;
}

bool gpu_driver_present() {
    // WSL 2 reaches the Windows host's driver through /dev/dxg and has no /dev/nvidia* files.
    return ::access("/dev/nvidiactl", F_OK) == 0 || ::access("/dev/dxg", F_OK) == 0;
}

} // namespace dl::cuda_loader
