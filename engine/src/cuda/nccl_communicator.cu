// The NCCL communicator: the gradient sum on the GPU, on the backend's compute stream, with
// NCCL's unique id sent over the bootstrap communicator (MPI, or nothing for one rank). The
// library is opened at run time (nccl_api.cuh says why); DLTRAIN_NCCL_LIBRARY names the file,
// else libnccl.so.2 on the library path.
//
// NCCL has no timeout of its own: every collective is followed by a CUDA event, polled against
// the collective timeout together with ncclCommGetAsyncError; on expiry or error the
// communicator is aborted (ncclCommAbort, never ncclCommDestroy, which can block on a broken
// one) and the bootstrap ends every rank.
//
// The sums of a backward pass's buckets (start_allreduce_sum) run on a stream of their own,
// each ordered after the work the compute stream had issued when it started (an event), so
// that NCCL sums one bucket while the GPU computes the gradients of the next; wait_all polls
// an event after the last one and orders the compute stream after it.

#include "cuda/cuda_check.cuh"
#include "cuda/nccl_api.cuh"
#include "cuda/nccl_communicator.hpp"

#include <dl/error.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace dl::cuda {
namespace {

using Clock = std::chrono::steady_clock;

const nccl::Api& load_nccl() {
    static const nccl::Api api = [] {
        // NOLINTNEXTLINE(concurrency-mt-unsafe): read once, before any thread of ours
        const char* named = std::getenv("DLTRAIN_NCCL_LIBRARY");
        const std::string file = named != nullptr && *named != '\0' ? named : "libnccl.so.2";
        void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            const char* why = ::dlerror();
            throw Error(ErrorKind::device,
                        "DLTRAIN_COMM=nccl: NCCL did not load: " +
                            std::string(why != nullptr ? why : file) +
                            " (load the site's nccl module, or set DLTRAIN_NCCL_LIBRARY to "
                            "libnccl.so.2, for example PyTorch's nvidia/nccl/lib/libnccl.so.2)");
        }
        nccl::Api loaded{};
        const auto bind = [&](auto& slot, const char* name) {
            void* symbol = ::dlsym(handle, name);
            if (symbol == nullptr) {
                throw Error(ErrorKind::device,
                            file + " has no " + name + " (NCCL older than 2.4?)");
            }
            slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>( // NOLINT
                symbol);
        };
        bind(loaded.GetVersion, "ncclGetVersion");
        bind(loaded.GetUniqueId, "ncclGetUniqueId");
        bind(loaded.CommInitRank, "ncclCommInitRank");
        bind(loaded.AllReduce, "ncclAllReduce");
        bind(loaded.CommGetAsyncError, "ncclCommGetAsyncError");
        bind(loaded.CommAbort, "ncclCommAbort");
        bind(loaded.CommDestroy, "ncclCommDestroy");
        bind(loaded.GetErrorString, "ncclGetErrorString");
        return loaded;
    }();
    return api;
}

