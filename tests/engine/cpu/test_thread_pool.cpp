// The engine's thread pool: every task of a run is called exactly once, on a valid thread id,
// and run() returns only after all of them, across back-to-back runs (the workers' bounded spin)
// and runs spaced further apart than that spin (the workers' sleep and wake-up).

#include "cpu/thread_pool.hpp"

#include <dl/backend.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace dl::cpu {
namespace {

void expect_each_task_once(ThreadPool& pool, int tasks, int run) {
    std::vector<std::atomic<int>> calls(static_cast<std::size_t>(tasks));
    std::atomic<int> bad_thread{0};
    pool.run(tasks, [&](int task, int thread) {
        if (thread < 0 || thread >= pool.size()) {
            bad_thread.fetch_add(1);
        }
        // A little work, so that the workers take part.
        volatile int sink = 0;
        for (int i = 0; i < 200 * (task % 3); ++i) {
            sink = sink + i;
        }
        calls[static_cast<std::size_t>(task)].fetch_add(1);
    });
    // run() has returned: every task must have finished, not just started.
    for (int task = 0; task < tasks; ++task) {
        ASSERT_EQ(calls[static_cast<std::size_t>(task)].load(), 1)
            << "task " << task << " of run " << run;
    }
    EXPECT_EQ(bad_thread.load(), 0);
}

TEST(ThreadPool, BackToBackRunsCallEveryTaskOnce) {
    for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (int run = 0; run < 2000; ++run) {
            expect_each_task_once(pool, 1 + run % 9, run);
        }
    }
}

TEST(ThreadPool, RunsAfterTheWorkersHaveGoneToSleepCallEveryTaskOnce) {
    ThreadPool pool(2);
    for (int run = 0; run < 20; ++run) {
        expect_each_task_once(pool, 8, run);
        // Longer than the 50 us the workers look before sleeping.
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + run % 3));
    }
}

TEST(ThreadPool, DestroysWhileWorkersSpinOrSleep) {
    for (int i = 0; i < 50; ++i) {
        ThreadPool pool(3);
        expect_each_task_once(pool, 4, i);
        if (i % 2 == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    } // each destructor must join its workers, spinning or asleep
}

} // namespace
} // namespace dl::cpu

namespace dl {
namespace {

// Without --threads, OMP_NUM_THREADS bounds dltrain's threads, as it bounds PyTorch's (Spark's
// driver sets it to each rank's executor cores); what is not a positive number is ignored.
TEST(BackendThreads, OmpNumThreadsIsTheDefaultWithinTheUsableCpus) {
    const int usable = cpu::usable_cpus();
    const char* saved = std::getenv("OMP_NUM_THREADS"); // NOLINT(concurrency-mt-unsafe)
    const std::string restore = saved == nullptr ? "" : saved;
    const auto threads_with = [](const char* value) {
        if (value == nullptr) {
            ::unsetenv("OMP_NUM_THREADS");
        } else {
            ::setenv("OMP_NUM_THREADS", value, 1);
        }
        return make_backend("cpu", 0)->threads();
    };
    EXPECT_EQ(threads_with(nullptr), usable);
    EXPECT_EQ(threads_with("1"), 1);
    EXPECT_EQ(threads_with("100000"), usable);
    EXPECT_EQ(threads_with("two"), usable);
    EXPECT_EQ(threads_with("0"), usable);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    EXPECT_EQ(make_backend("cpu", 2)->threads(), std::min(2, usable)); // --threads wins
    if (saved == nullptr) {
        ::unsetenv("OMP_NUM_THREADS");
    } else {
        ::setenv("OMP_NUM_THREADS", restore.c_str(), 1);
    }
}

} // namespace
} // namespace dl
