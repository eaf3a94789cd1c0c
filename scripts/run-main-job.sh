#!/usr/bin/env bash
# README command (1): install what is missing, build, and run the main job: Caffe's LeNet on
# Fashion-MNIST (Debian's dataset-fashion-mnist), submitted through the built-in `local` site,
# with progress shown while it trains and the job listed by `dljob status` at the end.
# On this machine's CPUs (--set resources.gpus=0): the recipe asks a cluster for one GPU, and a
# job that asks for a GPU trains on one or does not start, while this machine may have none.
# In 1G (--set resources.memory=1G; LeNet's training takes about 110 MB): the recipe's 8G is a
# cluster node's share, and `local` refuses more than this machine has.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build

"$root/scripts/setup.sh"
# A first build compiles each target's sources in batches (CMAKE_UNITY_BUILD): about half the
# CPU time of one file at a time (docs/benchmarks.md, "CI time").
"$root/scripts/build.sh" "$build_dir" -DDLJOB_BUILD_TESTS=OFF -DCMAKE_UNITY_BUILD=ON
dljob=$build_dir/src/dljob

echo
echo "== dljob submit recipes/fashion-mnist.yaml --site local --set resources.gpus=0 --set resources.memory=1G --wait"
status=0
"$dljob" submit "$root/recipes/fashion-mnist.yaml" --site local --set resources.gpus=0 \
    --set resources.memory=1G --wait || status=$?
echo
echo "== dljob status"
"$dljob" status --all
exit "$status"
