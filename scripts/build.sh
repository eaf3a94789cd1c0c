#!/usr/bin/env bash
# Configures and builds dljob and dltrain. Used by the README's commands and by CI.
#
#   scripts/build.sh [BUILD_DIR] [extra cmake arguments...]
#
# BUILD_DIR defaults to build/. Parallelism follows the machine (ninja's default).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-$root/build}
shift || true
cmake -S "$root" -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir"
