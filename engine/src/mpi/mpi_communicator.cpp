// The MPI communicator, compiled once per MPI flavour (engine/CMakeLists.txt). Every wait is
// bounded: requests are polled against the collective timeout, and a rank that does not answer
// in time is named before MPI_Abort ends the job, instead of every rank spinning until the
// scheduler's walltime (docs/data-parallel.md, "When a rank dies").
//
// The gradient sum is ours, not MPI_Allreduce's: a reduce-scatter by point-to-point messages
// (each rank owns one chunk and adds the N contributions to it in rank order), then an
// allgather of the summed chunks. It moves the bytes a ring allreduce moves, its result does
// not depend on the library's choice of algorithm (so two runs with the same N are
// bit-identical), and since every message has a known sender, a timeout can say which rank is
// missing. DLTRAIN_ALLREDUCE=library uses MPI_Iallreduce instead.
//
// Sums are non-blocking underneath: start_allreduce_sum posts one sum's messages (a gradient
// bucket, while the backward pass goes on), progress() tests them between layers and moves a
// sum from its reduce-scatter to its allgather, and wait_all() polls them to the end against
// the timeout. The blocking allreduce_sum is a start and a wait_all.
//
// Between two tests nothing moves: a rendezvous needs both ranks inside MPI, and on a CPU rank a
// layer's backward is one long call. DLTRAIN_MPI_PROGRESS=thread adds a thread that tests the
// sums in flight every 50 us (MPI_THREAD_SERIALIZED: every MPI call of the plugin holds one
// mutex), for machines with a core to spare for it.

#include "mpi/mpi_plugin.hpp"

#include <dl/communicator.hpp>
#include <dl/error.hpp>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dl::mpi {
namespace {

using Clock = std::chrono::steady_clock;

std::string library_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string version(text, static_cast<std::size_t>(std::max(length, 0)));
    // The first line, up to the first comma: "Open MPI v4.1.4", "MPICH Version:	4.0.2".
    version = version.substr(0, version.find_first_of(",\n"));
    while (!version.empty() && (version.back() == ' ' || version.back() == '\t')) {
        version.pop_back();
    }
    return version;
}

// CUDA-aware MPI, asked of the library at run time where it can say (Open MPI's extension,
// MPICH >= 4's MPIX_GPU_query_support); Cray MPICH has no query, its variable says it.
bool cuda_aware() {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
    return MPIX_Query_cuda_support() == 1;
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int flag = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &flag) == MPI_SUCCESS && flag != 0;
#else
    const char* cray = std::getenv("MPICH_RDMA_ENABLED_CUDA");      // NOLINT(concurrency-mt-unsafe)
    const char* cray_ex = std::getenv("MPICH_GPU_SUPPORT_ENABLED"); // NOLINT(concurrency-mt-unsafe)
    return (cray != nullptr && std::string(cray) == "1") ||
           (cray_ex != nullptr && std::string(cray_ex) == "1");
#endif
}

class MpiCommunicator final : public Communicator {
public:
    explicit MpiCommunicator(double timeout_s) : m_timeout_s(timeout_s) {
        int initialised = 0;
        MPI_Initialized(&initialised);
        const char* progress = std::getenv("DLTRAIN_MPI_PROGRESS"); // NOLINT(concurrency-mt-unsafe)
        const bool want_thread = progress != nullptr && std::string(progress) == "thread";
        int provided = MPI_THREAD_SINGLE;
        if (initialised == 0) {
            if (MPI_Init_thread(nullptr, nullptr,
                                want_thread ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED,
                                &provided) != MPI_SUCCESS) {
                throw Error(ErrorKind::device, "MPI_Init_thread failed");
            }
            m_owns_init = true;
        } else {
            MPI_Query_thread(&provided);
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &m_comm);
        // Errors come back to us (a dead peer's request fails) instead of MPI's own abort, so
        // that the message can name the peer.
        MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(m_comm, &m_rank);
        MPI_Comm_size(m_comm, &m_size);
        m_library = library_version();
        m_cuda_aware = cuda_aware();
        const char* mode = std::getenv("DLTRAIN_ALLREDUCE"); // NOLINT(concurrency-mt-unsafe)
        m_library_sum = mode != nullptr && std::string(mode) == "library";
        if (want_thread && provided < MPI_THREAD_SERIALIZED) {
            std::cerr << fmt::format(
                "dltrain: warning: rank {}: {} gives no MPI_THREAD_SERIALIZED: "
                "DLTRAIN_MPI_PROGRESS=thread ignored\n",
                m_rank, m_library);
        } else if (want_thread) {
            m_progress = std::thread([this] { progress_loop(); });
        }
    }

