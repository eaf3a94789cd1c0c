// The explicit table of backends (no static self-registration: it vanishes in static builds),
// host memory, and the generic input stage every backend can fall back on.

#include "backends/cuda_loader.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/thread_pool.hpp"

#include <dl/backend.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>

namespace dl {
namespace {

class HostMemory final : public Memory {
public:
    // Zeroed and 64-byte aligned (a cache line, and what wide SIMD loads like). calloc, not
    // aligned_alloc and memset: a large block comes from the kernel as zero pages that are not
    // touched until used, so a buffer nothing writes (a `dltrain check`'s gradients, a model's
    // hundreds of MB) costs no page faults. The block calloc gave is kept just before the
    // aligned address.
    void* allocate(std::size_t bytes) override {
        constexpr std::size_t k_align = 64;
        const std::size_t rounded = (bytes + k_align - 1) / k_align * k_align;
        void* block = std::calloc(1, rounded + k_align);
        if (block == nullptr) {
            throw std::bad_alloc();
        }
        // calloc aligns to 16 at least, so the aligned address is 16 to 64 bytes in: room for
        // the block's address before it.
        const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(block) + k_align;
        auto* aligned = reinterpret_cast<void**>(start - start % k_align);
        aligned[-1] = block;
        return static_cast<void*>(aligned);
    }
    void release(void* pointer) noexcept override {
        if (pointer != nullptr) {
            std::free(static_cast<void**>(pointer)[-1]);
        }
    }
    void upload(void* dst, const void* src, std::size_t bytes) override {
        std::memcpy(dst, src, bytes);
    }
    void download(void* dst, const void* src, std::size_t bytes) override {
        std::memcpy(dst, src, bytes);
    }
    void copy(void* dst, const void* src, std::size_t bytes) override {
        std::memmove(dst, src, bytes);
    }
    [[nodiscard]] bool host_accessible() const override { return true; }
};

// Plain host buffers; consume() is a synchronous upload into the backend's memory.
class GenericInputStage final : public InputStage {
public:
    GenericInputStage(Memory& memory, const std::vector<std::size_t>& floats, int slots)
        : m_memory(memory), m_slots(static_cast<std::size_t>(slots)) {
        for (auto& slot : m_slots) {
            for (const std::size_t count : floats) {
                slot.emplace_back(count, 0.0F);
            }
        }
    }
    float* host(int slot, std::size_t buffer) override {
        return m_slots.at(static_cast<std::size_t>(slot)).at(buffer).data();
    }
    void upload(int /*slot*/) override {}
    void consume(int slot, const std::vector<float*>& dst) override {
        const auto& buffers = m_slots.at(static_cast<std::size_t>(slot));
        for (std::size_t i = 0; i < dst.size() && i < buffers.size(); ++i) {
            if (dst[i] != nullptr) {
                m_memory.upload(dst[i], buffers[i].data(), buffers[i].size() * sizeof(float));
            }
        }
    }

private:
    Memory& m_memory;
    std::vector<std::vector<std::vector<float>>> m_slots;
};

// ", CUDA_VISIBLE_DEVICES=0" where set: it names GPUs, but only the driver makes them usable.
std::string visible_devices_note() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread that sets the environment
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return visible == nullptr ? std::string() : fmt::format(", CUDA_VISIBLE_DEVICES={}", visible);
}

} // namespace

Memory& host_memory() {
    static HostMemory memory;
    return memory;
}

std::unique_ptr<InputStage> Backend::make_input_stage(const std::vector<std::size_t>& floats,
                                                      int slots) {
    return std::make_unique<GenericInputStage>(*this, floats, slots);
}

std::unique_ptr<Recording> Backend::record(const std::function<void()>& /*work*/) {
    return nullptr;
}

void Backend::sgd_update_all(const std::vector<UpdateTarget>& targets, const float* step,
                             float momentum, bool nesterov) {
    for (const UpdateTarget& t : targets) {
        sgd_update(t.count, step, t.lr_mult, momentum, t.decay, nesterov, t.grad, t.history,
                   t.weights);
    }
}

void Backend::adam_update_all(const std::vector<UpdateTarget>& targets, const float* step,
                              float beta1, float beta2, float epsilon) {
    for (const UpdateTarget& t : targets) {
        adam_update(t.count, step, t.lr_mult, beta1, beta2, epsilon, t.decay, t.grad, t.history,
                    t.history2, t.weights);
    }
}

