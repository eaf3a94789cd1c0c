#!/bin/sh
# LeNet on Fashion-MNIST: dltrain against a PyTorch script of the same network, initialisation,
# solver (Caffe's rule and inv policy), data order and batch size, on the same threads, in one run.
# Prints images/s of both and the ratio, test accuracy, data wait fraction and peak RSS.
#
#   bench/lenet_cpu/run.sh [--iters N] [--threads N] [--dltrain PATH] [--data-dir DIR]
#
# By default it measures exactly the dltrain users get: the one README command 1 builds
# (scripts/build.sh into build/, the default Release configuration), built here if missing.
#
# PyTorch gets its best settings on a small shared machine: OMP_WAIT_POLICY=PASSIVE (no spinning
# OpenMP waits) and OPENBLAS_NUM_THREADS=1 (no nested BLAS threads). Debian's python3-torch is
# importable from /usr/bin/python3 only (scripts/setup.sh --bench installs it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=10000
threads=2
dltrain=
data_dir=/usr/share/datasets/fashion-mnist
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
    # The same configure and build as README command 1 (scripts/run-main-job.sh).
    "$root/scripts/build.sh" "$root/build" -DDLJOB_BUILD_TESTS=OFF >/dev/null
fi
[ -x "$dltrain" ] || { echo "no dltrain at $dltrain" >&2; exit 2; }
# The PyTorch twin reads its training data in the order the shipped config asks dltrain for.
order=$(grep -q '^ *shuffle: true' "$root/recipes/networks/lenet.yaml" && echo --shuffle || echo --no-shuffle)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dltrain: $iters iterations, $threads threads: $("$dltrain" --version)"
/usr/bin/time -v -o "$work/dltrain.time" "$dltrain" train --config "$root/recipes/networks/lenet.yaml" \
    --run-dir "$work/run" --data-dir "$data_dir" --threads "$threads" --max-iter "$iters" \
    --deadline none
echo "pytorch: $iters iterations, $threads threads"
OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 /usr/bin/time -v -o "$work/torch.time" \
    /usr/bin/python3 "$here/lenet_torch.py" --iters "$iters" --threads "$threads" "$order" \
    --data-dir "$data_dir" > "$work/torch.jsonl"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def final(path):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    return [l for l in lines if l["type"] == "final"][-1], lines
def rss_mb(path):
    for line in open(path):
        if "Maximum resident set size" in line:
            return int(line.split(":")[1]) / 1024
d, d_lines = final(f"{work}/run/metrics.jsonl")
t, _ = final(f"{work}/torch.jsonl")
waits = [l["data_wait_fraction"] for l in d_lines if l["type"] == "train"]
print(f"{'':24}{'dltrain':>12}{'pytorch':>12}")
print(f"{'train images/s':24}{d['train_images_per_s']:12.0f}{t['train_images_per_s']:12.0f}")
print(f"{'test accuracy':24}{d['test_accuracy']:12.4f}{t['test_accuracy']:12.4f}")
print(f"{'peak RSS (MB)':24}{rss_mb(f'{work}/dltrain.time'):12.1f}{rss_mb(f'{work}/torch.time'):12.1f}")
print(f"{'wall (s)':24}{d['wall_s']:12.1f}{t['wall_s']:12.1f}")
print(f"dltrain data wait fraction: max {max(waits):.2e}, mean {sum(waits)/len(waits):.2e}")
print(f"ratio dltrain/pytorch images/s: {d['train_images_per_s'] / t['train_images_per_s']:.2f}")
PY
