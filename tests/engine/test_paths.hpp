#pragma once
// Where the engine tests find the source tree and dltrain. The build's own paths are built in;
// DLJOB_SOURCE_DIR and DLTRAIN_BINARY in the environment override them, so a bundle of the test
// binary runs wherever it is unpacked (bench/lenet_gpu/on_gpu.sh), not only where it was built.
// tests/CMakeLists.txt defines the macros DLJOB_SOURCE_DIR and DLTRAIN_BINARY as calls of these.

#include <cstdlib>
#include <string>

namespace dl_test {

inline std::string from_env_or(const char* name, const char* built) {
    const char* value = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read before threads
    return value != nullptr && *value != '\0' ? std::string(value) : std::string(built);
}

inline std::string source_dir() {
    return from_env_or("DLJOB_SOURCE_DIR", DL_TEST_BUILT_SOURCE_DIR);
}

inline std::string dltrain_binary() {
    return from_env_or("DLTRAIN_BINARY", DL_TEST_BUILT_DLTRAIN);
}

} // namespace dl_test
