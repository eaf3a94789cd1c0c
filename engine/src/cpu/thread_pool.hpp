#pragma once
// The engine's one thread pool. Waits block on condition variables after at most 50 us of
// looking (thread_pool.cpp says why; a long spin on 2 shared cores steals the core the other
// thread needs). Work is split into numbered tasks whose results depend only on the task
// number, so runs are deterministic for a thread count.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace dl::cpu {

/// The CPUs this process may run on: its affinity mask, which Slurm's and Torque's cpusets,
/// `srun --cpu-bind` and `taskset` set. A job given 4 cores of a 64-core node must start 4
/// threads, not 64 (hardware_concurrency counts the node's CPUs). At least 1.
[[nodiscard]] int usable_cpus();

class ThreadPool {
public:
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;
    ThreadPool(ThreadPool&&) = delete;
    ThreadPool& operator=(ThreadPool&&) = delete;

    [[nodiscard]] int size() const { return static_cast<int>(m_workers.size()) + 1; }

    /// Calls fn(task, thread) for every task in [0, tasks), thread in [0, size()) naming the
    /// thread that runs it (for per-thread scratch); the caller is thread 0 and works too.
    /// Tasks are handed out one at a time, so a thread that the OS deschedules on a busy
    /// machine leaves its remaining tasks to the others. Returns when all are done. No
    /// allocation: fn is passed by address.
    template <typename F> void run(int tasks, F&& fn) {
        run_impl(
            tasks,
            [](void* context, int task, int thread) {
                (*static_cast<std::remove_reference_t<F>*>(context))(task, thread);
            },
            &fn);
    }

private:
    using Call = void (*)(void*, int, int);
    void run_impl(int tasks, Call call, void* context);
    void work(Call call, void* context, int tasks, int thread);
    void worker_loop(int thread);

    std::vector<std::thread> m_workers;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::condition_variable m_done;
    Call m_call = nullptr;
    void* m_context = nullptr;
    int m_tasks = 0;
    // Written under m_mutex, read without it by the bounded spins.
    std::atomic<std::uint64_t> m_generation{0};
    std::atomic<int> m_active{0};
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_next{0};
    std::atomic<int> m_pending{0};
};

} // namespace dl::cpu
