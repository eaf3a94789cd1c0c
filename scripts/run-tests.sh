#!/usr/bin/env bash
# README command (2): install what is missing, build with warnings as errors, run every test.
# .ci/run calls exactly this.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build-tests

"$root/scripts/setup.sh"
# Without a GPU the CUDA code is only compiled, to check it builds: one architecture (sm_90) is
# enough for that, and nvcc's five default ones took most of a 2-core CI build's CUDA time. With
# a GPU the default architectures stay, so the gpu tests run on whatever GPU this is.
cuda_archs=()
if ! nvidia-smi -L >/dev/null 2>&1; then
    cuda_archs=(-DDLJOB_CUDA_ARCHITECTURES=90)
fi
# Each target's sources are compiled eight to a batch (CMAKE_UNITY_BUILD): every header is
# parsed once per batch instead of once per file, less than half the CPU time of a fresh build
# (docs/benchmarks.md, "CI time"). clang-tidy still sees one command per file (scripts/lint.sh).
"$root/scripts/build.sh" "$build_dir" -DDLJOB_WARNINGS_AS_ERRORS=ON -DDLJOB_BUILD_TESTS=ON \
    -DCMAKE_UNITY_BUILD=ON "${cuda_archs[@]}"
cd "$build_dir"
# Two tests per core: much of the integration tests' time is waiting (on slurmctld's scheduling,
# a walltime, a grace period) and the release test's on the Debian mirror, so one per core left
# cores idle; the two that use every core say so (PROCESSORS) and get two slots each.
ctest --output-on-failure -j "$(($(nproc) * 2))" --timeout 1500
