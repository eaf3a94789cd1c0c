#include "backends/cuda_loader.hpp"
#include "cpu/thread_pool.hpp"

#include <dl/device.hpp>

#include <fstream>
#include <string>

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
    report.cpu_threads = cpu::usable_cpus();
    // Unlike training, a device query loads the plugin even without a driver: its report (the
    // CUDA runtime and cuDNN versions, why no GPU is usable) is what the user asked for.
    std::string why;
    const auto* plugin = cuda_loader::load(why);
    if (plugin == nullptr) {
        report.cuda_status = why;
        return report;
    }
    report.cuda_built = true;
    plugin->fill_gpu_report(report);
    return report;
}

} // namespace dl