class NcclCommunicator final : public Communicator {
public:
    NcclCommunicator(Backend& backend, Communicator& bootstrap, double timeout_s)
        : m_nccl(load_nccl()), m_bootstrap(bootstrap), m_stream(compute_stream(backend)),
          m_timeout_s(timeout_s) {
        int version = 0;
        m_nccl.GetVersion(&version);
        // 2.9+: major*10000 + minor*100 + patch; before: major*1000 + minor*100 + patch.
        m_version =
            version >= 10000
                ? std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) +
                      "." + std::to_string(version % 100)
                : std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 100) +
                      "." + std::to_string(version % 100);
        refuse_shared_gpus();
        ncclUniqueId id{};
        if (bootstrap.rank() == 0) {
            check(m_nccl.GetUniqueId(&id), "ncclGetUniqueId");
        }
        bootstrap.broadcast(&id, sizeof(id), 0, "the NCCL unique id");
        // One GPU per rank: NCCL refuses (or hangs on) two ranks of one device, so two ranks
        // sharing a GPU use DLTRAIN_COMM=mpi (host staging) instead.
        check(m_nccl.CommInitRank(&m_comm, bootstrap.size(), id, bootstrap.rank()),
              "ncclCommInitRank");
        DL_CUDA_CHECK(cudaEventCreateWithFlags(&m_done, cudaEventDisableTiming));
        DL_CUDA_CHECK(cudaEventCreateWithFlags(&m_ready, cudaEventDisableTiming));
        DL_CUDA_CHECK(cudaStreamCreateWithFlags(&m_sum_stream, cudaStreamNonBlocking));
    }

    ~NcclCommunicator() override {
        if (m_comm != nullptr) {
            if (std::uncaught_exceptions() > 0) {
                m_nccl.CommAbort(m_comm);
            } else {
                m_nccl.CommDestroy(m_comm);
            }
        }
        if (m_done != nullptr) {
            cudaEventDestroy(m_done);
        }
        if (m_ready != nullptr) {
            cudaEventDestroy(m_ready);
        }
        if (m_sum_stream != nullptr) {
            cudaStreamDestroy(m_sum_stream);
        }
    }
    NcclCommunicator(const NcclCommunicator&) = delete;
    NcclCommunicator& operator=(const NcclCommunicator&) = delete;
    NcclCommunicator(NcclCommunicator&&) = delete;
    NcclCommunicator& operator=(NcclCommunicator&&) = delete;

    [[nodiscard]] std::string name() const override { return "nccl (" + m_version + ")"; }
    [[nodiscard]] int rank() const override { return m_bootstrap.rank(); }
    [[nodiscard]] int size() const override { return m_bootstrap.size(); }
    [[nodiscard]] bool accepts(const Memory& memory) const override {
        return !memory.host_accessible();
    }
    [[nodiscard]] bool orders_device_work() const override { return true; }
    void set_timeout(double seconds) override {
        m_timeout_s = seconds;
        m_bootstrap.set_timeout(seconds);
    }

    void allreduce_sum(float* data, std::size_t count, const std::string& what) override {
        check(m_nccl.AllReduce(data, data, count, ncclFloat32, ncclSum, m_comm, m_stream),
              "ncclAllReduce");
        DL_CUDA_CHECK(cudaEventRecord(m_done, m_stream));
        wait(what);
    }
    void start_allreduce_sum(float* data, std::size_t count, const std::string& what) override {
        // The bucket's gradients (and its packing) were issued on the compute stream: the sum
        // starts after them, on its own stream, while the compute stream goes on.
        DL_CUDA_CHECK(cudaEventRecord(m_ready, m_stream));
        DL_CUDA_CHECK(cudaStreamWaitEvent(m_sum_stream, m_ready, 0));
        check(m_nccl.AllReduce(data, data, count, ncclFloat32, ncclSum, m_comm, m_sum_stream),
              "ncclAllReduce");
        DL_CUDA_CHECK(cudaEventRecord(m_done, m_sum_stream));
        if (m_started.empty()) {
            m_started = what;
        }
    }
    bool progress() override { return m_started.empty() || cudaEventQuery(m_done) == cudaSuccess; }
    void wait_all() override {
        if (m_started.empty()) {
            return;
        }
        wait(m_started);
        // Done, as the host saw; the compute stream is ordered after the sums all the same.
        DL_CUDA_CHECK(cudaStreamWaitEvent(m_stream, m_done, 0));
        m_started.clear();
    }
    void allreduce_max(std::int64_t* values, std::size_t count, const std::string& what) override {
        m_bootstrap.allreduce_max(values, count, what);
    }
    void broadcast(void* data, std::size_t bytes, int root, const std::string& what) override {
        m_bootstrap.broadcast(data, bytes, root, what);
    }
    [[noreturn]] void abort(int exit_code) override {
        if (m_comm != nullptr) {
            m_nccl.CommAbort(m_comm);
            m_comm = nullptr;
        }
        m_bootstrap.abort(exit_code);
        std::_Exit(exit_code); // not reached; the compiler does not carry [[noreturn]] through
    }

