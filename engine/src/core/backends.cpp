// The explicit table of backends (no static self-registration: it vanishes in static builds).

#include "cpu/cpu_backend.hpp"

#include <dl/backend.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <thread>

namespace dl {

std::vector<std::string> backend_names() {
    return {"cpu"};
}

std::unique_ptr<Backend> make_backend(const std::string& name, int threads) {
    if (threads <= 0) {
        threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    }
    if (name == "cpu") {
        return cpu::make_cpu_backend(threads);
    }
    throw Error(ErrorKind::usage, fmt::format("unknown backend '{}' (valid: {})", name,
                                              fmt::join(backend_names(), ", ")));
}

} // namespace dl
