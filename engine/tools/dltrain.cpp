// dltrain: the bundled training engine's command line. Parses flags, calls the engine, and maps
// errors to exit codes in one place (docs/engine.md lists them).

#include <dl/device.hpp>

#include <CLI/CLI.hpp>
#include <dljob_build_info.hpp>
#include <fmt/format.h>

#include <exception>
#include <iostream>

namespace {

int device_query() {
    const dl::DeviceReport report = dl::query_devices();
    fmt::print("CPU: {} ({} hardware threads)\n", report.cpu_model, report.cpu_threads);
    if (report.cuda_built) {
        fmt::print("CUDA driver {}.{}, runtime {}.{}, cuDNN {}\n",
                   report.cuda_driver_version / 1000, report.cuda_driver_version % 1000 / 10,
                   report.cuda_runtime_version / 1000, report.cuda_runtime_version % 1000 / 10,
                   report.cudnn_version);
    }
    for (const auto& gpu : report.gpus) {
        fmt::print("GPU {}: {}, {:.1f} GiB, compute capability {}.{}, {} multiprocessors\n",
                   gpu.index, gpu.name, static_cast<double>(gpu.memory_bytes) / (1ULL << 30),
                   gpu.compute_major, gpu.compute_minor, gpu.multiprocessors);
    }
    if (report.gpus.empty()) {
        fmt::print("GPUs: none ({})\n", report.cuda_status);
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"dltrain: trains Caffe-style networks on CPU and CUDA GPUs", "dltrain"};
    app.set_version_flag("--version", fmt::format("dltrain {} (git {})", dljob::build_info::version,
                                                  dljob::build_info::git_revision));
    app.require_subcommand(1);
    int exit_code = 0;
    app.add_subcommand("device-query", "List the CPU and GPUs this machine offers")->callback([&] {
        exit_code = device_query();
    });
    try {
        app.parse(argc, argv);
        return exit_code;
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    } catch (const std::exception& e) {
        std::cerr << "dltrain: error: " << e.what() << '\n';
        return 1;
    }
}
