#pragma once
// What both harnesses share: their start (LLVMFuzzerInitialize) and an input cut into lines.

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace fuzz {

/// Makes a scratch directory of this process (removed when libFuzzer exits; a crash leaves it
/// beside the input that showed it); with DL_FUZZ_SEEDS=DIR writes the harness's seeds into DIR
/// and exits instead of fuzzing.
inline void start(const std::string& harness, std::filesystem::path& scratch,
                  const std::function<void(const std::filesystem::path&)>& write_seeds) {
    scratch = std::filesystem::temp_directory_path() / (harness + "." + std::to_string(::getpid()));
    std::filesystem::create_directories(scratch);
    static std::filesystem::path removed_at_exit;
    removed_at_exit = scratch;
    std::atexit([] {
        std::error_code ignored;
        std::filesystem::remove_all(removed_at_exit, ignored);
    });
    if (const char* seeds = std::getenv("DL_FUZZ_SEEDS")) {
        write_seeds(seeds);
        std::exit(0);
    }
}

/// The input's lines (without their newlines), at most `most` of them.
inline std::vector<std::string> lines_of(const std::uint8_t* data, std::size_t size,
                                         std::size_t most) {
    std::vector<std::string> lines;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (std::size_t start = 0; start < text.size() && lines.size() < most;) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        lines.emplace_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

} // namespace fuzz
