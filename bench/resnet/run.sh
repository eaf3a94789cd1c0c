#!/bin/sh
# ResNet-20 on the CIFAR-shaped Fashion-MNIST: dltrain (recipes/networks/resnet20_cifar.yaml)
# against its PyTorch twin (resnet20_torch.py: the same network, batch 128, mean, mirror and SGD),
# on the same threads, one after the other. Prints training images/s of both and the ratio.
#
#   bench/resnet/run.sh [--iters N] [--threads N] [--dltrain PATH] [--data-dir DIR]
#
# --iters (default 100) timed iterations; dltrain's figure is its run's own train_images_per_s
# (every training step, the first included), PyTorch's over the steps after 5 warm-up ones. --data-dir: CIFAR-10
# binary batches, by default written by scripts/make-cifar-fashion-mnist.py from Debian's
# dataset-fashion-mnist. By default dltrain is the one README command 1 builds (build/).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=100
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
config=$root/recipes/networks/resnet20_cifar.yaml

echo "machine: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dltrain: $iters iterations, $threads threads: $("$dltrain" --version)"
"$dltrain" train --device cpu --config "$config" --run-dir "$work/run" --data-dir "$data_dir" \
    --threads "$threads" --max-iter "$iters" --deadline none --solver test_iter=0 \
    --solver display=20 >/dev/null
echo "load between: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pytorch: $iters iterations, $threads threads"
OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$here/resnet20_torch.py" \
    --iters "$iters" --threads "$threads" --data-dir "$data_dir" > "$work/torch.jsonl"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def final(path):
    return [json.loads(l) for l in open(path) if l.strip() and '"final"' in l][-1]
d = final(f"{work}/run/metrics.jsonl")
t = final(f"{work}/torch.jsonl")
print(f"{'':24}{'dltrain':>12}{'pytorch':>12}")
print(f"{'train images/s':24}{d['train_images_per_s']:12.1f}{t['train_images_per_s']:12.1f}")
print(f"dltrain / pytorch: {d['train_images_per_s'] / t['train_images_per_s']:.2f}x")
PY
