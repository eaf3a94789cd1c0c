// OpenBLAS's kernel choice: where its own pick leaves the CPU's vector units unused, dltrain
// starts again with the better set; a user's OPENBLAS_CORETYPE always stands.
#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/blas.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>

namespace dl {
namespace {
namespace fs = std::filesystem;
using dljob::test::run_shell;

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

TEST(BlasCore, WeakPicksGiveWayToTheCpusVectorUnits) {
    // Debian's OpenBLAS 0.3.21 on a Cooper Lake-like Xeon: SSE3 kernels under that name.
    EXPECT_EQ(choose_blas_core("Cooperlake", true, true), "SkylakeX");
    EXPECT_EQ(choose_blas_core("Prescott", true, true), "SkylakeX");
    EXPECT_EQ(choose_blas_core("Prescott", false, true), "Haswell");
    EXPECT_EQ(choose_blas_core("Sandybridge", false, true), "Haswell");
    EXPECT_EQ(choose_blas_core("Nehalem", false, false), ""); // nothing better to ask for
    // Good picks stand, whatever the CPU has.
    for (const char* good : {"SkylakeX", "Haswell", "Zen", "SapphireRapids", "Neoverse"}) {
        EXPECT_EQ(choose_blas_core(good, true, true), "") << good;
    }
}

std::string start_blas(const fs::path& dir, const std::string& env) {
    const fs::path config = dl_test::make_tiny_workspace(dir, 2);
    const fs::path run = dir / ("run" + std::to_string(env.size()));
    const auto result =
        run_shell(env + " " + std::string(DLTRAIN_BINARY) + " train --device cpu --config " +
                  config.string() + " --run-dir " + run.string() + " --threads 1 --deadline none");
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(run / "metrics.jsonl");
    std::string line;
    std::getline(in, line);
    return nlohmann::json::parse(line).value("blas", std::string("<none>"));
}

// OpenBLAS's own pick on this CPU, as its loader reports it (OPENBLAS_VERBOSE=2 prints
// "Core: NAME" once per load; the first is the pick before any restart). This test process
// cannot ask its own OpenBLAS: it may itself run under a user's OPENBLAS_CORETYPE.
std::string openblas_own_pick() {
    const auto result = run_shell("env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 " +
                                  std::string(DLTRAIN_BINARY) + " --version");
    const std::string marker = "Core: ";
    const auto at = result.output.find(marker);
    if (at == std::string::npos) {
        return blas_core(); // a build without the verbose line: this process's pick
    }
    const auto end = result.output.find('\n', at);
    return result.output.substr(at + marker.size(), end - at - marker.size());
}

// The run says which kernels it used: the better set where OpenBLAS's own pick is a weak one,
// else that pick; and a user's choice as given.
TEST(BlasCore, DltrainRunsTheBetterKernelsAndSaysWhich) {
    dl_test::TempDir dir;
    const std::string picked = openblas_own_pick();
    ASSERT_FALSE(picked.empty());
    const std::string better = better_blas_core(picked);
    const std::string expected = better.empty() ? picked : better;
    EXPECT_EQ(lower(start_blas(dir.path(), "env -u OPENBLAS_CORETYPE")), lower(expected));
    EXPECT_EQ(lower(start_blas(dir.path(), "OPENBLAS_CORETYPE=Haswell")), "haswell");
}

} // namespace
} // namespace dl
