#!/usr/bin/env bash
# README command (1): install what is missing, build, and run the main job (LeNet on
# Fashion-MNIST through the `local` site).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build

"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$build_dir" -DDLJOB_BUILD_TESTS=OFF
echo
echo "Built $build_dir/src/dljob and $build_dir/engine/dltrain."
echo "The main job (dljob submit recipes/fashion-mnist.yaml) needs the engine and the local site,"
echo "which are not in this revision yet; see the issues in docs/ for progress."
exit 0
