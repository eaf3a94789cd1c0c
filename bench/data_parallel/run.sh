#!/bin/sh
# Data-parallel dltrain on this machine: LeNet on Fashion-MNIST, 2 ranks x 1 thread (batch 32
# each, under mpirun.openmpi) against 1 rank x 2 threads (batch 64), the same global batch of 64
# and the same number of steps, alternated `--rounds` times. The 2 ranks run three times per
# round: with one gradient bucket (DLTRAIN_BUCKET_MB=0, the sum after the whole backward pass),
# with buckets (DLTRAIN_BUCKET_MB=--bucket-mb, 1 by default here: LeNet in 2; the sums start
# during the backward pass, tested between layers), and with buckets and MPI's progress thread
# (DLTRAIN_MPI_PROGRESS=thread: the sums also move during a layer). Prints
# per run: train images/s (of the global batch), the exchange time per step (a sum in flight,
# packing and unpacking: dltrain's allreduce_s) and the part of it the step waited for
# (allreduce_wait_s; the rest was hidden behind the backward pass), and the ratio 2 ranks /
# 1 rank. The target (docs/data-parallel.md): 2 ranks reach 90% of one rank's throughput.
#
#   bench/data_parallel/run.sh [--iters N] [--rounds N] [--bucket-mb MB] [--dltrain PATH]
#                              [--data-dir DIR]
#
# By default dltrain is the README's build (build/, Release), built here if missing; its MPI
# plugins are built with it when libopenmpi-dev is installed (scripts/setup.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=1000
rounds=3
bucket_mb=1
dltrain=
data_dir=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
    case $1 in
    --iters) iters=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --bucket-mb) bucket_mb=$2; shift 2 ;;
    --dltrain) dltrain=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    *) echo "usage: $0 [--iters N] [--rounds N] [--bucket-mb MB] [--dltrain PATH] [--data-dir DIR]" >&2; exit 2 ;;
    esac
done
if [ -z "$dltrain" ]; then
    dltrain=$root/build/engine/dltrain
    "$root/scripts/build.sh" "$root/build" -DDLJOB_BUILD_TESTS=OFF >/dev/null
fi
[ -x "$dltrain" ] || { echo "no dltrain at $dltrain" >&2; exit 2; }
[ -f "$(dirname "$dltrain")/libdltrain-mpi-openmpi.so" ] ||
    { echo "no Open MPI plugin next to $dltrain (apt install libopenmpi-dev, rebuild)" >&2; exit 2; }
command -v mpirun.openmpi >/dev/null || { echo "mpirun.openmpi missing (apt install openmpi-bin)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# LeNet as shipped, with batch B per rank, no test pass and no checkpoint until the end.
config() { # batch file
    sed -e "s/batch_size: 64/batch_size: $1/" -e 's/test_interval: 500/test_interval: 1000000/' \
        -e 's/display: 100/display: 100/' -e 's/snapshot: 5000/snapshot: 0/' \
        -e 's/test_iter: 100/test_iter: 1/' "$root/recipes/networks/lenet.yaml" > "$2"
}
config 64 "$work/one.yaml"
config 32 "$work/two.yaml"
# Open MPI as root in a container, ranks free to share the two cores; one BLAS thread per rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

echo "machine: $(getconf _NPROCESSORS_ONLN) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "dltrain: $("$dltrain" --version); $iters steps of a global batch of 64; $(mpirun.openmpi --version | head -1)"
round=1
while [ "$round" -le "$rounds" ]; do
    "$dltrain" train --device cpu --threads 2 --deadline none --config "$work/one.yaml" \
        --run-dir "$work/one_$round" --data-dir "$data_dir" --max-iter "$iters" >/dev/null
    for variant in one buckets thread; do
        mb=$bucket_mb progress=none
        [ "$variant" = one ] && mb=0
        [ "$variant" = thread ] && progress=thread
        DLTRAIN_BUCKET_MB=$mb DLTRAIN_MPI_PROGRESS=$progress mpirun.openmpi --oversubscribe \
            --bind-to none -n 2 "$dltrain" train --device cpu --threads 1 --deadline none \
            --config "$work/two.yaml" --run-dir "$work/two_${variant}_$round" \
            --data-dir "$data_dir" --max-iter "$iters" >/dev/null
    done
    round=$((round + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# The sum alone, between barriers (no rank's compute or preemption in it): the model's check.
timer=$(dirname "$dltrain")/dltrain-allreduce-time
if [ -x "$timer" ]; then
    mpirun.openmpi --oversubscribe --bind-to none -n 2 "$timer"
    if command -v mpiexec.mpich >/dev/null; then mpiexec.mpich -n 2 "$timer"; fi
fi

/usr/bin/python3 - "$work" "$rounds" "$iters" "$bucket_mb" <<'PY'
import json, sys
work, rounds, iters, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def lines(run):
    return [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl") if l.strip()]
buckets = lines("two_buckets_1")[0].get("buckets", 1)
variants = [("one", "1 bucket"), ("buckets", f"{buckets} buckets"),
            ("thread", f"{buckets} b.+thread")]
print(f"2 ranks x 1 thread: 1 bucket; {buckets} buckets of DLTRAIN_BUCKET_MB={mb}; the same with "
      "DLTRAIN_MPI_PROGRESS=thread. Per step: exchange ms (a sum in flight, packing, unpacking) "
      "/ waited ms (the part not hidden behind the backward pass)")
print(f"{'round':>5} {'1x2 img/s':>10}" + "".join(f" {what:>15} {'ratio':>5} {'ms/waited':>11}"
                                                   for _, what in variants))
ratios = {v: [] for v, _ in variants}
for r in range(1, rounds + 1):
    one = lines(f"one_{r}")[-1]
    row = f"{r:5} {one['train_images_per_s']:10.0f}"
    for v, _ in variants:
        two = lines(f"two_{v}_{r}")[-1]
        ratio = two["train_images_per_s"] / one["train_images_per_s"]
        ratios[v].append(ratio)
        ms = 1000 * two["allreduce_s"] / iters
        wait = 1000 * two.get("allreduce_wait_s", two["allreduce_s"]) / iters
        row += f" {two['train_images_per_s']:15.0f} {ratio:5.2f} {ms:5.2f}/{wait:5.2f}"
    print(row)
for v, what in variants:
    values = sorted(ratios[v])
    print(f"median ratio 2 ranks ({what}) / 1 rank: {values[len(values) // 2]:.2f} (target >= 0.90)")
PY
