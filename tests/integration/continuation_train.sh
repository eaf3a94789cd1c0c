#!/usr/bin/env bash
# continuation_train.sh: the README's LeNet on Fashion-MNIST through the local site with a
# walltime that leaves about ten seconds per job (the 60 s checkpoint warning comes 10 s in), so
# dltrain is warned, checkpoints and exits 75 again and again, and dljob continues it until it
# completes. (A second would do on a quiet machine. Five were too few under the integration tests
# alone at ctest -j4 on 2 cores: two attempts in a row were warned before their first step,
# which reads as no progress and ends the chain.) On the CPU a resumed run is bit
# for bit an unbroken one, so the chain's final checkpoint must equal, byte for byte, that of one
# straight `dltrain train` of the same length.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
: "${DLTRAIN:?DLTRAIN must name the dltrain binary}"
root=$(cd "$HERE/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no $data (scripts/setup.sh installs it)"; exit 77; }
# One thread and enough iterations that even a fast BLAS (about 75 iterations a second on one
# core) needs two ten-second attempts or more; with two threads 400 iterations fitted in one.
iters=1200
# On the CPU (resources.gpus=0): the recipe asks for a GPU, which `local` has only where this
# machine does, and the byte-for-byte claims below are the CPU's.
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" --site local --set resources.gpus=0 \
  --set train.max_iter=$iters --set train.threads=1 --set resources.walltime=00:01:10 --set checkpoint.signal_margin=60 \
  --wait 2>"$WORK/submit.err") || true
echo "$out" | grep -v RUNNING
"$DLJOB" status --all --json >"$WORK/all.json"
read -r attempts last_state run_dir < <(python3 -c '
import json, sys
jobs = sorted([json.loads(l) for l in open(sys.argv[1])], key=lambda j: j["attempt"])
print(len(jobs), jobs[-1]["state"], jobs[-1]["run_dir"])' "$WORK/all.json")
check "the chain took more than one job" 1 "$([ "$attempts" -gt 1 ] && echo 1 || echo 0)"
check "its last attempt COMPLETED" COMPLETED "$last_state"
check "submit --wait followed it to the end" 1 "$(echo "$out" | grep -c "^job [0-9]*: COMPLETED")"
"$DLTRAIN" train --config "$root/recipes/networks/lenet.yaml" --run-dir "$WORK/straight" \
  --data-dir "$data" --device cpu --max-iter $iters --threads 1 --deadline none >/dev/null
ckpt=checkpoints/iter_$(printf '%08d' $iters).ckpt
check "the continued chain's final checkpoint equals an unbroken run's, byte for byte" 0 \
  "$(cmp -s "$run_dir/$ckpt" "$WORK/straight/$ckpt"; echo $?)"
echo "$attempts attempts; final: $(tail -n 1 "$run_dir/metrics.jsonl")"
finish
