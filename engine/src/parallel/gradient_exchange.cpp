#include "parallel/gradient_exchange.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace dl {

std::vector<GradientBucket> plan_buckets(const std::vector<Param>& params, std::size_t cap_floats) {
    std::vector<GradientBucket> buckets(1);
    std::size_t offset = 0;
    for (std::size_t i = params.size(); i-- > 0;) {
        if (cap_floats > 0 && buckets.back().count >= cap_floats) {
            buckets.emplace_back();
            buckets.back().offset = offset;
        }
        GradientBucket& bucket = buckets.back();
        if (bucket.params.empty()) {
            bucket.ready_after = params[i].layer;
        }
        bucket.params.push_back(i);
        bucket.count += params[i].tensor->count();
        bucket.ready_after = std::min(bucket.ready_after, params[i].layer);
        offset += params[i].tensor->count();
    }
    return buckets;
}

std::size_t bucket_cap_floats() {
    // PyTorch DDP's default: a network of a few MB (LeNet's 1.7) is one bucket, summed after
    // its backward pass, which then stays in the step's recorded CUDA graph; a larger one is
    // cut, and its sums overlap its backward pass.
    constexpr double k_default_mb = 25.0;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    const char* value = std::getenv("DLTRAIN_BUCKET_MB");
    double mb = k_default_mb;
    if (value != nullptr && *value != '\0') {
        char* end = nullptr;
        mb = std::strtod(value, &end);
        if (*end != '\0' || !(mb >= 0.0) || !std::isfinite(mb)) {
            throw Error(ErrorKind::usage,
                        fmt::format("DLTRAIN_BUCKET_MB='{}': expected MiB >= 0 (0: one bucket; "
                                    "for example 1 or 0.25)",
                                    value));
        }
    }
    if (mb == 0.0) {
        return 0;
    }
    return std::max<std::size_t>(1, static_cast<std::size_t>(mb * 1024.0 * 1024.0 / 4.0));
}

GradientExchange::GradientExchange(Net& net, Communicator& comm, std::size_t cap_floats)
    : m_net(net), m_backend(net.backend()), m_comm(comm),
      m_buckets(plan_buckets(net.params(), cap_floats)) {
    m_count = m_buckets.back().offset + m_buckets.back().count;
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

void GradientExchange::begin(int iteration) {
    m_what = fmt::format("the gradient sum of iteration {}", iteration);
    m_next = 0;
}

void GradientExchange::start_bucket(std::size_t index, const float* extra) {
    const GradientBucket& bucket = m_buckets[index];
    const auto& params = m_net.params();
    float* flat = m_flat.data();
    std::size_t at = bucket.offset;
    for (const std::size_t p : bucket.params) {
        const std::size_t count = params[p].tensor->count();
        m_backend.copy(flat + at, params[p].tensor->diff(), count * sizeof(float));
        at += count;
    }
    const std::size_t count = bucket.count + (extra != nullptr ? 2 : 0);
    const std::string what = m_buckets.size() == 1 ? m_what
                                                   : fmt::format("{} (bucket {} of {})", m_what,
                                                                 index + 1, m_buckets.size());
    float* data = flat + bucket.offset;
    if (m_staged) {
        m_backend.download(m_host + bucket.offset, flat + bucket.offset,
                           bucket.count * sizeof(float));
        if (extra != nullptr) {
            std::copy(extra, extra + 2, m_host + m_count);
        }
        data = m_host + bucket.offset;
    } else if (m_backend.host_accessible()) {
        if (extra != nullptr) {
            std::copy(extra, extra + 2, flat + m_count);
        }
    } else {
        if (extra != nullptr) {
            m_backend.upload(flat + m_count, extra, 2 * sizeof(float));
        }
        if (!m_comm.orders_device_work()) {
            // A CUDA-aware MPI reads the buffer outside the backend's stream: the packing
            // copies (and a small upload, which may still be in flight) must be done first.
            m_backend.synchronize();
        }
    }
    m_comm.start_allreduce_sum(data, count, what);
}

void GradientExchange::note_progress() {
    if (m_in_flight && m_comm.progress()) {
        m_in_flight = false;
        m_seconds.total += std::chrono::duration<double>(Clock::now() - m_since).count();
    }
}

void GradientExchange::after_layer(std::size_t layer) {
    // The last bucket waits for finish(): it carries the stop request and the loss.
    const bool starts = m_next + 1 < m_buckets.size() && m_buckets[m_next].ready_after >= layer;
    if (!starts && !m_in_flight) {
        return;
    }
    if (starts && (m_staged || !m_comm.orders_device_work())) {
        // The device computing this bucket's layers is the backward pass, not the exchange.
        m_backend.synchronize();
    }
    const auto start = Clock::now();
    if (starts && !m_in_flight) {
        // From here to the call that sees the sums done, packing included.
        m_in_flight = true;
        m_since = start;
    }
    while (m_next + 1 < m_buckets.size() && m_buckets[m_next].ready_after >= layer) {
        start_bucket(m_next, nullptr);
        ++m_next;
    }
    note_progress();
    m_seconds.waiting += std::chrono::duration<double>(Clock::now() - start).count();
}

GradientExchange::Outcome GradientExchange::finish(bool stop_here) {
    // A device still computing the backward pass is not time spent exchanging; the loss is
    // then ready to read.
    m_backend.synchronize();
    const float extra[2] = {stop_here ? 1.0F : 0.0F,
                            m_net.read_loss() / static_cast<float>(m_comm.size())};
    const auto start = Clock::now();
    if (!m_in_flight) {
        m_in_flight = true;
        m_since = start;
    }
    for (; m_next < m_buckets.size(); ++m_next) {
        start_bucket(m_next, m_next + 1 == m_buckets.size() ? extra : nullptr);
    }
    m_comm.wait_all();
    float* flat = m_flat.data();
    float sums[2] = {0.0F, 0.0F};
    if (m_staged) {
        std::copy(m_host + m_count, m_host + m_count + 2, sums);
        m_backend.upload(flat, m_host, m_count * sizeof(float));
    } else if (m_backend.host_accessible()) {
        std::copy(flat + m_count, flat + m_count + 2, sums);
    } else {
        m_backend.download(sums, flat + m_count, sizeof(sums));
    }
    // Sum, then 1/N: the update is one process's on the global batch, the learning rate the
    // config's (the loss layers already divide by the per-rank batch).
    const float scale = 1.0F / static_cast<float>(m_comm.size());
    const auto& params = m_net.params();
    for (const GradientBucket& bucket : m_buckets) {
        std::size_t at = bucket.offset;
        for (const std::size_t p : bucket.params) {
            const std::size_t count = params[p].tensor->count();
            m_backend.masked_scale(count, flat + at, nullptr, scale, params[p].tensor->diff());
            at += count;
        }
    }
    m_backend.synchronize();
    const auto end = Clock::now();
    m_seconds.waiting += std::chrono::duration<double>(end - start).count();
    m_seconds.total += std::chrono::duration<double>(end - m_since).count();
    m_in_flight = false;
    return {sums[0] > 0.0F, sums[1]};
}

GradientExchange::Seconds GradientExchange::take_seconds() {
    const Seconds seconds = m_seconds;
    m_seconds = {};
    return seconds;
}

} // namespace dl
