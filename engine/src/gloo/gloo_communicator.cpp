// The Gloo communicator (gloo_plugin.hpp): ranks that met through the rendezvous (rendezvous.hpp)
// send each other messages over Gloo's TCP pairs.
//
// The sum is dltrain's own, as in the MPI plugin: a reduce-scatter (rank c receives every rank's
// copy of chunk c and adds them in rank order), then an allgather of the summed chunks. Element i
// is ((x0 + x1) + x2) + ... whatever N, so two runs with the same N give the same bits, and every
// message has one known peer. Each message is a Gloo unbound buffer of its own, waited for on its
// own with what is left of the collective timeout, so a wait that fails (the peer's connections
// closed: it died, or ended on an error) or runs out names that peer.
//
// Gloo moves messages on a thread of its own (an epoll loop): a started sum's reduce-scatter goes
// on during the backward pass with no one testing it. The add in rank order and the allgather
// come in wait_all. Gloo has no test that does not wait (a wait that runs out closes every pair),
// so progress() only says whether sums are still to be waited for.

#include "gloo/gloo_plugin.hpp"
#include "gloo/rendezvous.hpp"

#include <dl/communicator.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <string>
#include <vector>

namespace dl::gloo_comm {
namespace {

using Buffer = std::unique_ptr<::gloo::transport::UnboundBuffer>;

std::chrono::milliseconds to_milliseconds(double seconds) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(seconds));
}

// One message to or from one peer; its buffer must live until it is waited for.
struct Message {
    int peer;
    bool send;
    Buffer buffer;
};

class GlooCommunicator final : public Communicator {
public:
    GlooCommunicator(const Options& options, Meeting meeting)
        : m_context(std::move(meeting.context)), m_rank(options.rank), m_size(options.size),
          m_timeout_s(options.timeout_s),
          m_name(fmt::format("gloo ({}.{}.{}, {})", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                             GLOO_VERSION_PATCH, meeting.transport)) {
        // Once every rank has answered, every rank has its pairs: nobody needs the store any
        // more, and rank 0 stops serving it.
        std::int64_t here = 1;
        allreduce_max(&here, 1, "the end of the rendezvous");
        meeting.store.reset();
    }

    [[nodiscard]] std::string name() const override { return m_name; }
    [[nodiscard]] int rank() const override { return m_rank; }
    [[nodiscard]] int size() const override { return m_size; }

    void set_timeout(double seconds) override {
        m_timeout_s = seconds;
        m_context->setTimeout(to_milliseconds(seconds));
    }

    void allreduce_sum(float* data, std::size_t count, const std::string& what) override {
        start_allreduce_sum(data, count, what);
        wait_all();
    }

    // Posts the reduce-scatter: every other rank's chunk to it, every rank's copy of this
    // rank's chunk into a slot of the scratch. Every rank starts the same sums in the same
    // order, so Gloo's slots (the context's counter) match across ranks.
    void start_allreduce_sum(float* data, std::size_t count, const std::string& what) override {
        if (m_size == 1 || count == 0) {
            return;
        }
        const std::size_t index = m_pending.size();
        if (index >= m_scratch.size()) {
            m_scratch.resize(index + 1);
        }
        m_pending.push_back(Sum{data,
                                count,
                                what,
                                static_cast<std::uint64_t>(m_context->nextSlot(2)),
                                {},
                                &m_scratch[index]});
        Sum& sum = m_pending.back();
        const std::size_t mine = begin(count, m_rank + 1) - begin(count, m_rank);
        sum.scratch->resize(mine * static_cast<std::size_t>(m_size));
        for (int peer = 0; peer < m_size; ++peer) {
            if (peer != m_rank) {
                post(sum.messages, false, peer,
                     sum.scratch->data() + static_cast<std::size_t>(peer) * mine,
                     mine * sizeof(float), sum.slot, what);
            }
        }
        for (int peer = 0; peer < m_size; ++peer) {
            const std::size_t first = begin(count, peer);
            if (peer != m_rank) {
                post(sum.messages, true, peer, data + first,
                     (begin(count, peer + 1) - first) * sizeof(float), sum.slot, what);
            }
        }
    }

    bool progress() override { return m_pending.empty(); }

    // Every started sum's reduce-scatter, its add and its allgather, all within one timeout.
    void wait_all() override {
        const auto deadline = Clock::now() + to_milliseconds(m_timeout_s);
        for (Sum& sum : m_pending) {
            complete(sum.messages, deadline, sum.what);
            reduce_and_post_gather(sum);
        }
        for (Sum& sum : m_pending) {
            complete(sum.messages, deadline, sum.what);
        }
        m_pending.clear();
    }

    // Every rank's values to every rank, then the maximum: these are a few numbers.
    void allreduce_max(std::int64_t* values, std::size_t count, const std::string& what) override {
        if (m_size == 1 || count == 0) {
            return;
        }
        const auto slot = static_cast<std::uint64_t>(m_context->nextSlot());
        std::vector<std::int64_t> all(count * static_cast<std::size_t>(m_size));
        std::vector<Message> messages;
        for (int peer = 0; peer < m_size; ++peer) {
            if (peer != m_rank) {
                post(messages, false, peer, all.data() + static_cast<std::size_t>(peer) * count,
                     count * sizeof(std::int64_t), slot, what);
                post(messages, true, peer, values, count * sizeof(std::int64_t), slot, what);
            }
        }
        complete(messages, Clock::now() + to_milliseconds(m_timeout_s), what);
        for (int peer = 0; peer < m_size; ++peer) {
            for (std::size_t i = 0; peer != m_rank && i < count; ++i) {
                values[i] = std::max(values[i], all[static_cast<std::size_t>(peer) * count + i]);
            }
        }
    }

