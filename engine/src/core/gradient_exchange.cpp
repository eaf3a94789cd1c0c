#include "core/gradient_exchange.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace dl {

GradientExchange::GradientExchange(Net& net, Communicator& comm)
    : m_net(net), m_backend(net.backend()), m_comm(comm) {
    for (const auto& param : net.params()) {
        const std::size_t count = param.tensor->count();
        m_slices.push_back({param.tensor->diff(), m_count, count});
        m_count += count;
    }
    m_flat = Tensor({static_cast<int>(m_count + 2)}, &m_backend);
    m_flat.drop_gradient();
    m_staged = !comm.accepts(m_backend);
    if (m_staged) {
        // A one-slot input stage is the backend's way to hand out pinned host memory, which
        // the copies to and from a GPU need to run at full speed.
        m_pinned = m_backend.make_input_stage({m_count + 2}, 1);
        m_host = m_pinned->host(0, 0);
    }
}

GradientExchange::Outcome GradientExchange::run(bool stop_here, int iteration) {
    // A device still computing the backward pass is not time spent exchanging; the loss is
    // then ready to read.
    m_backend.synchronize();
    const float extra[2] = {stop_here ? 1.0F : 0.0F,
                            m_net.read_loss() / static_cast<float>(m_comm.size())};
    const auto start = std::chrono::steady_clock::now();
    float* flat = m_flat.data();
    for (const Slice& slice : m_slices) {
        m_backend.copy(flat + slice.offset, slice.diff, slice.count * sizeof(float));
    }
    const std::string what = fmt::format("the gradient sum of iteration {}", iteration);
    float sums[2] = {0.0F, 0.0F};
    if (m_staged) {
        m_backend.download(m_host, flat, m_count * sizeof(float));
        std::copy(extra, extra + 2, m_host + m_count);
        m_comm.allreduce_sum(m_host, m_count + 2, what);
        std::copy(m_host + m_count, m_host + m_count + 2, sums);
        m_backend.upload(flat, m_host, m_count * sizeof(float));
    } else if (m_backend.host_accessible()) {
        std::copy(extra, extra + 2, flat + m_count);
        m_comm.allreduce_sum(flat, m_count + 2, what);
        std::copy(flat + m_count, flat + m_count + 2, sums);
    } else {
        m_backend.upload(flat + m_count, extra, sizeof(extra));
        // A CUDA-aware MPI reads the buffer outside the backend's stream: the packing copies
        // (and a small upload, which may still be in flight) must be done first.
        m_backend.synchronize();
        m_comm.allreduce_sum(flat, m_count + 2, what);
        m_backend.download(sums, flat + m_count, sizeof(sums));
    }
    // Sum, then 1/N: the update is one process's on the global batch, the learning rate the
    // config's (the loss layers already divide by the per-rank batch).
    const float scale = 1.0F / static_cast<float>(m_comm.size());
    for (const Slice& slice : m_slices) {
        m_backend.masked_scale(slice.count, flat + slice.offset, nullptr, scale, slice.diff);
    }
    m_backend.synchronize();
    m_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return {sums[0] > 0.0F, sums[1]};
}

double GradientExchange::take_seconds() {
    const double seconds = m_seconds;
    m_seconds = 0.0;
    return seconds;
}

} // namespace dl
