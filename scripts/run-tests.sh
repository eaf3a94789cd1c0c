#!/usr/bin/env bash
# README command (2): install what is missing, build with warnings as errors, run every test.
# .ci/run calls exactly this.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build-tests

"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$build_dir" -DDLJOB_WARNINGS_AS_ERRORS=ON -DDLJOB_BUILD_TESTS=ON
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)" --timeout 1500
