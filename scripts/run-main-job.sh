#!/usr/bin/env bash
# README command (1): install what is missing, build, and run the main job: Caffe's LeNet on
# Fashion-MNIST (Debian's dataset-fashion-mnist), submitted through the built-in `local` site,
# with progress shown while it trains and the job listed by `dljob status` at the end.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build

"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$build_dir" -DDLJOB_BUILD_TESTS=OFF
dljob=$build_dir/src/dljob

echo
echo "== dljob submit recipes/fashion-mnist.yaml --site local --wait"
status=0
"$dljob" submit "$root/recipes/fashion-mnist.yaml" --site local --wait || status=$?
echo
echo "== dljob status"
"$dljob" status --all
exit "$status"
