#pragma once
// The gradient sum of one data-parallel step (docs/data-parallel.md): every parameter's diff is
// packed into one flat buffer (Caffe's single consecutive array: one collective per step, not one
// per parameter), summed across ranks, divided by N, and unpacked, so that the solver applies
// what one process would on the global batch. One extra float at the end of the buffer carries
// each rank's stop request (a signal, the deadline) with the sum at no extra latency: every rank
// learns of a stop on any rank at the same iteration. A second extra float carries each rank's
// loss divided by N: the sum is the loss of the global batch, the number one rank of the global
// batch would report (and a NaN on any rank is a NaN on every rank, so all stop together).

#include <dl/backend.hpp>
#include <dl/communicator.hpp>
#include <dl/net.hpp>
#include <dl/tensor.hpp>

#include <memory>
#include <string>
#include <vector>

namespace dl {

class GradientExchange {
public:
    GradientExchange(Net& net, Communicator& comm);

    struct Outcome {
        bool stop = false; // some rank wished to stop after this step
        float loss = 0.0F; // the mean of the ranks' losses: the global batch's
    };
    /// Sums and scales the gradients of `iteration`; `stop_here` is this rank's wish to stop
    /// after it.
    Outcome run(bool stop_here, int iteration);
    /// Seconds spent in run() since the last take_seconds() (staging copies included).
    double take_seconds();
    [[nodiscard]] std::size_t gradient_floats() const { return m_count; }
    /// "host" when the sum goes through host memory (a GPU backend with an MPI that is not
    /// CUDA-aware), "device" when the communicator takes the backend's pointers.
    [[nodiscard]] const char* path() const { return m_staged ? "host-staged" : "direct"; }

private:
    struct Slice {
        float* diff;
        std::size_t offset;
        std::size_t count;
    };
    Net& m_net;
    Backend& m_backend;
    Communicator& m_comm;
    std::vector<Slice> m_slices;
    std::size_t m_count = 0;
    Tensor m_flat; // m_count gradients, the stop flag and the loss / N, in backend memory
    bool m_staged = false;
    std::unique_ptr<InputStage> m_pinned; // its host buffer: pinned memory on a GPU
    float* m_host = nullptr;
    double m_seconds = 0.0;
};

} // namespace dl
