#include <dl/device.hpp>

#include <fstream>
#include <string>
#include <thread>

#ifdef DL_ENGINE_HAVE_CUDA
#include "cuda/cuda_devices.hpp"
#endif

namespace dl {
namespace {

std::string read_cpu_model() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) {
                auto value = line.substr(colon + 1);
                value.erase(0, value.find_first_not_of(' '));
                return value;
            }
        }
    }
    return "unknown";
}

} // namespace

DeviceReport query_devices() {
    DeviceReport report;
    report.cpu_model = read_cpu_model();
    report.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
#ifdef DL_ENGINE_HAVE_CUDA
    report.cuda_built = true;
    cuda::fill_gpu_report(report);
#else
    report.cuda_status = "dltrain was built without CUDA (configure with -DDLJOB_CUDA=ON)";
#endif
    return report;
}

} // namespace dl
