// The CUDA/cuDNN backend. cuDNN does convolution (algorithms chosen once per shape, from its
// heuristics, deterministic and plain-FP32 ones only), max pooling, activations and softmax;
// cuBLAS does inner products; own kernels (cuda_kernels.cu) do the loss, accuracy, dropout,
// Caffe-only pooling shapes and the fused solver updates.
//
// Everything runs in order on one compute stream; a second stream carries batch uploads from
// pinned host memory (InputStage), joined to the compute stream by events. Nothing inside an op
// allocates or synchronizes, so a whole training step can be captured into a CUDA graph
// (record) and replayed. Workspaces only grow, and the old ones are kept until the backend
// goes, because a recorded graph may still point at them.

#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_check.cuh"
#include "cuda/cuda_kernels.cuh"
#include "cuda/layer_kernels.cuh"
#include "cuda/nccl_api.cuh"

#include <dl/error.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace dl::cuda {
namespace {

constexpr std::size_t k_cublas_workspace = 32U << 20U; // cuBLAS' advice for Hopper
constexpr std::size_t k_max_conv_workspace = 512U << 20U;
constexpr std::size_t k_small_upload = 4096;
constexpr int k_upload_slots = 16;
constexpr float k_one = 1.0F;
constexpr float k_zero = 0.0F;

// One device allocation, freed with the backend (workspaces).
struct DeviceBlock {
    DeviceBlock() = default;
    explicit DeviceBlock(std::size_t bytes) : size(bytes) {
        if (bytes > 0) {
            DL_CUDA_CHECK(cudaMalloc(&pointer, bytes));
        }
    }
    ~DeviceBlock() {
        if (pointer != nullptr) {
            cudaFree(pointer);
        }
    }
    DeviceBlock(const DeviceBlock&) = delete;
    DeviceBlock& operator=(const DeviceBlock&) = delete;
    DeviceBlock(DeviceBlock&&) = delete;
    DeviceBlock& operator=(DeviceBlock&&) = delete;
    void* pointer = nullptr;
    std::size_t size = 0;
};

cudnnTensorDescriptor_t tensor_descriptor(int n, int c, int h, int w) {
    cudnnTensorDescriptor_t desc = nullptr;
    DL_CUDA_CHECK(cudnnCreateTensorDescriptor(&desc));
    DL_CUDA_CHECK(
        cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    return desc;
}

// Of cuDNN's heuristic ranking, the first algorithm that works, is deterministic (runs repeat
// bit for bit, so a resumed GPU run matches an unbroken one), uses FP32 FMA math (no TF32: the
// results stay comparable with the CPU reference) and fits the workspace limit; a
// non-deterministic one only when no deterministic one qualifies. "Works" is asked of cuDNN
// once more through the exact workspace query, which refuses what the descriptors cannot do.
template <typename Perf, typename Workspace>
std::pair<decltype(Perf{}.algo), std::size_t>
pick_algorithm(const Perf* perf, int count, Workspace workspace_of, const char* what) {
    for (const bool deterministic_only : {true, false}) {
        for (int i = 0; i < count; ++i) {
            const Perf& p = perf[i];
            if (p.status != CUDNN_STATUS_SUCCESS || p.mathType == CUDNN_TENSOR_OP_MATH ||
                p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
                (deterministic_only && p.determinism != CUDNN_DETERMINISTIC)) {
                continue;
            }
            std::size_t bytes = 0;
            if (workspace_of(p.algo, &bytes) == CUDNN_STATUS_SUCCESS &&
                bytes <= k_max_conv_workspace) {
                return {p.algo, bytes};
            }
        }
    }
    throw Error(ErrorKind::device,
                std::string("cuDNN offers no usable FP32 algorithm for the ") + what);
}

struct ConvPlan {
    cudnnTensorDescriptor_t x = nullptr;
    cudnnTensorDescriptor_t y = nullptr;
    cudnnTensorDescriptor_t bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnConvolutionFwdAlgo_t forward{};
    cudnnConvolutionBwdDataAlgo_t backward_data{};
    cudnnConvolutionBwdFilterAlgo_t backward_filter{};
    std::size_t workspace = 0;

    ConvPlan() = default;
    ConvPlan(const ConvPlan&) = delete;
    ConvPlan& operator=(const ConvPlan&) = delete;
    ConvPlan(ConvPlan&&) = delete;
    ConvPlan& operator=(ConvPlan&&) = delete;
    ~ConvPlan() {
        cudnnDestroyTensorDescriptor(x);
        cudnnDestroyTensorDescriptor(y);
        cudnnDestroyTensorDescriptor(bias);
        cudnnDestroyFilterDescriptor(w);
        cudnnDestroyConvolutionDescriptor(conv);
    }
};

struct PoolPlan {
    bool cudnn = false; // false: Caffe's ceil-mode shape, which cuDNN does not produce
    cudnnTensorDescriptor_t x = nullptr;
    cudnnTensorDescriptor_t y = nullptr;
    cudnnPoolingDescriptor_t pool = nullptr;

    PoolPlan() = default;
    PoolPlan(const PoolPlan&) = delete;
    PoolPlan& operator=(const PoolPlan&) = delete;
    PoolPlan(PoolPlan&&) = delete;
    PoolPlan& operator=(PoolPlan&&) = delete;
    ~PoolPlan() {
        cudnnDestroyTensorDescriptor(x);
        cudnnDestroyTensorDescriptor(y);
        cudnnDestroyPoolingDescriptor(pool);
    }
};

class CudaRecording final : public Recording {
public:
    CudaRecording(cudaGraph_t graph, cudaGraphExec_t exec, cudaStream_t stream)
        : m_graph(graph), m_exec(exec), m_stream(stream) {}
    ~CudaRecording() override {
        cudaGraphExecDestroy(m_exec);
        cudaGraphDestroy(m_graph);
    }
    CudaRecording(const CudaRecording&) = delete;
    CudaRecording& operator=(const CudaRecording&) = delete;
    CudaRecording(CudaRecording&&) = delete;
    CudaRecording& operator=(CudaRecording&&) = delete;
    void replay() override { DL_CUDA_CHECK(cudaGraphLaunch(m_exec, m_stream)); }

private:
    cudaGraph_t m_graph;
    cudaGraphExec_t m_exec;
    cudaStream_t m_stream;
};

// Pinned host buffers and device staging per slot. upload() copies on the copy stream once the
// slot's previous consume() is done; consume() waits for that upload on the compute stream, then
// copies device to device into the net's inputs, so the next upload may overwrite the staging.
class CudaInputStage final : public InputStage {
public:
    CudaInputStage(const std::vector<std::size_t>& floats, int slots, cudaStream_t compute,
                   cudaStream_t copy)
        : m_floats(floats), m_compute(compute), m_copy(copy),
          m_slots(static_cast<std::size_t>(slots)) {
        for (auto& slot : m_slots) {
            for (const std::size_t count : floats) {
                void* host = nullptr;
                void* device = nullptr;
                DL_CUDA_CHECK(cudaMallocHost(&host, std::max<std::size_t>(count, 1) * 4));
                DL_CUDA_CHECK(cudaMalloc(&device, std::max<std::size_t>(count, 1) * 4));
                slot.host.push_back(static_cast<float*>(host));
                slot.device.push_back(static_cast<float*>(device));
            }
            DL_CUDA_CHECK(cudaEventCreateWithFlags(&slot.uploaded, cudaEventDisableTiming));
            DL_CUDA_CHECK(cudaEventCreateWithFlags(&slot.consumed, cudaEventDisableTiming));
        }
    }
    ~CudaInputStage() override {
        cudaStreamSynchronize(m_copy);
        cudaStreamSynchronize(m_compute);
        for (auto& slot : m_slots) {
            for (float* host : slot.host) {
                cudaFreeHost(host);
            }
            for (float* device : slot.device) {
                cudaFree(device);
            }
            cudaEventDestroy(slot.uploaded);
            cudaEventDestroy(slot.consumed);
        }
    }
    CudaInputStage(const CudaInputStage&) = delete;
    CudaInputStage& operator=(const CudaInputStage&) = delete;
    CudaInputStage(CudaInputStage&&) = delete;
    CudaInputStage& operator=(CudaInputStage&&) = delete;

    float* host(int slot, std::size_t buffer) override {
        Slot& s = m_slots.at(static_cast<std::size_t>(slot));
        // The previous upload from this pinned buffer must be finished before it is rewritten.
        DL_CUDA_CHECK(cudaEventSynchronize(s.uploaded));
        return s.host.at(buffer);
    }
    void upload(int slot) override {
        Slot& s = m_slots.at(static_cast<std::size_t>(slot));
        DL_CUDA_CHECK(cudaStreamWaitEvent(m_copy, s.consumed, 0));
        for (std::size_t i = 0; i < m_floats.size(); ++i) {
            DL_CUDA_CHECK(cudaMemcpyAsync(s.device[i], s.host[i], m_floats[i] * sizeof(float),
                                          cudaMemcpyHostToDevice, m_copy));
        }
        DL_CUDA_CHECK(cudaEventRecord(s.uploaded, m_copy));
    }
    void consume(int slot, const std::vector<float*>& dst) override {
        Slot& s = m_slots.at(static_cast<std::size_t>(slot));
        DL_CUDA_CHECK(cudaStreamWaitEvent(m_compute, s.uploaded, 0));
        for (std::size_t i = 0; i < dst.size() && i < m_floats.size(); ++i) {
            if (dst[i] != nullptr && m_floats[i] > 0) {
                DL_CUDA_CHECK(cudaMemcpyAsync(dst[i], s.device[i], m_floats[i] * sizeof(float),
                                              cudaMemcpyDeviceToDevice, m_compute));
            }
        }
        DL_CUDA_CHECK(cudaEventRecord(s.consumed, m_compute));
    }

private:
    struct Slot {
        std::vector<float*> host;
        std::vector<float*> device;
        cudaEvent_t uploaded = nullptr;
        cudaEvent_t consumed = nullptr;
    };
    std::vector<std::size_t> m_floats;
    cudaStream_t m_compute;
    cudaStream_t m_copy;
    std::vector<Slot> m_slots;
};

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int index) : m_index(index) {
        int count = 0;
        const cudaError_t status = cudaGetDeviceCount(&count);
        if (status != cudaSuccess || count == 0) {
            throw Error(ErrorKind::device,
                        std::string("--device cuda:") + std::to_string(index) +
                            ": no usable GPU (" +
                            (status != cudaSuccess ? cudaGetErrorString(status)
                                                   : "none visible; check CUDA_VISIBLE_DEVICES") +
                            ")" +
                            (status == cudaErrorInsufficientDriver
                                 ? "; the NVIDIA driver is missing or older than this CUDA "
                                   "runtime needs: load the cuda module that matches the driver "
                                   "(nvidia-smi names the CUDA version it supports)"
                                 : ""));
        }
        if (index >= count) {
            throw Error(ErrorKind::device, "--device cuda:" + std::to_string(index) + ": only " +
                                               std::to_string(count) +
                                               " GPU(s) visible (CUDA_VISIBLE_DEVICES applies)");
        }
        DL_CUDA_CHECK(cudaSetDevice(index));
        cudaDeviceProp prop{};
        DL_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
        m_gpu_name = prop.name;
        if (const cudaError_t probe = kernels::probe(); probe != cudaSuccess) {
            throw Error(ErrorKind::device,
                        "dltrain's CUDA kernels cannot run on " + m_gpu_name +
                            " (compute capability " + std::to_string(prop.major) + "." +
                            std::to_string(prop.minor) + "): " + cudaGetErrorString(probe) +
                            "; rebuild with -DDLJOB_CUDA_ARCHITECTURES including " +
                            std::to_string(prop.major * 10 + prop.minor));
        }
        DL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
        DL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_copy_stream, cudaStreamNonBlocking));
        DL_CUDA_CHECK(cudnnCreate(&m_cudnn));
        DL_CUDA_CHECK(cudnnSetStream(m_cudnn, m_stream));
        DL_CUDA_CHECK(cublasCreate(&m_cublas));
        DL_CUDA_CHECK(cublasSetStream(m_cublas, m_stream));
        // A workspace of our own: cuBLAS then never allocates, which a graph capture forbids.
        m_cublas_workspace = std::make_unique<DeviceBlock>(k_cublas_workspace);
        DL_CUDA_CHECK(
            cublasSetWorkspace(m_cublas, m_cublas_workspace->pointer, m_cublas_workspace->size));
        // Default math: FP32 stays FP32 (TF32 only when asked for with CUBLAS_TF32_TENSOR_OP_MATH).
        DL_CUDA_CHECK(cublasSetMathMode(m_cublas, CUBLAS_DEFAULT_MATH));
        for (std::size_t i = 0; i < m_activations.size(); ++i) {
            DL_CUDA_CHECK(cudnnCreateActivationDescriptor(&m_activations[i]));
            const cudnnActivationMode_t mode =
                i == 0 ? CUDNN_ACTIVATION_RELU
                       : (i == 1 ? CUDNN_ACTIVATION_SIGMOID : CUDNN_ACTIVATION_TANH);
            DL_CUDA_CHECK(
                cudnnSetActivationDescriptor(m_activations[i], mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
        }
        m_counter = std::make_unique<DeviceBlock>(sizeof(unsigned long long));
        DL_CUDA_CHECK(cudaMemsetAsync(m_counter->pointer, 0, m_counter->size, m_stream));
        for (auto& slot : m_upload_ring) {
            DL_CUDA_CHECK(cudaMallocHost(&slot.host, k_small_upload));
            DL_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
        }
    }

    ~CudaBackend() override {
        cudaStreamSynchronize(m_stream);
        cudaStreamSynchronize(m_copy_stream);
        m_conv.clear();
        m_pool.clear();
        for (auto& [size, desc] : m_flat) {
            cudnnDestroyTensorDescriptor(desc);
        }
        for (auto* desc : m_activations) {
            cudnnDestroyActivationDescriptor(desc);
        }
        for (auto& slot : m_upload_ring) {
            cudaFreeHost(slot.host);
            cudaEventDestroy(slot.done);
        }
        m_workspaces.clear();
        m_target_tables.clear();
        m_cublas_workspace.reset();
        m_counter.reset();
        cublasDestroy(m_cublas);
        cudnnDestroy(m_cudnn);
        cudaStreamDestroy(m_copy_stream);
        cudaStreamDestroy(m_stream);
    }
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;
    CudaBackend(CudaBackend&&) = delete;
    CudaBackend& operator=(CudaBackend&&) = delete;

    [[nodiscard]] std::string name() const override { return "cuda"; }
    [[nodiscard]] std::string device_name() const override {
        return "cuda:" + std::to_string(m_index) + " (" + m_gpu_name + ")";
    }
    [[nodiscard]] int threads() const override { return 1; }
    void synchronize() override { DL_CUDA_CHECK(cudaStreamSynchronize(m_stream)); }
    [[nodiscard]] cudaStream_t stream() const { return m_stream; }

    // --- Memory ---------------------------------------------------------------------------
    void* allocate(std::size_t bytes) override {
        not_recording("allocate");
        void* pointer = nullptr;
        DL_CUDA_CHECK(cudaMalloc(&pointer, std::max<std::size_t>(bytes, 1)));
        DL_CUDA_CHECK(cudaMemsetAsync(pointer, 0, bytes, m_stream));
        return pointer;
    }
    void release(void* pointer) noexcept override {
        // cudaFree waits for the device; a pending op cannot see freed memory.
        cudaFree(pointer);
    }
    void upload(void* dst, const void* src, std::size_t bytes) override {
        not_recording("upload");
        if (bytes <= k_small_upload) {
            // Per-step values (the learning rate): a pinned ring slot keeps the copy
            // asynchronous, and its event says when the slot may be reused.
            UploadSlot& slot = m_upload_ring[m_next_upload++ % m_upload_ring.size()];
            DL_CUDA_CHECK(cudaEventSynchronize(slot.done));
            std::memcpy(slot.host, src, bytes);
            DL_CUDA_CHECK(cudaMemcpyAsync(dst, slot.host, bytes, cudaMemcpyHostToDevice, m_stream));
            DL_CUDA_CHECK(cudaEventRecord(slot.done, m_stream));
            return;
        }
        DL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, m_stream));
        DL_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    }
    void download(void* dst, const void* src, std::size_t bytes) override {
        not_recording("download");
        DL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, m_stream));
        DL_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    }
    void copy(void* dst, const void* src, std::size_t bytes) override {
        DL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, m_stream));
    }
    [[nodiscard]] bool host_accessible() const override { return false; }

    std::unique_ptr<InputStage> make_input_stage(const std::vector<std::size_t>& floats,
                                                 int slots) override {
        not_recording("make_input_stage");
        return std::make_unique<CudaInputStage>(floats, slots, m_stream, m_copy_stream);
    }

    std::unique_ptr<Recording> record(const std::function<void()>& work) override {
        not_recording("record");
        DL_CUDA_CHECK(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeThreadLocal));
        m_recording = true;
        cudaGraph_t graph = nullptr;
        std::string failure;
        try {
            work();
        } catch (const std::exception& e) {
            failure = e.what();
        }
        m_recording = false;
        const cudaError_t ended = cudaStreamEndCapture(m_stream, &graph);
        cudaGraphExec_t exec = nullptr;
        cudaError_t instantiated = cudaSuccess;
        if (failure.empty() && ended == cudaSuccess) {
            instantiated = cudaGraphInstantiateWithFlags(&exec, graph, 0);
        }
        if (!failure.empty() || ended != cudaSuccess || instantiated != cudaSuccess) {
            if (graph != nullptr) {
                cudaGraphDestroy(graph);
            }
            // A failed capture leaves its error as the runtime's last error; clear it so that
            // the next launch check does not report it again.
            cudaGetLastError();
            throw Error(ErrorKind::device,
                        "recording the training step as a CUDA graph failed: " +
                            (!failure.empty() ? failure
                                              : std::string(cudaGetErrorString(
                                                    ended != cudaSuccess ? ended : instantiated))));
        }
        return std::make_unique<CudaRecording>(graph, exec, m_stream);
    }

    // --- Convolution: cuDNN -----------------------------------------------------------------
    void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                      float* y) override {
        const ConvPlan& plan = conv_plan(g);
        DL_CUDA_CHECK(cudnnConvolutionForward(m_cudnn, &k_one, plan.x, x, plan.w, w, plan.conv,
                                              plan.forward, m_workspace, m_workspace_size, &k_zero,
                                              plan.y, y));
        if (b != nullptr) {
            DL_CUDA_CHECK(cudnnAddTensor(m_cudnn, &k_one, plan.bias, b, &k_one, plan.y, y));
        }
    }

    void conv_backward_data(const ConvGeometry& g, const float* w, const float* dy,
                            float* dx) override {
        const ConvPlan& plan = conv_plan(g);
        DL_CUDA_CHECK(cudnnConvolutionBackwardData(m_cudnn, &k_one, plan.w, w, plan.y, dy,
                                                   plan.conv, plan.backward_data, m_workspace,
                                                   m_workspace_size, &k_zero, plan.x, dx));
    }

    void conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* dy,
                       float* dx, float* dw, float* db) override {
        const ConvPlan& plan = conv_plan(g);
        if (db != nullptr) {
            DL_CUDA_CHECK(
                cudnnConvolutionBackwardBias(m_cudnn, &k_one, plan.y, dy, &k_zero, plan.bias, db));
        }
        DL_CUDA_CHECK(cudnnConvolutionBackwardFilter(m_cudnn, &k_one, plan.x, x, plan.y, dy,
                                                     plan.conv, plan.backward_filter, m_workspace,
                                                     m_workspace_size, &k_zero, plan.w, dw));
        if (dx != nullptr) {
            DL_CUDA_CHECK(cudnnConvolutionBackwardData(m_cudnn, &k_one, plan.w, w, plan.y, dy,
                                                       plan.conv, plan.backward_data, m_workspace,
                                                       m_workspace_size, &k_zero, plan.x, dx));
        }
    }

    // --- Pooling: cuDNN for max pooling when its output shape is Caffe's ----------------------
    void max_pool_forward(const PoolGeometry& g, const float* x, float* y,
                          std::int32_t* argmax) override {
        const PoolPlan& plan = pool_plan(g);
        if (plan.cudnn) {
            DL_CUDA_CHECK(
                cudnnPoolingForward(m_cudnn, plan.pool, &k_one, plan.x, x, &k_zero, plan.y, y));
        } else {
            kernels::max_pool_forward(m_stream, g, x, y, argmax);
        }
    }
    void max_pool_backward(const PoolGeometry& g, const float* x, const float* y, const float* dy,
                           const std::int32_t* argmax, float* dx) override {
        const PoolPlan& plan = pool_plan(g);
        if (plan.cudnn) {
            DL_CUDA_CHECK(cudnnPoolingBackward(m_cudnn, plan.pool, &k_one, plan.y, y, plan.y, dy,
                                               plan.x, x, &k_zero, plan.x, dx));
        } else {
            kernels::max_pool_backward(m_stream, g, dy, argmax, dx);
        }
    }
    // Caffe's average divides by the window clipped to image plus padding; own kernels.
    void ave_pool_forward(const PoolGeometry& g, const float* x, float* y) override {
        kernels::ave_pool_forward(m_stream, g, x, y);
    }
    void ave_pool_backward(const PoolGeometry& g, const float* dy, float* dx) override {
        kernels::ave_pool_backward(m_stream, g, dy, dx);
    }

    // --- InnerProduct: cuBLAS. Row-major matrices are column-major transposes, so each
    // product is computed as its transpose (Caffe's trick).
    void inner_product_forward(int rows, int in, int out, const float* x, const float* w,
                               const float* b, float* y) override {
        // y^T (out x rows) = W (out x in) * x^T (in x rows)
        DL_CUDA_CHECK(cublasSgemm(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &k_one, w, in,
                                  x, in, &k_zero, y, out));
        if (b != nullptr) {
            kernels::add_bias(m_stream, rows, out, b, y);
        }
    }
    void inner_product_backward(int rows, int in, int out, const float* x, const float* w,
                                const float* dy, float* dx, float* dw, float* db) override {
        // dW^T (in x out) = x^T (in x rows) * dy (rows x out)
        DL_CUDA_CHECK(cublasSgemm(m_cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, &k_one, x, in,
                                  dy, out, &k_zero, dw, in));
        if (db != nullptr) {
            kernels::column_sums(m_stream, rows, out, dy, db);
        }
        if (dx != nullptr) {
            // dx^T (in x rows) = W^T (in x out) * dy^T (out x rows)
            DL_CUDA_CHECK(cublasSgemm(m_cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, &k_one, w,
                                      in, dy, out, &k_zero, dx, in));
        }
    }

    // --- Activations: cuDNN ---------------------------------------------------------------
    void activation_forward(Activation kind, std::size_t n, const float* x, float* y) override {
        const cudnnTensorDescriptor_t desc = flat(n);
        DL_CUDA_CHECK(
            cudnnActivationForward(m_cudnn, activation(kind), &k_one, desc, x, &k_zero, desc, y));
    }
    void activation_backward(Activation kind, std::size_t n, const float* y, const float* dy,
                             float* dx) override {
        // cuDNN wants the input too; the output stands in for it (ReLU: y > 0 iff x > 0;
        // sigmoid and tanh read only y), which in-place layers need anyway.
        const cudnnTensorDescriptor_t desc = flat(n);
        DL_CUDA_CHECK(cudnnActivationBackward(m_cudnn, activation(kind), &k_one, desc, y, desc, dy,
                                              desc, y, &k_zero, desc, dx));
    }

    // --- Dropout, loss, accuracy: own kernels ---------------------------------------------
    void dropout_mask(std::size_t n, float ratio, std::mt19937& rng, float* mask) override {
        const std::uint64_t seed = (static_cast<std::uint64_t>(rng()) << 32U) | rng();
        kernels::dropout_mask(m_stream, n, ratio, seed,
                              static_cast<unsigned long long*>(m_counter->pointer), mask);
    }
    void set_dropout_counter(std::uint64_t value) override {
        const auto counter = static_cast<unsigned long long>(value);
        upload(m_counter->pointer, &counter, sizeof(counter));
    }
    void masked_scale(std::size_t n, const float* x, const float* mask, float scale,
                      float* y) override {
        kernels::masked_scale(m_stream, n, x, mask, scale, y);
    }
    void softmax_loss_forward(int rows, int classes, const float* logits, const float* labels,
                              float* prob, float* loss) override {
        const cudnnTensorDescriptor_t desc = matrix(rows, classes);
        DL_CUDA_CHECK(cudnnSoftmaxForward(m_cudnn, CUDNN_SOFTMAX_ACCURATE,
                                          CUDNN_SOFTMAX_MODE_INSTANCE, &k_one, desc, logits,
                                          &k_zero, desc, prob));
        kernels::softmax_loss(m_stream, rows, classes, prob, labels, loss);
    }
    void softmax_loss_backward(int rows, int classes, const float* prob, const float* labels,
                               float scale, float* dlogits) override {
        kernels::softmax_loss_backward(m_stream, rows, classes, prob, labels, scale, dlogits);
    }
    void accuracy(int rows, int classes, int top_k, const float* scores, const float* labels,
                  float* accuracy) override {
        kernels::accuracy(m_stream, rows, classes, top_k, scores, labels, accuracy);
    }

    // --- Solver: fused kernels ------------------------------------------------------------
    // --- LRN, BatchNorm, Scale, Eltwise: own kernels (cuda/layer_kernels.cuh); Concat: 2-D copies
    void lrn_forward(const ChannelGeometry& g, const LrnParams& p, const float* x, float* scale,
                     float* y) override {
        kernels::lrn_forward(m_stream, g, p, x, scale, y);
    }
    void euclidean_loss_forward(int rows, std::size_t n, const float* a, const float* b,
                                float* diff, float* loss) override {
        kernels::euclidean_loss_forward(m_stream, rows, n, a, b, diff, loss);
    }
    void scaled_copy(std::size_t n, float scale, const float* x, float* y) override {
        kernels::scaled_copy(m_stream, n, scale, x, y);
    }
    void prelu_forward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                       float* y) override {
        kernels::prelu_forward(m_stream, g, shared, x, slope, y);
    }
    void prelu_backward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                        const float* dy, float* dx, float* dslope) override {
        kernels::prelu_backward(m_stream, g, shared, x, slope, dy, dx, dslope);
    }
    void hinge_loss_forward(int rows, int classes, bool l2, const float* scores,
                            const float* labels, float* diff, float* loss) override {
        kernels::hinge_loss_forward(m_stream, rows, classes, l2, scores, labels, diff, loss);
    }
    void hinge_loss_backward(int rows, int classes, bool l2, float scale, const float* labels,
                             const float* diff, float* dx) override {
        kernels::hinge_loss_backward(m_stream, rows, classes, l2, scale, labels, diff, dx);
    }
    void contrastive_loss_forward(int rows, int dim, float margin, bool legacy, const float* a,
                                  const float* b, const float* y, float* diff, float* dist_sq,
                                  float* loss) override {
        kernels::contrastive_loss_forward(m_stream, rows, dim, margin, legacy, a, b, y, diff,
                                          dist_sq, loss);
    }
    void contrastive_loss_backward(int rows, int dim, float margin, bool legacy, float scale,
                                   const float* y, const float* diff, const float* dist_sq,
                                   float* dx) override {
        kernels::contrastive_loss_backward(m_stream, rows, dim, margin, legacy, scale, y, diff,
                                           dist_sq, dx);
    }
    void sigmoid_cross_entropy_forward(int rows, std::size_t n, const float* x, const float* t,
                                       float* loss) override {
        kernels::sigmoid_cross_entropy_forward(m_stream, rows, n, x, t, loss);
    }
    void sigmoid_cross_entropy_backward(std::size_t n, float scale, const float* x, const float* t,
                                        float* dx) override {
        kernels::sigmoid_cross_entropy_backward(m_stream, n, scale, x, t, dx);
    }
    void pointwise_forward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                           float* y) override {
        kernels::pointwise_forward(m_stream, f, p, n, x, y);
    }
    void pointwise_backward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                            const float* y, const float* dy, float* dx) override {
        kernels::pointwise_backward(m_stream, f, p, n, x, y, dy, dx);
    }
    void lrn_within_forward(const PoolGeometry& g, const LrnParams& p, const float* x, float* scale,
                            float* y) override {
        kernels::lrn_within_forward(m_stream, g, p, x, scale, y);
    }
    void lrn_within_backward(const PoolGeometry& g, const LrnParams& p, const float* x,
                             const float* y, const float* scale, const float* dy,
                             float* dx) override {
        kernels::lrn_within_backward(m_stream, g, p, x, y, scale, dy, dx);
    }
    void lrn_backward(const ChannelGeometry& g, const LrnParams& p, const float* x, const float* y,
                      const float* scale, const float* dy, float* dx) override {
        kernels::lrn_backward(m_stream, g, p, x, y, scale, dy, dx);
    }
    void batch_norm_forward(const ChannelGeometry& g, bool use_global, float eps,
                            float moving_average_fraction, const float* x, float* running_mean,
                            float* running_var, float* running_factor, float* inv_std,
                            float* y) override {
        kernels::batch_norm_forward(m_stream, g, use_global, eps, moving_average_fraction, x,
                                    running_mean, running_var, running_factor, inv_std, y);
    }
    void batch_norm_backward(const ChannelGeometry& g, bool use_global, const float* y,
                             const float* inv_std, const float* dy, float* dx) override {
        kernels::batch_norm_backward(m_stream, g, use_global, y, inv_std, dy, dx);
    }
    void scale_forward(const ChannelGeometry& g, const float* x, const float* gamma,
                       const float* beta, float* y) override {
        kernels::scale_forward(m_stream, g, x, gamma, beta, y);
    }
    void scale_backward(const ChannelGeometry& g, const float* x, const float* gamma,
                        const float* dy, float* dx, float* dgamma, float* dbeta) override {
        kernels::scale_backward(m_stream, g, x, gamma, dy, dx, dgamma, dbeta);
    }
    void copy_blocks(int rows, std::size_t block, const float* src, std::size_t src_stride,
                     float* dst, std::size_t dst_stride) override {
        DL_CUDA_CHECK(cudaMemcpy2DAsync(
            dst, dst_stride * sizeof(float), src, src_stride * sizeof(float), block * sizeof(float),
            static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, m_stream));
    }
    void eltwise_forward(EltwiseOp op, std::size_t n, const std::vector<const float*>& x,
                         const std::vector<float>& coeffs, float* y, std::int32_t* mask) override {
        kernels::eltwise_forward(m_stream, op, n, x.data(), static_cast<int>(x.size()),
                                 coeffs.data(), y, mask);
    }
    void eltwise_backward(EltwiseOp op, std::size_t n, int index,
                          const std::vector<const float*>& x, float coeff, const float* dy,
                          const std::int32_t* mask, float* dx) override {
        kernels::eltwise_backward(m_stream, op, n, index, x.data(), static_cast<int>(x.size()),
                                  coeff, dy, mask, dx);
    }

    void sgd_update(std::size_t n, const float* step, float lr_mult, float momentum, float decay,
                    bool nesterov, const float* g, float* history, float* w) override {
        kernels::sgd_update(m_stream, n, step, lr_mult, momentum, decay, nesterov, g, history, w);
    }
    void adam_update(std::size_t n, const float* step, float lr_mult, float beta1, float beta2,
                     float epsilon, float decay, const float* g, float* m, float* v,
                     float* w) override {
        kernels::adam_update(m_stream, n, step, lr_mult, beta1, beta2, epsilon, decay, g, m, v, w);
    }

    void adaptive_update(AdaptiveRule rule, std::size_t n, const float* step, float lr_mult,
                         float rate, float delta, float decay, const float* g, float* h, float* h2,
                         float* w) override {
        kernels::adaptive_update(m_stream, rule, n, step, lr_mult, rate, delta, decay, g, h, h2, w);
    }

    void sgd_update_all(const std::vector<UpdateTarget>& targets, const float* step, float momentum,
                        bool nesterov) override {
        const TargetTable& table = target_table(targets);
        kernels::sgd_update_all(m_stream, table.device(), static_cast<int>(targets.size()),
                                table.largest, step, momentum, nesterov);
    }
    void adam_update_all(const std::vector<UpdateTarget>& targets, const float* step, float beta1,
                         float beta2, float epsilon) override {
        const TargetTable& table = target_table(targets);
        kernels::adam_update_all(m_stream, table.device(), static_cast<int>(targets.size()),
                                 table.largest, step, beta1, beta2, epsilon);
    }

