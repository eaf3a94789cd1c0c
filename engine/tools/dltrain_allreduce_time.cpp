// dltrain-allreduce-time: the gradient sum alone, as dltrain does it, timed between barriers so
// that no rank's compute or preemption is counted (dltrain's own allreduce_ms includes waiting
// for the slowest rank). Run under a launcher, like dltrain:
//
//   mpirun.openmpi -n 2 dltrain-allreduce-time [FLOATS [REPEATS]]
//
// Default: 431,081 floats (LeNet's gradients and the stop flag), 200 repeats. Prints, from
// rank 0, the communicator and the median, 10th and 90th percentile milliseconds.

#include <dl/communicator.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    try {
        const std::size_t floats = argc > 1 ? std::stoul(argv[1]) : 431081;
        const int repeats = argc > 2 ? std::stoi(argv[2]) : 200;
        const auto comm = dl::make_communicator(dl::detect_rank_env());
        std::vector<float> buffer(floats);
        std::vector<double> ms;
        for (int i = 0; i < repeats; ++i) {
            std::fill(buffer.begin(), buffer.end(), 1.0F);
            std::int64_t barrier = i;
            comm->allreduce_max(&barrier, 1, "the barrier");
            const auto start = std::chrono::steady_clock::now();
            comm->allreduce_sum(buffer.data(), buffer.size(), "the sum");
            ms.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
        }
        if (buffer.front() != static_cast<float>(comm->size())) {
            std::cerr << "dltrain-allreduce-time: wrong sum " << buffer.front() << '\n';
            return 1;
        }
        std::sort(ms.begin(), ms.end());
        const auto at = [&ms](double q) {
            return ms[static_cast<std::size_t>(q * static_cast<double>(ms.size() - 1))];
        };
        if (comm->rank() == 0) {
            fmt::print("{}: {} ranks, {} floats ({:.2f} MB): median {:.3f} ms, p10 {:.3f} ms, "
                       "p90 {:.3f} ms over {} sums\n",
                       comm->name(), comm->size(), floats, 4.0 * static_cast<double>(floats) / 1e6,
                       at(0.5), at(0.1), at(0.9), repeats);
        }
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "dltrain-allreduce-time: error: " << e.what() << '\n';
        return 1;
    }
}
