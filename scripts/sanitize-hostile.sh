#!/usr/bin/env bash
# dltrain under AddressSanitizer and UndefinedBehaviorSanitizer, on the inputs that once crashed
# or misread it: builds dltrain alone with -fsanitize=address,undefined (at -O0, each CPU
# function once: what is checked is what dltrain does with its inputs, not its speed), then runs
# the engine tests that hand dltrain hostile or damaged input (the corpus in tests/engine/hostile,
# labels, databases, weights, mean files, packs) against that dltrain. A sanitizer's report is an
# exit status of its own (86, 87), so a test that expects dltrain's exit 3 fails on it even when
# the message looks right. ctest runs it (sanitize.hostile_inputs).
#
#   scripts/sanitize-hostile.sh BUILD_DIR ENGINE_TESTS
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:?usage: $0 BUILD_DIR ENGINE_TESTS}
engine_tests=${2:?usage: $0 BUILD_DIR ENGINE_TESTS}

cmake -S "$root" -B "$build_dir" -G Ninja -DDLJOB_BUILD_TESTS=OFF -DDLJOB_CUDA=OFF \
    -DDLJOB_MPI=OFF -DDLJOB_SANITIZE=address,undefined -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" \
    -DCMAKE_CXX_FLAGS=-DDL_CPU_NO_CLONES >/dev/null
cmake --build "$build_dir" --target dltrain

# Leaks count too: every path out of dltrain, errors included, frees what it took.
export ASAN_OPTIONS=exitcode=86:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:exitcode=87:print_stacktrace=1
export DLTRAIN_BINARY=$build_dir/engine/dltrain
suites=(
    'Corpus/HostileInputs.*' 'LabelLimits.*' 'LmdbReader.*' 'LeveldbReader.*' 'CaffeModel.*'
    'PackReader.*' 'CifarReader.*' 'MemoryLimit.*' 'FloatDatums.*' 'Dltrain.*' 'DltrainThreads.*'
)
filter=$(IFS=:; echo "${suites[*]}")
exec "$engine_tests" --gtest_filter="$filter" --gtest_brief=1