    ~MpiCommunicator() override {
        if (m_progress.joinable()) {
            {
                const std::lock_guard<std::recursive_mutex> lock(m_mutex);
                m_stop = true;
            }
            m_wake.notify_one();
            m_progress.join();
        }
        // After an error on this rank the others may sit in a collective: finalising would
        // wait for them. Leaving without it lets the launcher end the job and name this rank.
        if (std::uncaught_exceptions() > 0 || !m_owns_init) {
            return;
        }
        MPI_Comm_free(&m_comm);
        MPI_Finalize();
    }
    MpiCommunicator(const MpiCommunicator&) = delete;
    MpiCommunicator& operator=(const MpiCommunicator&) = delete;
    MpiCommunicator(MpiCommunicator&&) = delete;
    MpiCommunicator& operator=(MpiCommunicator&&) = delete;

    [[nodiscard]] std::string name() const override {
        return fmt::format("mpi ({}{})", m_library, m_cuda_aware ? ", CUDA-aware" : "");
    }
    [[nodiscard]] int rank() const override { return m_rank; }
    [[nodiscard]] int size() const override { return m_size; }
    // GPU pointers only to a CUDA-aware library's own sum: the ordered sum adds on the host.
    [[nodiscard]] bool accepts(const Memory& memory) const override {
        return memory.host_accessible() || (m_cuda_aware && m_library_sum);
    }
    void set_timeout(double seconds) override { m_timeout_s = seconds; }

    void allreduce_sum(float* data, std::size_t count, const std::string& what) override {
        start_allreduce_sum(data, count, what);
        wait_all();
    }

    void start_allreduce_sum(float* data, std::size_t count, const std::string& what) override {
        if (m_size == 1 || count == 0) {
            return;
        }
        const std::unique_lock<std::recursive_mutex> lock(m_mutex);
        // Every rank starts the same sums in the same order, so the n-th sum since the last
        // wait_all has the same tags everywhere, and no message of one bucket can match a
        // receive of another.
        const int slot = static_cast<int>(m_pending.size());
        const int tag = k_tag_base + 2 * (slot % k_tag_slots);
        if (static_cast<std::size_t>(slot) >= m_scratch.size()) {
            m_scratch.resize(static_cast<std::size_t>(slot) + 1);
        }
        m_pending.push_back(Sum{data,
                                count,
                                what,
                                tag,
                                Phase::scatter,
                                {},
                                {},
                                &m_scratch[static_cast<std::size_t>(slot)]});
        Sum& sum = m_pending.back();
        if (m_library_sum) {
            sum.phase = Phase::gather; // one request, whose end is the sum's
            sum.requests.emplace_back();
            sum.peers.push_back(-1);
            check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                 m_comm, &sum.requests.back()),
                  what);
        } else {
            post_scatter(sum);
        }
        m_wake.notify_one();
    }

    bool progress() override {
        const std::lock_guard<std::recursive_mutex> lock(m_mutex);
        bool done = true;
        for (Sum& sum : m_pending) {
            done = advance(sum) && done;
        }
        return done;
    }

    // Polls until every started sum completes. MPI moves a large message in fragments, each
    // only when both sides call into it: the first 20 ms poll without pause (yielding the core,
    // as MPI's own blocking wait does when oversubscribed), and only a wait longer than that (a
    // peer still computing, testing or writing a checkpoint) backs off to 50 us naps.
    void wait_all() override {
        const auto start = Clock::now();
        while (true) {
            bool done = true;
            {
                const std::lock_guard<std::recursive_mutex> lock(m_mutex);
                for (Sum& sum : m_pending) {
                    done = advance(sum) && done;
                }
            }
            if (done) {
                break;
            }
            const double waited = std::chrono::duration<double>(Clock::now() - start).count();
            if (waited > m_timeout_s) {
                const std::lock_guard<std::recursive_mutex> lock(m_mutex);
                timed_out();
            }
            if (waited < k_spin_s) {
                std::this_thread::yield();
            } else {
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
        }
        const std::lock_guard<std::recursive_mutex> lock(m_mutex);
        m_pending.clear();
    }

    void allreduce_max(std::int64_t* values, std::size_t count, const std::string& what) override {
        if (m_size == 1 || count == 0) {
            return;
        }
        MPI_Request request = MPI_REQUEST_NULL;
        {
            const std::lock_guard<std::recursive_mutex> lock(m_mutex);
            check(MPI_Iallreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_INT64_T,
                                 MPI_MAX, m_comm, &request),
                  what);
        }
        wait({request}, {}, what);
    }

    void broadcast(void* data, std::size_t bytes, int root, const std::string& what) override {
        if (m_size == 1 || bytes == 0) {
            return;
        }
        MPI_Request request = MPI_REQUEST_NULL;
        {
            const std::lock_guard<std::recursive_mutex> lock(m_mutex);
            check(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, m_comm, &request),
                  what);
        }
        wait({request}, {}, what);
    }

    [[noreturn]] void abort(int exit_code) override {
        const std::lock_guard<std::recursive_mutex> lock(m_mutex);
        MPI_Abort(MPI_COMM_WORLD, exit_code);
        std::_Exit(exit_code); // MPI_Abort does not return; the compiler does not know it
    }