private:
    // A solver's parameter list in device memory, uploaded the first time it is seen and kept
    // (a recorded step points at it).
    struct TargetTable {
        std::vector<UpdateTarget> host;
        std::unique_ptr<DeviceBlock> block;
        std::size_t largest = 0;
        [[nodiscard]] const UpdateTarget* device() const {
            return static_cast<const UpdateTarget*>(block->pointer);
        }
    };
    static bool same(const std::vector<UpdateTarget>& a, const std::vector<UpdateTarget>& b) {
        return a.size() == b.size() &&
               std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
                   return x.count == y.count && x.lr_mult == y.lr_mult && x.decay == y.decay &&
                          x.grad == y.grad && x.history == y.history && x.history2 == y.history2 &&
                          x.weights == y.weights;
               });
    }
    const TargetTable& target_table(const std::vector<UpdateTarget>& targets) {
        for (const auto& table : m_target_tables) {
            if (same(table->host, targets)) {
                return *table;
            }
        }
        not_recording("a new solver parameter list");
        auto table = std::make_unique<TargetTable>();
        table->host = targets;
        table->block = std::make_unique<DeviceBlock>(std::max<std::size_t>(targets.size(), 1) *
                                                     sizeof(UpdateTarget));
        for (const auto& t : targets) {
            table->largest = std::max(table->largest, t.count);
        }
        DL_CUDA_CHECK(cudaMemcpyAsync(table->block->pointer, targets.data(),
                                      targets.size() * sizeof(UpdateTarget), cudaMemcpyHostToDevice,
                                      m_stream));
        DL_CUDA_CHECK(cudaStreamSynchronize(m_stream));
        m_target_tables.push_back(std::move(table));
        return *m_target_tables.back();
    }

    void not_recording(const char* what) const {
        if (m_recording) {
            throw Error(ErrorKind::device,
                        std::string("CUDA backend: ") + what +
                            " inside a recorded step (set everything up in an unrecorded run "
                            "first)");
        }
    }

    cudnnActivationDescriptor_t activation(Activation kind) const {
        switch (kind) {
        case Activation::relu:
            return m_activations[0];
        case Activation::sigmoid:
            return m_activations[1];
        case Activation::tanh:
            return m_activations[2];
        }
        return m_activations[0];
    }

    // n values as a 1 x n x 1 x 1 tensor (elementwise ops), created once per size.
    cudnnTensorDescriptor_t flat(std::size_t n) {
        const auto key = std::make_pair(static_cast<int>(n), 0);
        auto found = m_flat.find(key);
        if (found == m_flat.end()) {
            not_recording("a new tensor shape");
            found = m_flat.emplace(key, tensor_descriptor(1, static_cast<int>(n), 1, 1)).first;
        }
        return found->second;
    }
    // rows x classes x 1 x 1 (softmax over the classes of each row).
    cudnnTensorDescriptor_t matrix(int rows, int classes) {
        const auto key = std::make_pair(rows, classes);
        auto found = m_flat.find(key);
        if (found == m_flat.end()) {
            not_recording("a new tensor shape");
            found = m_flat.emplace(key, tensor_descriptor(rows, classes, 1, 1)).first;
        }
        return found->second;
    }

    void ensure_workspace(std::size_t bytes) {
        if (bytes <= m_workspace_size) {
            return;
        }
        // The old block stays alive: a recorded graph may still use it.
        m_workspaces.push_back(std::make_unique<DeviceBlock>(bytes));
        m_workspace = m_workspaces.back()->pointer;
        m_workspace_size = bytes;
    }

    const ConvPlan& conv_plan(const ConvGeometry& g) {
        const auto key = std::make_tuple(g.batch, g.channels, g.height, g.width, g.outputs,
                                         g.kernel, g.stride, g.pad, g.group);
        const auto found = m_conv.find(key);
        if (found != m_conv.end()) {
            return *found->second;
        }
        not_recording("a new convolution shape");
        auto plan = std::make_unique<ConvPlan>();
        plan->x = tensor_descriptor(g.batch, g.channels, g.height, g.width);
        plan->y = tensor_descriptor(g.batch, g.outputs, g.out_height(), g.out_width());
        plan->bias = tensor_descriptor(1, g.outputs, 1, 1);
        DL_CUDA_CHECK(cudnnCreateFilterDescriptor(&plan->w));
        DL_CUDA_CHECK(cudnnSetFilter4dDescriptor(plan->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                 g.outputs, g.channels / g.group, g.kernel,
                                                 g.kernel));
        DL_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv));
        DL_CUDA_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, g.pad, g.pad, g.stride, g.stride,
                                                      1, 1, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT));
        DL_CUDA_CHECK(cudnnSetConvolutionGroupCount(plan->conv, g.group));
        DL_CUDA_CHECK(cudnnSetConvolutionMathType(plan->conv, CUDNN_FMA_MATH));
        std::array<int, 4> out{};
        DL_CUDA_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &out[0],
                                                            &out[1], &out[2], &out[3]));
        if (out != std::array<int, 4>{g.batch, g.outputs, g.out_height(), g.out_width()}) {
            throw Error(ErrorKind::device, "cuDNN disagrees on a convolution's output shape");
        }

        int found_count = 0;
        std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> fwd{};
        DL_CUDA_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(m_cudnn, plan->x, plan->w, plan->conv,
                                                             plan->y, static_cast<int>(fwd.size()),
                                                             &found_count, fwd.data()));
        const auto [forward, forward_bytes] = pick_algorithm(
            fwd.data(), found_count,
            [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
                return cudnnGetConvolutionForwardWorkspaceSize(m_cudnn, plan->x, plan->w,
                                                               plan->conv, plan->y, algo, bytes);
            },
            "forward convolution");
        plan->forward = forward;
        std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> bwd{};
        DL_CUDA_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            m_cudnn, plan->w, plan->y, plan->conv, plan->x, static_cast<int>(bwd.size()),
            &found_count, bwd.data()));
        const auto [data, data_bytes] = pick_algorithm(
            bwd.data(), found_count,
            [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
                return cudnnGetConvolutionBackwardDataWorkspaceSize(
                    m_cudnn, plan->w, plan->y, plan->conv, plan->x, algo, bytes);
            },
            "convolution's data gradient");
        plan->backward_data = data;
        std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>
            flt{};
        DL_CUDA_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            m_cudnn, plan->x, plan->y, plan->conv, plan->w, static_cast<int>(flt.size()),
            &found_count, flt.data()));
        const auto [filter, filter_bytes] = pick_algorithm(
            flt.data(), found_count,
            [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
                return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                    m_cudnn, plan->x, plan->y, plan->conv, plan->w, algo, bytes);
            },
            "convolution's weight gradient");
        plan->backward_filter = filter;
        const std::size_t bytes = std::max({forward_bytes, data_bytes, filter_bytes});
        plan->workspace = bytes;
        ensure_workspace(bytes);
        return *m_conv.emplace(key, std::move(plan)).first->second;
    }

    const PoolPlan& pool_plan(const PoolGeometry& g) {
        const auto key =
            std::make_tuple(g.batch, g.channels, g.height, g.width, g.kernel, g.stride, g.pad);
        const auto found = m_pool.find(key);
        if (found != m_pool.end()) {
            return *found->second;
        }
        not_recording("a new pooling shape");
        auto plan = std::make_unique<PoolPlan>();
        // cuDNN rounds the output size down where Caffe rounds up, and Caffe's own cuDNN layer
        // keeps padded pooling on its own kernels too: cuDNN only for unpadded shapes that both
        // round alike.
        const int floor_h = (g.height - g.kernel) / g.stride + 1;
        const int floor_w = (g.width - g.kernel) / g.stride + 1;
        plan->cudnn = g.pad == 0 && floor_h == g.out_height() && floor_w == g.out_width();
        if (plan->cudnn) {
            plan->x = tensor_descriptor(g.batch, g.channels, g.height, g.width);
            plan->y = tensor_descriptor(g.batch, g.channels, g.out_height(), g.out_width());
            DL_CUDA_CHECK(cudnnCreatePoolingDescriptor(&plan->pool));
            DL_CUDA_CHECK(cudnnSetPooling2dDescriptor(plan->pool, CUDNN_POOLING_MAX_DETERMINISTIC,
                                                      CUDNN_NOT_PROPAGATE_NAN, g.kernel, g.kernel,
                                                      g.pad, g.pad, g.stride, g.stride));
        }
        return *m_pool.emplace(key, std::move(plan)).first->second;
    }

    struct UploadSlot {
        void* host = nullptr;
        cudaEvent_t done = nullptr;
    };

    int m_index;
    std::string m_gpu_name;
    cudaStream_t m_stream = nullptr;
    cudaStream_t m_copy_stream = nullptr;
    cudnnHandle_t m_cudnn = nullptr;
    cublasHandle_t m_cublas = nullptr;
    bool m_recording = false;
    std::unique_ptr<DeviceBlock> m_cublas_workspace;
    std::unique_ptr<DeviceBlock> m_counter; // dropout's draw counter
    std::vector<std::unique_ptr<DeviceBlock>> m_workspaces;
    void* m_workspace = nullptr;
    std::size_t m_workspace_size = 0;
    std::array<cudnnActivationDescriptor_t, 3> m_activations{};
    std::map<std::pair<int, int>, cudnnTensorDescriptor_t> m_flat;
    std::map<std::tuple<int, int, int, int, int, int, int, int, int>, std::unique_ptr<ConvPlan>>
        m_conv;
    std::map<std::tuple<int, int, int, int, int, int, int>, std::unique_ptr<PoolPlan>> m_pool;
    std::array<UploadSlot, k_upload_slots> m_upload_ring{};
    std::vector<std::unique_ptr<TargetTable>> m_target_tables;
    std::size_t m_next_upload = 0;
};

} // namespace

std::unique_ptr<Backend> make_cuda_backend(int index) {
    return std::make_unique<CudaBackend>(index);
}

cudaStream_t compute_stream(Backend& backend) {
    auto* cuda = dynamic_cast<CudaBackend*>(&backend);
    if (cuda == nullptr) {
        throw Error(ErrorKind::usage, "NCCL needs a GPU: train with --device cuda");
    }
    return cuda->stream();
}

int visible_gpu_count() {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

} // namespace dl::cuda
