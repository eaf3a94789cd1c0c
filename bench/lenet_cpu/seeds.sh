#!/bin/sh
# Test accuracy of LeNet on Fashion-MNIST after N iterations across initialisation seeds, for
# dltrain and for the PyTorch script of the same network and solver (bench/lenet_cpu/run.sh).
# One seed is one draw: this shows how far the shipped seed (1701) sits from the spread.
# Accuracy only; no timing is read from it, so it may run beside other work.
#
#   bench/lenet_cpu/seeds.sh [--iters N] [--threads N] [--dltrain PATH] SEED...
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=10000
threads=2
dltrain=$root/build-engine/engine/dltrain
data_dir=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
    case $1 in
    --iters) iters=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dltrain) dltrain=$2; shift 2 ;;
    --*) echo "usage: $0 [--iters N] [--threads N] [--dltrain PATH] SEED..." >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--iters N] [--threads N] [--dltrain PATH] SEED..." >&2; exit 2; }
[ -x "$dltrain" ] || { echo "no dltrain at $dltrain (ninja -C build-engine dltrain)" >&2; exit 2; }
# The PyTorch twin reads its training data in the order the shipped config asks dltrain for.
order=$(grep -q '^ *shuffle: true' "$root/recipes/networks/lenet.yaml" && echo --shuffle || echo --no-shuffle)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

final_accuracy() { # metrics.jsonl -> the final line's test accuracy
    /usr/bin/python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if l.strip() and json.loads(l)["type"]=="final"][-1]["test_accuracy"])' "$1"
}

echo "seed dltrain pytorch" > "$work/table"
for seed in "$@"; do
    sed "s/^  random_seed: .*/  random_seed: $seed/" "$root/recipes/networks/lenet.yaml" > "$work/lenet.yaml"
    grep -q "random_seed: $seed\$" "$work/lenet.yaml" || { echo "seed not set in config" >&2; exit 1; }
    "$dltrain" train --config "$work/lenet.yaml" --run-dir "$work/run-$seed" --data-dir "$data_dir" \
        --threads "$threads" --max-iter "$iters" --deadline none > /dev/null
    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$here/lenet_torch.py" \
        --iters "$iters" --threads "$threads" --seed "$seed" "$order" --data-dir "$data_dir" \
        > "$work/torch-$seed.jsonl"
    echo "$seed $(final_accuracy "$work/run-$seed/metrics.jsonl") $(final_accuracy "$work/torch-$seed.jsonl")" | tee -a "$work/table"
done
/usr/bin/python3 - "$work/table" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])][1:]
print("| seed | dltrain | PyTorch |")
print("|---:|---:|---:|")
for seed, d, t in rows:
    print(f"| {seed} | {float(d):.4f} | {float(t):.4f} |")
for name, column in (("dltrain", 1), ("PyTorch", 2)):
    values = [float(r[column]) for r in rows]
    spread = f", sd {statistics.stdev(values):.4f}" if len(values) > 1 else ""
    print(f"{name}: mean {statistics.mean(values):.4f}, min {min(values):.4f}, "
          f"max {max(values):.4f}{spread}, >= 0.90 in {sum(v >= 0.90 for v in values)} of {len(values)}")
PY
