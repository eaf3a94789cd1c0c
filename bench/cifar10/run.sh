#!/bin/sh
# cifar10_quick on the CIFAR-shaped Fashion-MNIST: dltrain against a PyTorch script of the same
# network, solver (Caffe's rule, lr 0.001 then 0.0001 from iteration 4000), data order, mean and
# batch size, on the same threads, one after the other. Prints images/s of both and the ratio,
# test accuracy and peak RSS.
#
#   bench/cifar10/run.sh [--iters N] [--threads N] [--dltrain PATH] [--data-dir DIR]
#
# --iters defaults to Caffe's 5,000 (about half an hour per system on a quiet 2-core machine);
# shorter runs stop before the learning-rate step. --data-dir: CIFAR-10 binary batches; by
# default scripts/make-cifar-fashion-mnist.py writes them to a temporary directory first (Debian's
# dataset-fashion-mnist). By default dltrain is the one README command 1 builds (build/), built
# here if missing.
#
# PyTorch gets its best settings on a small shared machine: OMP_WAIT_POLICY=PASSIVE and
# OPENBLAS_NUM_THREADS=1. Debian's python3-torch is importable from /usr/bin/python3 only
# (scripts/setup.sh --bench installs it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=5000
threads=2
dltrain=
data_dir=
while [ $# -gt 0 ]; do
    case $1 in
    --iters) iters=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dltrain) dltrain=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    *) echo "usage: $0 [--iters N] [--threads N] [--dltrain PATH] [--data-dir DIR]" >&2; exit 2 ;;
    esac
done
if [ -z "$dltrain" ]; then
    dltrain=$root/build/engine/dltrain
    "$root/scripts/build.sh" "$root/build" -DDLJOB_BUILD_TESTS=OFF >/dev/null
fi
[ -x "$dltrain" ] || { echo "no dltrain at $dltrain" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$data_dir" ]; then
    data_dir=$work/data
    /usr/bin/python3 "$root/scripts/make-cifar-fashion-mnist.py" "$data_dir"
fi
# Debian's OpenBLAS 0.3.21 takes this VM's Xeon for "Cooperlake" and then runs its SSE3
# (Prescott) sgemm kernel; dltrain now picks the better kernels itself (dl/blas.hpp) and says
# which on its start line. PyTorch is left as a user runs it: its convolutions are oneDNN's, and
# forcing OpenBLAS's kernels changed its LeNet rate by 4%, within noise (docs/benchmarks.md).
config=$root/recipes/networks/cifar10_quick.yaml
# The PyTorch twin subtracts the mean the shipped config does.
mean=$(sed -n 's/^ *mean_value: *\([0-9.]*\) *$/\1/p' "$config" | head -1)

echo "machine: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo "dltrain: $iters iterations, $threads threads: $("$dltrain" --version)"
/usr/bin/time -v -o "$work/dltrain.time" "$dltrain" train --device cpu --config "$config" \
    --run-dir "$work/run" --data-dir "$data_dir" --threads "$threads" --max-iter "$iters" \
    --deadline none
echo "load between: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pytorch: $iters iterations, $threads threads, mean $mean"
OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 /usr/bin/time -v -o "$work/torch.time" \
    /usr/bin/python3 "$here/cifar10_quick_torch.py" --iters "$iters" --threads "$threads" \
    --mean "$mean" --data-dir "$data_dir" > "$work/torch.jsonl"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def final(path):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    return [l for l in lines if l["type"] == "final"][-1]
def stat(path, key):
    for line in open(path):
        if key in line:
            return line.split(": ")[1].strip()
d = final(f"{work}/run/metrics.jsonl")
t = final(f"{work}/torch.jsonl")
print(f"{'':24}{'dltrain':>12}{'pytorch':>12}")
print(f"{'train images/s':24}{d['train_images_per_s']:12.0f}{t['train_images_per_s']:12.0f}")
print(f"{'test accuracy':24}{d['test_accuracy']:12.4f}{t['test_accuracy']:12.4f}")
for key, label in (("Maximum resident set size", "peak RSS (MB)"),):
    print(f"{label:24}{int(stat(f'{work}/dltrain.time', key)) / 1024:12.1f}"
          f"{int(stat(f'{work}/torch.time', key)) / 1024:12.1f}")
print(f"{'CPU use (user+sys/wall)':24}{stat(f'{work}/dltrain.time', 'Percent of CPU'):>12}"
      f"{stat(f'{work}/torch.time', 'Percent of CPU'):>12}")
print(f"{'wall (s)':24}{d['wall_s']:12.1f}{t['wall_s']:12.1f}")
print(f"ratio dltrain/pytorch images/s: {d['train_images_per_s'] / t['train_images_per_s']:.2f}")
print(f"accuracy difference dltrain - pytorch: {d['test_accuracy'] - t['test_accuracy']:+.4f}")
PY
