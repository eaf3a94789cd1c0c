#include "cpu/thread_pool.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace dl::cpu {
namespace {

// How long a thread that waits for the pool looks before it sleeps. Within a training step the
// next run (the next layer) or the last task of this one comes within microseconds, while a
// futex wake-up costs 30-50 us on a virtual machine: 8 tasks of 7 us took as long on 2 threads
// as on one. Past this bound the wait blocks, so an idle or overloaded machine gets the core back
// within 50 us (a spinning OpenMP wait keeps it for 200 ms).
constexpr auto k_spin = std::chrono::microseconds(50);

// Spins until ready() or k_spin has passed; returns ready().
template <typename Ready> bool spin_until(Ready ready) {
    const auto deadline = std::chrono::steady_clock::now() + k_spin;
    while (!ready()) {
        for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            return ready();
        }
    }
    return true;
}

} // namespace

int usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        return std::max(1, CPU_COUNT(&set));
    }
    return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) {
        m_workers.emplace_back([this, i] { worker_loop(i); });
    }
}

ThreadPool::~ThreadPool() {
    {
        const std::lock_guard lock(m_mutex);
        m_stop.store(true);
    }
    m_wake.notify_all();
    for (auto& worker : m_workers) {
        worker.join();
    }
}

void ThreadPool::work(Call call, void* context, int tasks, int thread) {
    for (int task = m_next.fetch_add(1); task < tasks; task = m_next.fetch_add(1)) {
        call(context, task, thread);
        if (m_pending.fetch_sub(1) == 1) {
            const std::lock_guard lock(m_mutex);
            m_done.notify_all();
        }
    }
}

void ThreadPool::run_impl(int tasks, Call call, void* context) {
    if (m_workers.empty() || tasks <= 1) {
        for (int task = 0; task < tasks; ++task) {
            call(context, task, 0);
        }
        return;
    }
    const auto idle = [this] { return m_active.load() == 0; };
    {
        spin_until(idle);
        std::unique_lock lock(m_mutex);
        // A worker that woke late for the previous run must leave before the counter resets.
        m_done.wait(lock, idle);
        m_call = call;
        m_context = context;
        m_tasks = tasks;
        m_next.store(0);
        m_pending.store(tasks);
        m_generation.fetch_add(1);
    }
    m_wake.notify_all();
    work(call, context, tasks, 0);
    // Also wait for workers to leave work(): a late one must not take a task of the next run.
    const auto finished = [this] { return m_pending.load() == 0 && m_active.load() == 0; };
    if (!spin_until(finished)) {
        std::unique_lock lock(m_mutex);
        m_done.wait(lock, finished);
    }
}

void ThreadPool::worker_loop(int thread) {
    std::uint64_t seen = 0;
    const auto woken = [&] { return m_stop.load() || m_generation.load() != seen; };
    while (true) {
        spin_until(woken);
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, woken);
        if (m_stop.load()) {
            return;
        }
        // Read under the lock, with m_active raised before it is released: run_impl cannot
        // publish the next run while this worker holds this one's call and context.
        seen = m_generation.load();
        const Call call = m_call;
        void* context = m_context;
        const int tasks = m_tasks;
        m_active.fetch_add(1);
        lock.unlock();
        work(call, context, tasks, thread);
        lock.lock();
        if (m_active.fetch_sub(1) == 1) {
            m_done.notify_all();
        }
    }
}

} // namespace dl::cpu
