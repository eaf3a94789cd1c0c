#include <dljob/util/cpus.hpp>

#include <gtest/gtest.h>

#include <sched.h>

#include <thread>

namespace dljob::util {
namespace {

// A job given some cores of a node sees them in its affinity mask; count those, not the node's.
TEST(UsableCpus, FollowsTheAffinityMask) {
    const unsigned all = usable_cpus();
    EXPECT_GE(all, 1U);
    EXPECT_LE(all, std::max(1U, std::thread::hardware_concurrency()));
    unsigned pinned = 0;
    bool pinned_ok = false;
    std::thread thread([&] {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &mine)) { // the first CPU this process may use
                CPU_SET(cpu, &one);
                break;
            }
        }
        pinned_ok = sched_setaffinity(0, sizeof(one), &one) == 0;
        pinned = usable_cpus();
    });
    thread.join();
    ASSERT_TRUE(pinned_ok);
    EXPECT_EQ(pinned, 1U);
    EXPECT_EQ(usable_cpus(), all) << "pinning another thread changed this one's mask";
}

} // namespace
} // namespace dljob::util