private:
    // NCCL refuses two ranks on one device with an opaque "invalid usage" (or hangs, in old
    // versions): every rank publishes a hash of its host and GPU, and a duplicate is refused by
    // name before NCCL starts.
    void refuse_shared_gpus() {
        char bus[32] = {};
        int device = 0;
        DL_CUDA_CHECK(cudaGetDevice(&device));
        DL_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), device));
        char host[256] = {};
        ::gethostname(host, sizeof(host) - 1);
        const std::string where = std::string(host) + " " + bus;
        // FNV-1a, 62 bits: positive, and 0 means "not this rank's slot".
        std::uint64_t hash = 1469598103934665603ULL;
        for (const char c : where) {
            hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
        }
        const int n = m_bootstrap.size();
        std::vector<std::int64_t> ids(static_cast<std::size_t>(n), 0);
        ids[static_cast<std::size_t>(m_bootstrap.rank())] =
            static_cast<std::int64_t>((hash >> 2U) | 1U);
        m_bootstrap.allreduce_max(ids.data(), ids.size(), "the GPU of every rank");
        for (int r = 0; r < n; ++r) {
            if (r != m_bootstrap.rank() && ids[static_cast<std::size_t>(r)] ==
                                               ids[static_cast<std::size_t>(m_bootstrap.rank())]) {
                throw Error(ErrorKind::usage,
                            "DLTRAIN_COMM=nccl: ranks " + std::to_string(std::min(r, rank())) +
                                " and " + std::to_string(std::max(r, rank())) +
                                " are both on GPU " + bus + " of " + host +
                                ": NCCL needs one GPU per rank; to share a GPU, leave "
                                "DLTRAIN_COMM unset (MPI with host staging)");
            }
        }
    }

    void check(ncclResult_t result, const char* call) {
        if (result != ncclSuccess) {
            throw Error(ErrorKind::device,
                        std::string(call) + " failed: " + m_nccl.GetErrorString(result));
        }
    }

    void wait(const std::string& what) {
        const auto start = Clock::now();
        while (true) {
            const cudaError_t state = cudaEventQuery(m_done);
            if (state == cudaSuccess) {
                return;
            }
            if (state != cudaErrorNotReady) {
                fail(what + ": " + cudaGetErrorString(state));
            }
            ncclResult_t async = ncclSuccess;
            m_nccl.CommGetAsyncError(m_comm, &async);
            if (async != ncclSuccess && async != ncclInProgress) {
                fail(what + ": " + m_nccl.GetErrorString(async) + " (a rank died?)");
            }
            if (std::chrono::duration<double>(Clock::now() - start).count() > m_timeout_s) {
                fail(what + ": not done within " + std::to_string(static_cast<int>(m_timeout_s)) +
                     " s (DLTRAIN_COLLECTIVE_TIMEOUT): a rank died or hangs");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    [[noreturn]] void fail(const std::string& why) {
        std::cerr << "dltrain: error: rank " << rank() << " of " << size() << ": " << why
                  << "; ending every rank\n"
                  << std::flush;
        abort(1);
    }

    const nccl::Api& m_nccl;
    Communicator& m_bootstrap;
    cudaStream_t m_stream;
    double m_timeout_s;
    ncclComm_t m_comm = nullptr;
    cudaEvent_t m_done = nullptr;
    cudaEvent_t m_ready = nullptr;       // the compute stream, where a bucket's sum may start
    cudaStream_t m_sum_stream = nullptr; // the buckets' sums
    std::string m_started;               // the first started sum since wait_all, for messages
    std::string m_version;
};

} // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, Communicator& bootstrap,
                                                     double timeout_s) {
    return std::make_unique<NcclCommunicator>(backend, bootstrap, timeout_s);
}

} // namespace dl::cuda
