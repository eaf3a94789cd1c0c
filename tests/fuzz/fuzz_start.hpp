#pragma once
// What both harnesses do first (LLVMFuzzerInitialize): make a scratch directory of this process
// (removed when libFuzzer exits; a crash leaves it beside the input that showed it), and with
// DL_FUZZ_SEEDS=DIR write the harness's seeds into DIR and exit instead of fuzzing.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

namespace fuzz {

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

} // namespace fuzz
