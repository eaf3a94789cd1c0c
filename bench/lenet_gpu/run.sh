#!/bin/sh
# LeNet on Fashion-MNIST on one GPU: dltrain's CUDA backend against PyTorch running the same
# network, initialisation, solver (Caffe's SGD rule and inv policy, not torch.optim.SGD) and data
# order (bench/lenet_cpu/lenet_torch.py --device cuda), at batch 64 and batch 256, in one run, in
# two forms: PyTorch eager, and PyTorch with the whole step captured in one CUDA graph (--graph,
# the strongest form a PyTorch user could write for this network).
# Prints the GPU, images/s of both and the ratio, training time and wall time of the whole job
# (for dltrain also from process start to exit, and what the run's final line says it spent on
# set-up, the first step, tests and checkpoints), and test accuracy.
#
#   bench/lenet_gpu/run.sh [--iters N] [--device cuda:N] [--dltrain PATH] [--data-dir DIR]
#                          [--batches "64 256"] [--dltrain-only]
#
# PYTHON: the interpreter for the PyTorch side (default /usr/bin/python3). Debian's python3-torch
# is a CPU-only build; on the GPU machine point PYTHON at a python whose torch has CUDA, e.g.
#   PYTHON=/opt/venv/bin/python bench/lenet_gpu/run.sh
# Without one, only dltrain is measured and the PyTorch column says why.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=10000
device=cuda:0
batches="64 256"
dltrain=$root/build-engine/engine/dltrain
data_dir=/usr/share/datasets/fashion-mnist
python=${PYTHON:-/usr/bin/python3}
dltrain_only=0
while [ $# -gt 0 ]; do
    case $1 in
    --iters) iters=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --dltrain) dltrain=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --dltrain-only) dltrain_only=1; shift ;;
    *) echo "usage: $0 [--iters N] [--device cuda:N] [--dltrain PATH] [--data-dir DIR] [--batches \"64 256\"] [--dltrain-only]" >&2
       exit 2 ;;
    esac
done
[ -x "$dltrain" ] || { echo "no dltrain at $dltrain (cmake -DDLJOB_CUDA=ON; ninja dltrain)" >&2; exit 2; }
# The PyTorch twin reads its training data in the order the shipped config asks dltrain for.
order=$(grep -q '^ *shuffle: true' "$root/recipes/networks/lenet.yaml" && echo --shuffle || echo --no-shuffle)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$dltrain" device-query
if ! "$dltrain" device-query | grep -q '^GPU '; then
    echo "no GPU visible to dltrain: nothing to measure" >&2
    exit 1
fi
torch_status="not run (--dltrain-only)"
[ "$dltrain_only" = 1 ] || torch_status=$("$python" -c 'import torch; print("ok" if torch.cuda.is_available() else
    "torch " + torch.__version__ + " at '"$python"' is a CPU-only build: set PYTHON to a python with CUDA torch")' 2>&1 || true)
echo "pytorch: $torch_status"

for batch in $batches; do
    sed "s/batch_size: 64/batch_size: $batch/" "$root/recipes/networks/lenet.yaml" > "$work/lenet_$batch.yaml"
    echo "dltrain: batch $batch, $iters iterations on $device"
    started=$(date +%s.%N)
    "$dltrain" train --config "$work/lenet_$batch.yaml" --run-dir "$work/dltrain_$batch" \
        --data-dir "$data_dir" --device "$device" --max-iter "$iters" --deadline none
    # The target's clock: from process start to exit, what a user waits for.
    echo "$started $(date +%s.%N)" | awk '{ printf "%.3f\n", $2 - $1 }' > "$work/process_$batch.s"
    if [ "$torch_status" = ok ]; then
        echo "pytorch: batch $batch, $iters iterations on $device"
        "$python" "$root/bench/lenet_cpu/lenet_torch.py" --device "$device" --iters "$iters" \
            --batch-size "$batch" "$order" --data-dir "$data_dir" > "$work/torch_$batch.jsonl"
        echo "pytorch, step in one CUDA graph: batch $batch, $iters iterations on $device"
        "$python" "$root/bench/lenet_cpu/lenet_torch.py" --device "$device" --iters "$iters" \
            --batch-size "$batch" "$order" --data-dir "$data_dir" --graph > "$work/graph_$batch.jsonl"
    fi
done

"$python" - "$work" "$iters" "$batches" "$torch_status" <<'PY'
import json, os, sys
work, iters, batches, torch_status = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
def final(path):
    if not os.path.exists(path):
        return None
    lines = [json.loads(l) for l in open(path) if l.strip()]
    return [l for l in lines if l["type"] == "final"][-1]
start = json.loads(open(f"{work}/dltrain_{batches[0]}/metrics.jsonl").readline())
print(f"\nGPU: {start['device']}   iterations: {iters}")
print(f"{'batch':>6} {'':10} {'images/s':>12} {'train s':>9} {'wall s':>8} {'test acc':>9}")
for b in batches:
    d = final(f"{work}/dltrain_{b}/metrics.jsonl")
    t = final(f"{work}/torch_{b}.jsonl")
    d_train = iters * int(b) / d["train_images_per_s"]
    lines = [json.loads(l) for l in open(f"{work}/dltrain_{b}/metrics.jsonl") if l.strip()]
    waits = [l["data_wait_fraction"] for l in lines if l["type"] == "train" and "data_wait_fraction" in l]
    print(f"{b:>6} {'dltrain':10} {d['train_images_per_s']:12.0f} {d_train:9.2f} {d['wall_s']:8.2f} {d['test_accuracy']:9.4f}"
          f"   data wait: mean {sum(waits) / max(len(waits), 1):.2e}, max {max(waits, default=0):.2e} of step time")
    process_s = float(open(f"{work}/process_{b}.s").read())
    print(f"{b:>6} {'':10} process start to exit {process_s:.2f} s = run {d['wall_s']:.2f} s (setup {d.get('setup_s', 0):.2f},"
          f" first step {d.get('first_step_s', 0):.2f}, training {d_train:.2f}, tests {d.get('test_s', 0):.2f},"
          f" checkpoints {d.get('checkpoint_s', 0):.2f}) + {process_s - d['wall_s']:.2f} before and after it")
    g = final(f"{work}/graph_{b}.jsonl")
    for name, r in (("pytorch", t), ("pt graph", g)):
        if r:
            print(f"{b:>6} {name:10} {r['train_images_per_s']:12.0f} {r['train_s']:9.2f} {r['wall_s']:8.2f} {r['test_accuracy']:9.4f}")
    for name, r in (("eager", t), ("CUDA-graph", g)):
        if r:
            print(f"{b:>6} ratio dltrain/pytorch {name} images/s: {d['train_images_per_s'] / r['train_images_per_s']:.2f}"
                  f"   (pytorch on {r['device']}, torch {r['torch']})")
    if not t:
        print(f"{b:>6} {'pytorch':10} not measured: {torch_status}")
PY
