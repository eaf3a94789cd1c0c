// A fuzz target run over files, without libFuzzer: how the normal test build (GCC, no
// sanitizers) keeps both harnesses compiling and replays their seeds and past findings
// (tests/fuzz/replay.sh, ctest fuzz.replay). An escaped exception or a crash is a failure, as
// under libFuzzer.
//
//   DL_FUZZ_TARGET=TARGET dl_fuzz_replay FILE...

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

// libFuzzer's own -max_len in run.sh; a larger file is not one of its inputs.
constexpr off_t k_max_input = 65536;

} // namespace

int main(int argc, char** argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int replayed = 0;
    for (int i = 1; i < argc; ++i) {
        struct stat info {};
        if (::stat(argv[i], &info) != 0 || !S_ISREG(info.st_mode) || info.st_size > k_max_input) {
            std::fprintf(stderr, "replay: %s is not a regular file of at most %lld bytes\n",
                         argv[i], static_cast<long long>(k_max_input));
            return 2;
        }
        std::ifstream in(argv[i], std::ios::binary);
        const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                      std::istreambuf_iterator<char>()};
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        ++replayed;
    }
    std::printf("replayed %d input(s)\n", replayed);
    return 0;
}