void Backend::adaptive_update_all(AdaptiveRule rule, const std::vector<UpdateTarget>& targets,
                                  const float* step, float rate, float delta) {
    for (const UpdateTarget& t : targets) {
        adaptive_update(rule, t.count, step, t.lr_mult, rate, delta, t.decay, t.grad, t.history,
                        t.history2, t.weights);
    }
}

std::vector<std::string> backend_names() {
    if (cuda_loader::plugin_path().empty()) {
        return {"cpu"};
    }
    return {"cpu", "cuda"};
}

std::string default_device() {
    // A node without the NVIDIA driver never loads the plugin (and cuBLAS, cuDNN) just to learn
    // that it has no GPU.
    if (!cuda_loader::gpu_driver_present() || cuda_loader::plugin_path().empty()) {
        return "cpu";
    }
    std::string why;
    const auto* plugin = cuda_loader::load(why);
    if (plugin == nullptr) {
        // A GPU node where the cudnn module was forgotten: say so rather than quietly train on
        // the CPU at a hundredth of the speed.
        std::cerr << "dltrain: warning: this node has an NVIDIA driver but " << why
                  << "; training on the CPU\n";
        return "cpu";
    }
    return plugin->visible_gpu_count() > 0 ? "cuda:0" : "cpu";
}

namespace {

// No --threads: OMP_NUM_THREADS where it is set, as PyTorch takes it (and Spark sets it to an
// executor's cores, where the node's CPUs are shared by several executors that affinity does
// not separate), else every CPU this process may use.
int threads_from_environment(int usable) {
    const char* text = std::getenv("OMP_NUM_THREADS"); // NOLINT(concurrency-mt-unsafe)
    if (text == nullptr || *text == '\0') {
        return usable;
    }
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 1) {
        std::cerr << fmt::format("dltrain: warning: OMP_NUM_THREADS='{}' is not a positive "
                                 "number; using the {} CPUs this process may use\n",
                                 text, usable);
        return usable;
    }
    return static_cast<int>(std::min<long>(value, usable));
}

} // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
    const int usable = cpu::usable_cpus();
    if (threads <= 0) {
        threads = threads_from_environment(usable);
    } else if (threads > usable) {
        // Each thread holds its own workspace: --threads 3000 took 7.4 GB on a 2-CPU node. More
        // threads than CPUs never trains faster, and a job script's count may come from a
        // request the node's cgroup then narrowed, so this uses what there is and says so.
        std::cerr << fmt::format("dltrain: warning: --threads {} is more than the {} CPUs this "
                                 "process may use; using {}\n",
                                 threads, usable, usable);
        threads = usable;
    }
    if (device == "cpu") {
        return cpu::make_cpu_backend(threads);
    }
    if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
        int index = 0;
        if (device != "cuda") {
            const std::string digits = device.substr(5);
            char* end = nullptr;
            const long value = std::strtol(digits.c_str(), &end, 10);
            if (digits.empty() || *end != '\0' || value < 0 || value > 1024) {
                throw Error(ErrorKind::usage,
                            fmt::format("device '{}': expected cpu, cuda or cuda:N", device));
            }
            index = static_cast<int>(value);
        }
        // A GPU was asked for: whatever is missing, this refuses and never trains on the CPU
        // (a job that asked for GPUs would hold them idle for its whole walltime).
        std::string why;
        const auto* plugin = cuda_loader::load(why);
        if (plugin == nullptr) {
            throw Error(ErrorKind::device,
                        fmt::format("device '{}': {}{}", device, why,
                                    cuda_loader::gpu_driver_present()
                                        ? ""
                                        : "; and this machine has no NVIDIA driver either (no "
                                          "/dev/nvidiactl)"));
        }
        try {
            return plugin->make_backend(index);
        } catch (const Error& error) {
            // Without the driver the CUDA runtime says only "driver version is insufficient" or
            // "no CUDA-capable device": name the missing driver, the usual cause being a job
            // that landed on (or a shell opened on) a node without GPUs. Tried first rather
            // than refused from /dev alone: where no udev rule made the device files,
            // nvidia-modprobe creates them at the first CUDA call.
            if (error.kind() != ErrorKind::device || cuda_loader::gpu_driver_present()) {
                throw;
            }
            throw Error(ErrorKind::device,
                        fmt::format("device '{}': this machine has no NVIDIA driver (no "
                                    "/dev/nvidiactl{}), so it has no GPU to train on: run it on a "
                                    "GPU node (a job that asks for GPUs), or train with --device "
                                    "cpu ({})",
                                    device, visible_devices_note(), error.what()));
        }
    }
    throw Error(ErrorKind::usage,
                fmt::format("unknown device '{}' (valid: cpu, cuda, cuda:N)", device));
}

} // namespace dl
