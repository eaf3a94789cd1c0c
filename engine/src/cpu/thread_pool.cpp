#include "cpu/thread_pool.hpp"

namespace dl::cpu {

ThreadPool::ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) {
        m_workers.emplace_back([this, i] { worker_loop(i); });
    }
}

ThreadPool::~ThreadPool() {
    {
        const std::lock_guard lock(m_mutex);
        m_stop = true;
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
    {
        std::unique_lock lock(m_mutex);
        // A worker that woke late for the previous run must leave before the counter resets.
        m_done.wait(lock, [this] { return m_active == 0; });
        m_call = call;
        m_context = context;
        m_tasks = tasks;
        m_next.store(0);
        m_pending.store(tasks);
        ++m_generation;
    }
    m_wake.notify_all();
    work(call, context, tasks, 0);
    std::unique_lock lock(m_mutex);
    // Also wait for workers to leave work(): a late one must not take a task of the next run.
    m_done.wait(lock, [this] { return m_pending.load() == 0 && m_active == 0; });
}

void ThreadPool::worker_loop(int thread) {
    std::uint64_t seen = 0;
    std::unique_lock lock(m_mutex);
    while (true) {
        m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
        if (m_stop) {
            return;
        }
        seen = m_generation;
        const Call call = m_call;
        void* context = m_context;
        const int tasks = m_tasks;
        ++m_active;
        lock.unlock();
        work(call, context, tasks, thread);
        lock.lock();
        --m_active;
        if (m_active == 0) {
            m_done.notify_all();
        }
    }
}

} // namespace dl::cpu
