#pragma once
// The gradient sum of one data-parallel step (docs/data-parallel.md): every parameter's diff is
// packed into a flat buffer (Caffe's single consecutive array: a few collectives per step, not
// one per parameter), summed across ranks, divided by N, and unpacked, so that the solver
// applies what one process would on the global batch. One extra float at the end of the buffer
// carries each rank's stop request (a signal, the deadline) with the sum at no extra latency:
// every rank learns of a stop on any rank at the same iteration. A second extra float carries
// each rank's loss divided by N: the sum is the loss of the global batch, the number one rank of
// the global batch would report (and a NaN on any rank is a NaN on every rank, so all stop
// together).
//
// Buckets, as PyTorch's DistributedDataParallel has them: the buffer is cut into buckets of
// parameters in backward order (the last layer's first), and a bucket's sum starts as soon as
// the backward pass has finished its layers, while the layers below still compute. Buckets
// follow from the layer order and the size cap alone, never from timing, so every rank starts
// the same sums in the same order, and the ordered sum gives the same bits whatever the cut.

#include <dl/backend.hpp>
#include <dl/communicator.hpp>
#include <dl/net.hpp>
#include <dl/tensor.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace dl {

/// One bucket: its parameters (indices into Net::params()) in backward order, and its range of
/// the flat buffer.
struct GradientBucket {
    std::vector<std::size_t> params;
    std::size_t offset = 0; // floats from the buffer's start
    std::size_t count = 0;  // floats of gradient (the last bucket also carries the two extras)
    /// The layer whose backward completes the bucket: the first, in layer order, of its
    /// parameters' layers.
    std::size_t ready_after = 0;
};

/// Parameters from the last layer's to the first's (within a layer, the last first), a bucket
/// closed once it holds `cap_floats` or more (a parameter is never split, so a large one is a
/// bucket of its own). `cap_floats` 0: one bucket of everything.
std::vector<GradientBucket> plan_buckets(const std::vector<Param>& params, std::size_t cap_floats);

/// The bucket cap: DLTRAIN_BUCKET_MB (MiB of floats, decimals allowed; 0 means one bucket),
/// else 25 MiB. Throws dl::Error(usage) naming the variable for a value that is not a number
/// >= 0.
std::size_t bucket_cap_floats();

class GradientExchange {
public:
    GradientExchange(Net& net, Communicator& comm, std::size_t cap_floats);

    struct Outcome {
        bool stop = false; // some rank wished to stop after this step
        float loss = 0.0F; // the mean of the ranks' losses: the global batch's
    };
    /// Before the backward pass of `iteration`.
    void begin(int iteration);
    /// Net::backward's after_layer: starts the sum of every bucket whose layers are done, and
    /// lets the started ones advance.
    void after_layer(std::size_t layer);
    /// After the backward pass: starts the buckets left (the last carries the stop request,
    /// `stop_here`, and the loss), waits for every sum, and scales the gradients by 1/N.
    /// After a backward pass run without after_layer (a recorded step), it starts them all.
    Outcome finish(bool stop_here);

    struct Seconds {
        /// Time with a sum in flight (seen done between layers, so at most a layer late),
        /// plus packing, staging and unpacking: what the exchange costs without overlap.
        double total = 0.0;
        /// The part the step spent in the exchange instead of computing: packing and
        /// starting between layers, and the wait after the backward pass. total - waiting was
        /// hidden behind the backward pass.
        double waiting = 0.0;
    };
    /// The seconds since the last take_seconds().
    Seconds take_seconds();
    [[nodiscard]] std::size_t gradient_floats() const { return m_count; }
    [[nodiscard]] std::size_t bucket_count() const { return m_buckets.size(); }
    /// "host-staged" when the sum goes through host memory (a GPU backend with an MPI that is
    /// not CUDA-aware), "direct" when the communicator takes the backend's pointers.
    [[nodiscard]] const char* path() const { return m_staged ? "host-staged" : "direct"; }

private:
    using Clock = std::chrono::steady_clock;
    void start_bucket(std::size_t index, const float* extra);
    void note_progress();

    Net& m_net;
    Backend& m_backend;
    Communicator& m_comm;
    std::vector<GradientBucket> m_buckets;
    std::size_t m_count = 0;
    Tensor m_flat; // m_count gradients, the stop flag and the loss / N, in backend memory
    bool m_staged = false;
    std::unique_ptr<InputStage> m_pinned; // its host buffer: pinned memory on a GPU
    float* m_host = nullptr;
    std::string m_what;        // "the gradient sum of iteration 12"
    std::size_t m_next = 0;    // the next bucket to start
    bool m_in_flight = false;  // a started sum not yet seen done
    Clock::time_point m_since; // when the sums in flight began
    Seconds m_seconds;
};

} // namespace dl