private:
    // Chunk c of the buffer, [begin(c), begin(c + 1)), is summed by rank c.
    [[nodiscard]] std::size_t begin(std::size_t count, int chunk) const {
        return count * static_cast<std::size_t>(chunk) / static_cast<std::size_t>(m_size);
    }

    enum class Phase { scatter, gather, done };

    // One started sum: its buffer, and the requests of the phase in flight; peers[i] is the
    // rank request i waits for (a send of a large message waits for its receiver too; -1 for
    // the library's collective), so that a timeout names the ranks that did not answer.
    struct Sum {
        float* data;
        std::size_t count;
        std::string what;
        int tag; // the reduce-scatter's; tag + 1 the allgather's
        Phase phase;
        std::vector<MPI_Request> requests;
        std::vector<int> peers;
        std::vector<float>* scratch; // every rank's copy of this rank's chunk
    };

    // Reduce-scatter: every peer's share of my chunk arrives in its own slot of the scratch.
    void post_scatter(Sum& sum) {
        const std::size_t mine_begin = begin(sum.count, m_rank);
        const std::size_t mine = begin(sum.count, m_rank + 1) - mine_begin;
        sum.scratch->resize(mine * static_cast<std::size_t>(m_size));
        for (int peer = 0; peer < m_size; ++peer) {
            if (peer == m_rank || mine == 0) {
                continue;
            }
            sum.requests.emplace_back();
            sum.peers.push_back(peer);
            check(MPI_Irecv(sum.scratch->data() + static_cast<std::size_t>(peer) * mine,
                            static_cast<int>(mine), MPI_FLOAT, peer, sum.tag, m_comm,
                            &sum.requests.back()),
                  sum.what);
        }
        for (int peer = 0; peer < m_size; ++peer) {
            const std::size_t first = begin(sum.count, peer);
            const std::size_t length = begin(sum.count, peer + 1) - first;
            if (peer == m_rank || length == 0) {
                continue;
            }
            sum.requests.emplace_back();
            sum.peers.push_back(peer);
            check(MPI_Isend(sum.data + first, static_cast<int>(length), MPI_FLOAT, peer, sum.tag,
                            m_comm, &sum.requests.back()),
                  sum.what);
        }
    }

    // My chunk, added in rank order (this rank's own in its place), then the allgather: every
    // rank's summed chunk to every other.
    void reduce_and_post_gather(Sum& sum) {
        const auto n = static_cast<std::size_t>(m_size);
        const std::size_t mine_begin = begin(sum.count, m_rank);
        const std::size_t mine = begin(sum.count, m_rank + 1) - mine_begin;
        std::vector<float>& scratch = *sum.scratch;
        std::memcpy(scratch.data() + static_cast<std::size_t>(m_rank) * mine, sum.data + mine_begin,
                    mine * sizeof(float));
        sum_in_rank_order(scratch.data(), n, mine, sum.data + mine_begin);
        sum.requests.clear();
        sum.peers.clear();
        for (int peer = 0; peer < m_size; ++peer) {
            const std::size_t first = begin(sum.count, peer);
            const std::size_t length = begin(sum.count, peer + 1) - first;
            if (peer == m_rank || length == 0) {
                continue;
            }
            sum.requests.emplace_back();
            sum.peers.push_back(peer);
            check(MPI_Irecv(sum.data + first, static_cast<int>(length), MPI_FLOAT, peer,
                            sum.tag + 1, m_comm, &sum.requests.back()),
                  sum.what);
        }
        for (int peer = 0; peer < m_size; ++peer) {
            if (peer == m_rank || mine == 0) {
                continue;
            }
            sum.requests.emplace_back();
            sum.peers.push_back(peer);
            check(MPI_Isend(sum.data + mine_begin, static_cast<int>(mine), MPI_FLOAT, peer,
                            sum.tag + 1, m_comm, &sum.requests.back()),
                  sum.what);
        }
    }

    // Tests the sum's requests once; moves it on when they are all complete. True when done.
    bool advance(Sum& sum) {
        while (sum.phase != Phase::done) {
            for (std::size_t i = 0; i < sum.requests.size(); ++i) {
                if (sum.requests[i] == MPI_REQUEST_NULL) {
                    continue;
                }
                int flag = 0;
                MPI_Status status;
                const int result = MPI_Test(&sum.requests[i], &flag, &status);
                if (result != MPI_SUCCESS) {
                    fail(fmt::format("{}: the exchange with {} failed ({}): it died?", sum.what,
                                     sum.peers[i] >= 0 ? fmt::format("rank {}", sum.peers[i])
                                                       : std::string("a rank"),
                                     error_text(result)));
                }
            }
            if (std::any_of(sum.requests.begin(), sum.requests.end(),
                            [](MPI_Request r) { return r != MPI_REQUEST_NULL; })) {
                return false;
            }
            if (sum.phase == Phase::scatter) {
                reduce_and_post_gather(sum);
                sum.phase = Phase::gather;
            } else {
                sum.phase = Phase::done;
            }
        }
        return true;
    }

    // DLTRAIN_MPI_PROGRESS=thread: tests the sums in flight while the training thread computes,
    // asleep while there are none.
    void progress_loop() {
        std::unique_lock<std::recursive_mutex> lock(m_mutex);
        while (true) {
            m_wake.wait(lock, [this] {
                return m_stop || std::any_of(m_pending.begin(), m_pending.end(),
                                             [](const Sum& s) { return s.phase != Phase::done; });
            });
            if (m_stop) {
                return;
            }
            for (Sum& sum : m_pending) {
                advance(sum);
            }
            lock.unlock();
            std::this_thread::sleep_for(std::chrono::microseconds(50));
            lock.lock();
        }
    }

    [[noreturn]] void timed_out() {
        const Sum* first = nullptr;
        std::vector<int> missing;
        for (const Sum& sum : m_pending) {
            if (sum.phase == Phase::done) {
                continue;
            }
            first = first != nullptr ? first : &sum;
            for (std::size_t i = 0; i < sum.requests.size(); ++i) {
                if (sum.requests[i] != MPI_REQUEST_NULL && sum.peers[i] >= 0 &&
                    std::find(missing.begin(), missing.end(), sum.peers[i]) == missing.end()) {
                    missing.push_back(sum.peers[i]);
                }
            }
        }
        std::sort(missing.begin(), missing.end());
        const std::string ranks =
            missing.empty() ? std::string() : fmt::format("rank {}", fmt::join(missing, ", "));
        fail(fmt::format("{}: no answer {} within {:.0f} s (DLTRAIN_COLLECTIVE_TIMEOUT): {} died "
                         "or hangs",
                         first != nullptr ? first->what : std::string("a collective"),
                         missing.empty() ? std::string("from every rank") : "from " + ranks,
                         m_timeout_s, missing.empty() ? std::string("a rank") : ranks));
    }

    void check(int status, const std::string& what) {
        if (status != MPI_SUCCESS) {
            fail(fmt::format("{} failed: {}", what, error_text(status)));
        }
    }

    static std::string error_text(int status) {
        char text[MPI_MAX_ERROR_STRING] = {};
        int length = 0;
        MPI_Error_string(status, text, &length);
        return {text, static_cast<std::size_t>(std::max(length, 0))};
    }

    // Polls until every request completes. `peers[i]`, when given, is whom request i waits
    // for, so that a timeout names the ranks that did not answer. MPI moves a large message in
    // fragments, each only when both sides call into it: the first 20 ms poll without pause
    // (yielding the core, as MPI's own blocking wait does when oversubscribed), and only a wait
    // longer than that (a peer still computing, testing or writing a checkpoint) backs off to
    // 50 us naps.
    void wait(std::vector<MPI_Request> requests, const std::vector<int>& peers,
              const std::string& what) {
        const auto start = Clock::now();
        std::vector<bool> done(requests.size(), false);
        std::size_t left = requests.size();
        while (left > 0) {
            for (std::size_t i = 0; i < requests.size(); ++i) {
                if (done[i]) {
                    continue;
                }
                int flag = 0;
                MPI_Status status;
                int result = MPI_SUCCESS;
                {
                    const std::lock_guard<std::recursive_mutex> lock(m_mutex);
                    result = MPI_Test(&requests[i], &flag, &status);
                }
                if (result != MPI_SUCCESS) {
                    fail(fmt::format("{}: the exchange with {} failed ({}): it died?", what,
                                     i < peers.size() ? fmt::format("rank {}", peers[i])
                                                      : std::string("a rank"),
                                     error_text(result)));
                }
                if (flag != 0) {
                    done[i] = true;
                    --left;
                }
            }
            if (left == 0) {
                break;
            }
            const double waited = std::chrono::duration<double>(Clock::now() - start).count();
            if (waited > m_timeout_s) {
                std::string missing;
                for (std::size_t i = 0; i < peers.size(); ++i) {
                    if (!done[i]) {
                        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", peers[i]);
                    }
                }
                fail(fmt::format(
                    "{}: no answer {} within {:.0f} s (DLTRAIN_COLLECTIVE_TIMEOUT): "
                    "{} died or hangs",
                    what, missing.empty() ? std::string("from every rank") : "from rank " + missing,
                    m_timeout_s, missing.empty() ? "a rank" : "rank " + missing));
            }
            if (waited < k_spin_s) {
                std::this_thread::yield();
            } else {
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
        }
    }

    // The others are in (or on their way to) a collective this rank will never join: end them
    // all, with this rank's reason on its stderr first.
    [[noreturn]] void fail(const std::string& why) {
        std::cerr << fmt::format("dltrain: error: rank {} of {}: {}; ending every rank\n", m_rank,
                                 m_size, why)
                  << std::flush;
        abort(1);
    }

    static constexpr double k_spin_s = 0.020;
    // Tags k_tag_base + 2 * slot (reduce-scatter) and + 1 (allgather), below the MPI_TAG_UB
    // every MPI guarantees (32767).
    static constexpr int k_tag_base = 4100;
    static constexpr int k_tag_slots = 8000;
    MPI_Comm m_comm = MPI_COMM_NULL;
    int m_rank = 0;
    int m_size = 1;
    double m_timeout_s;
    bool m_owns_init = false;
    bool m_cuda_aware = false;
    bool m_library_sum = false;
    std::string m_library;
    std::vector<Sum> m_pending; // the sums started since the last wait_all, in order
    // Per slot, kept from step to step; a deque, so that a pending sum's pointer to its own
    // stays valid while later ones are added.
    std::deque<std::vector<float>> m_scratch;
    // Every MPI call holds it: the progress thread's tests and the training thread's calls take
    // turns (MPI_THREAD_SERIALIZED).
    std::recursive_mutex m_mutex; // recursive: fail() ends every rank from inside a held call
    std::condition_variable_any m_wake;
    bool m_stop = false;
    std::thread m_progress;
};

std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s) {
    return std::make_unique<MpiCommunicator>(timeout_s);
}

} // namespace
} // namespace dl::mpi

extern "C" __attribute__((visibility("default"))) const dl::mpi::PluginApi*
dltrain_mpi_plugin(const char* engine_abi_stamp) {
    static const dl::mpi::PluginApi api{&dl::mpi::make_mpi_communicator, DLTRAIN_MPI_FLAVOUR};
    if (engine_abi_stamp == nullptr ||
        std::strcmp(engine_abi_stamp, dl::mpi::plugin_abi_stamp) != 0) {
        return nullptr;
    }
    return &api;
}