    void broadcast(void* data, std::size_t bytes, int root, const std::string& what) override {
        if (m_size == 1 || bytes == 0) {
            return;
        }
        const auto slot = static_cast<std::uint64_t>(m_context->nextSlot());
        std::vector<Message> messages;
        for (int peer = 0; peer < m_size; ++peer) {
            if (m_rank == root && peer != root) {
                post(messages, true, peer, data, bytes, slot, what);
            }
        }
        if (m_rank != root) {
            post(messages, false, root, data, bytes, slot, what);
        }
        complete(messages, Clock::now() + to_milliseconds(m_timeout_s), what);
    }

    // The others learn of it when this process's connections close: their next message to or
    // from this rank fails, naming it, within their collective timeout at the latest.
    [[noreturn]] void abort(int exit_code) override {
        std::cout.flush();
        std::cerr.flush();
        std::_Exit(exit_code);
    }

private:
    struct Sum {
        float* data;
        std::size_t count;
        std::string what;
        std::uint64_t slot;            // the reduce-scatter's; slot + 1 the allgather's
        std::vector<Message> messages; // of the phase in flight
        std::vector<float>* scratch;   // every rank's copy of this rank's chunk
    };

    // Chunk c of the buffer, [begin(c), begin(c + 1)), is summed by rank c.
    [[nodiscard]] std::size_t begin(std::size_t count, int chunk) const {
        return count * static_cast<std::size_t>(chunk) / static_cast<std::size_t>(m_size);
    }

    // This rank's chunk, added in rank order (its own copy in its place), then the allgather:
    // every rank's summed chunk to every other.
    void reduce_and_post_gather(Sum& sum) {
        const auto n = static_cast<std::size_t>(m_size);
        const std::size_t mine_begin = begin(sum.count, m_rank);
        const std::size_t mine = begin(sum.count, m_rank + 1) - mine_begin;
        std::vector<float>& scratch = *sum.scratch;
        std::memcpy(scratch.data() + static_cast<std::size_t>(m_rank) * mine, sum.data + mine_begin,
                    mine * sizeof(float));
        sum_in_rank_order(scratch.data(), n, mine, sum.data + mine_begin);
        for (int peer = 0; peer < m_size; ++peer) {
            const std::size_t first = begin(sum.count, peer);
            if (peer != m_rank) {
                post(sum.messages, false, peer, sum.data + first,
                     (begin(sum.count, peer + 1) - first) * sizeof(float), sum.slot + 1, sum.what);
                post(sum.messages, true, peer, sum.data + mine_begin, mine * sizeof(float),
                     sum.slot + 1, sum.what);
            }
        }
    }

    void post(std::vector<Message>& messages, bool send, int peer, void* data, std::size_t bytes,
              std::uint64_t slot, const std::string& what) {
        if (bytes == 0) {
            return;
        }
        Buffer buffer = m_context->createUnboundBuffer(data, bytes);
        try {
            if (send) {
                buffer->send(peer, slot);
            } else {
                buffer->recv(peer, slot);
            }
        } catch (const std::exception& e) {
            lost(what, peer, e.what());
        }
        messages.push_back(Message{peer, send, std::move(buffer)});
    }

    // Waits for each message in turn, with what is left until `deadline`.
    void complete(std::vector<Message>& messages, Clock::time_point deadline,
                  const std::string& what) {
        for (Message& message : messages) {
            const auto left = std::max(
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                std::chrono::milliseconds(1));
            try {
                if (message.send) {
                    message.buffer->waitSend(left);
                } else {
                    message.buffer->waitRecv(left);
                }
            } catch (const std::exception& e) {
                if (Clock::now() >= deadline) {
                    fail(fmt::format("{}: no answer from rank {} within {:g} s "
                                     "(DLTRAIN_COLLECTIVE_TIMEOUT): rank {} died or hangs",
                                     what, message.peer, m_timeout_s, message.peer));
                }
                lost(what, message.peer, e.what());
            }
        }
        messages.clear();
    }

    [[noreturn]] void lost(const std::string& what, int peer, const std::string& why) {
        fail(fmt::format("{}: the exchange with rank {} failed ({}): rank {} ended or died", what,
                         peer, why, peer));
    }

    // The others are in (or on their way to) a collective this rank will never join: this
    // rank's reason on its stderr, then its exit closes its connections, which ends them.
    [[noreturn]] void fail(const std::string& why) {
        std::cerr << fmt::format("dltrain: error: rank {} of {}: {}; ending every rank\n", m_rank,
                                 m_size, why)
                  << std::flush;
        abort(1);
    }

    std::shared_ptr<::gloo::Context> m_context;
    int m_rank;
    int m_size;
    double m_timeout_s;
    std::string m_name;
    std::vector<Sum> m_pending; // the sums started since the last wait_all, in order
    // Per position in the step, kept from step to step; a deque, so that a pending sum's
    // pointer to its own stays valid while later ones are added.
    std::deque<std::vector<float>> m_scratch;
};

std::unique_ptr<Communicator> make_gloo_communicator(const Options& options) {
    return std::make_unique<GlooCommunicator>(options, meet(options));
}

} // namespace
} // namespace dl::gloo_comm

extern "C" __attribute__((visibility("default"))) const dl::gloo_comm::PluginApi*
dltrain_gloo_plugin(const char* engine_abi_stamp) {
    static const dl::gloo_comm::PluginApi api{&dl::gloo_comm::make_gloo_communicator};
    if (engine_abi_stamp == nullptr ||
        std::strcmp(engine_abi_stamp, dl::gloo_comm::plugin_abi_stamp) != 0) {
        return nullptr;
    }
    return &api;
}
