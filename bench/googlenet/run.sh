#!/bin/sh
# BVLC GoogLeNet (recipes/networks/bvlc_googlenet/train_val.prototxt, Caffe's own file) on the
# CPU: dltrain against its PyTorch twin (googlenet_torch.py: the same file read layer by layer,
# the same batch, crop, mirror, mean and SGD), on the same threads, one after the other, on an
# LMDB of random 3x256x256 images with ImageNet's 1,000 labels. Prints training images/s of both
# and the ratio.
#
#   bench/googlenet/run.sh [--iters N] [--batch N] [--threads N] [--dltrain PATH]
#
# --iters (default 10) timed iterations at --batch (default 16; the file's is 32); dltrain's
# figure is its run's own train_images_per_s (every step, the first included), PyTorch's over
# the steps after 2 warm-up ones. By default dltrain is the one README command 1 builds (build/).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=10
batch=16
threads=2
dltrain=
while [ $# -gt 0 ]; do
    case $1 in
    --iters) iters=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dltrain) dltrain=$2; shift 2 ;;
    *) echo "usage: $0 [--iters N] [--batch N] [--threads N] [--dltrain PATH]" >&2; exit 2 ;;
    esac
done
if [ -z "$dltrain" ]; then
    dltrain=$root/build/engine/dltrain
    "$root/scripts/build.sh" "$root/build" -DDLJOB_BUILD_TESTS=OFF >/dev/null
fi
[ -x "$dltrain" ] || { echo "no dltrain at $dltrain" >&2; exit 2; }
dltrain=$(cd "$(dirname "$dltrain")" && pwd)/$(basename "$dltrain") # it runs from the LMDB's root
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The LMDB where the net's Data layer names it, relative to the folder dltrain runs in (Caffe's
# root, for Caffe's tools): 64 images, written as tests/engine/bvlc_train.py writes its own.
/usr/bin/python3 - "$work" "$root" <<'PY'
import os, random, sys
sys.path.insert(0, os.path.join(sys.argv[2], "tests", "engine"))
from bvlc_train import write_lmdb
write_lmdb(os.path.join(sys.argv[1], "examples/imagenet/ilsvrc12_train_lmdb"), (3, 256, 256, 1000),
           random.Random(1701), records=64)
PY
config=$root/recipes/networks/bvlc_googlenet/train_val.prototxt

echo "machine: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dltrain: $iters iterations at batch $batch, $threads threads: $("$dltrain" --version)"
(cd "$work" && "$dltrain" train --device cpu --config "$config" --run-dir "$work/run" \
    --threads "$threads" --max-iter "$iters" --deadline none --solver test_iter=0 \
    --solver "batch_size=$batch" --solver base_lr=0.01 --solver momentum=0.9 \
    --solver weight_decay=0.0002 --solver display=5 >/dev/null)
echo "load between: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pytorch: $iters iterations at batch $batch, $threads threads"
OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$here/googlenet_torch.py" \
    --iters "$iters" --batch-size "$batch" --threads "$threads" \
    --lmdb "$work/examples/imagenet/ilsvrc12_train_lmdb" > "$work/torch.jsonl"
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
