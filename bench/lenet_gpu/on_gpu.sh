#!/bin/sh
# On a GPU machine that has CUDA, cuDNN and a CUDA PyTorch but not this project's build
# dependencies: unpacks build-gpu-bundle/ (made by bench/lenet_gpu/bundle.sh) and runs
#   tests   the engine's gpu-labelled ctest tests and the rest of the engine tests
#   bench     bench/lenet_gpu/run.sh (dltrain vs PyTorch, batch 64 and 256, 10,000 iterations)
#   sanitize  compute-sanitizer's memcheck, racecheck and synccheck over a short training run
#             (graph capture and replay, tests, checkpoint) and the gpu op and layer tests
#   opcheck   memcheck and racecheck over the gpu op and layer tests only (GpuOps, GpuLayers)
#   dp        data parallel on the one GPU: 1-rank NCCL parity, two ranks sharing it through MPI,
#             two ranks that meet through Gloo (no MPI) and sum over NCCL
#   profile   `dltrain time` per layer on the GPU at batch 64 and 256
#   kernels   Nsight Compute's time per kernel over a few training steps, and the step time at
#             batch 16 to 256 (where a step stops being bound by launches)
#   job       README's main job on the GPU: `dljob submit recipes/fashion-mnist.yaml --site local
#             --wait` (data from the bundle), then `dljob status --all` and the run's device
#   cifar     cifar10_quick on the GPU for --iters N iterations (default 5,000, Caffe's): dltrain
#             --device cuda against bench/cifar10/cifar10_quick_torch.py eager and with the whole
#             step in a CUDA graph, on the CIFAR-shaped Fashion-MNIST made here from the bundle's
#             fashion-mnist/ (scripts/make-cifar-fashion-mnist.py, NumPy not needed); images/s
#             and test accuracy side by side
#   all       a GPU round in one call (issue 38): tests, dp, cifar, bench and sanitize in turn,
#             each under its own time limit (together under the device's 600 s a call), each
#             one's whole output in $OUT/on_gpu/MODE.log (a temporary folder without $OUT), its
#             key lines as it ends, and a summary table at the end with the command that reruns
#             what failed or ran out of time: `all MODE...` runs only those
#
#   bench/lenet_gpu/on_gpu.sh tests|bench|sanitize|opcheck|dp|profile|kernels|job|cifar [arguments]
#   bench/lenet_gpu/on_gpu.sh all [MODE...]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
what=${1:?usage: $0 all [MODE...] | tests|bench|sanitize|opcheck|dp|profile|kernels|job|cifar [arguments]}
shift
bundle=$root/build-gpu-bundle
[ -f "$bundle/bundle.tar.gz" ] || { echo "no $bundle/bundle.tar.gz: run bench/lenet_gpu/bundle.sh and carry build-gpu-bundle" >&2; exit 2; }
name=$(cat "$bundle/BUILD_DIR")
# A real build of that name here (bundle.sh's own machine) is used as it is.
if [ ! -f "$root/$name/CMakeCache.txt" ]; then
    tar -C "$root" -xzf "$bundle/bundle.tar.gz"
fi
# Everything below is found relative to this checkout: the bundle unpacks into it, and the test
# binary is told where the sources and dltrain are (DLJOB_SOURCE_DIR, DLTRAIN_BINARY), so the
# bundle runs wherever it was built and wherever it is unpacked.
build=$root/$name
# cuBLAS and cuDNN of this machine: the toolkit's, or the ones PyTorch's wheels bring.
python=${PYTHON:-python3}
site=$("$python" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
libs=""
for lib in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
    # shellcheck disable=SC2086 # $site is a list of directories
    found=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu $site \
        -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] || { echo "warning: $lib not found on this machine" >&2; continue; }
    libs="$libs${libs:+:}$(dirname "$found")"
done
export DLJOB_GPU_LIBS="$libs"
echo "CUDA libraries from: $libs"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
"$build/engine/dltrain" device-query

# For the modes that run the bundle's binaries themselves rather than through the dltrain and
# dljob wrappers (not for bench: its PyTorch keeps its own libraries).
unwrapped_env() {
    export LD_LIBRARY_PATH="$build/lib:$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export DLTRAIN_CUDA_PLUGIN="$build/engine/libdltrain-cuda.so"
}

# The lines of a mode's log that say how it went, for `all`.
key_lines() {
    case $1 in
    tests) grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]|tests? ran' "$2" | tail -6 ;;
    dp) grep -E 'PASSED|FAILED|byte-identical|communicator|exit [0-9]|NCCL:' "$2" | tail -8 ;;
    cifar) grep -E 'images/s|accuracy|dltrain /' "$2" | tail -5 ;;
    bench) grep -E 'ratio|process start|dltrain +[0-9]|GPU:' "$2" | tail -8 ;;
    sanitize) grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$2" | tail -8 ;;
    *) tail -3 "$2" ;;
    esac
}

# Seconds each mode of `all` may take: together 570, under the device's 600 s for one call.
mode_limit() {
    case $1 in
    tests) echo 120 ;;
    dp) echo 80 ;;
    cifar) echo 140 ;;
    bench) echo 110 ;;
    sanitize) echo 120 ;;
    *) echo 120 ;;
    esac
}

case $what in
all)
    modes=${*:-tests dp cifar bench sanitize}
    logs=${OUT:-$(mktemp -d)}/on_gpu
    mkdir -p "$logs"
    summary=""
    rerun=""
    for mode in $modes; do
        limit=$(mode_limit "$mode")
        echo "== $mode (at most $limit s; log $logs/$mode.log)"
        started=$(date +%s)
        status=0
        timeout "$limit" "$0" "$mode" > "$logs/$mode.log" 2>&1 || status=$?
        took=$(($(date +%s) - started))
        key_lines "$mode" "$logs/$mode.log"
        case $status in
        0) verdict=ok ;;
        124) verdict="out of time"; rerun="$rerun $mode" ;;
        *) verdict="failed ($status)"; rerun="$rerun $mode" ;;
        esac
        summary="$summary$(printf '%-9s %-16s %4s s' "$mode" "$verdict" "$took")
"
    done
    echo
    echo "== summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
    printf '%s' "$summary"
    if [ -n "$rerun" ]; then
        echo "rerun: bench/lenet_gpu/on_gpu.sh all$rerun"
        exit 1
    fi
    ;;
tests)
    unwrapped_env
    # The test binary itself, not ctest: ctest's files name the directories of the build.
    # First the gpu suites (Gpu*, ctest label gpu), then every other engine test.
    export DLJOB_SOURCE_DIR="$root" DLTRAIN_BINARY="$build/engine/dltrain"
    status=0
    "$build/tests/dl_engine_tests" --gtest_filter='Gpu*' || status=$?
    "$build/tests/dl_engine_tests" --gtest_filter='-Gpu*' || status=$?
    exit "$status"
    ;;
bench)
    PYTHON=$python "$root/bench/lenet_gpu/run.sh" --dltrain "$build/engine/dltrain" \
        --data-dir "$bundle/fashion-mnist" "$@"
    ;;
sanitize)
    unwrapped_env
    work=$(mktemp -d)
    sed 's/test_interval: 500/test_interval: 20/; s/test_iter: 100/test_iter: 3/' \
        "$root/recipes/networks/lenet.yaml" > "$work/lenet.yaml"
    status=0
    # racecheck over cuDNN's and cuBLAS' kernels takes minutes; our kernels are all *_kernel.
    for tool in memcheck racecheck synccheck; do
        echo "compute-sanitizer --tool $tool: dltrain train, 60 iterations"
        filter=""
        [ "$tool" != racecheck ] || filter="--kernel-name kns=_kernel"
        # shellcheck disable=SC2086 # $filter is two words or none
        timeout 150 compute-sanitizer --tool "$tool" $filter --error-exitcode 9 \
            "$build/engine/dltrain.bin" train --config "$work/lenet.yaml" \
            --run-dir "$work/run_$tool" --data-dir "$bundle/fashion-mnist" --device cuda \
            --max-iter 60 --deadline none > "$work/$tool.log" 2>&1 || status=$?
        grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|========= (Invalid|Program hit|Race)' "$work/$tool.log" | head -20
        tail -3 "$work/$tool.log"
    done
    echo "compute-sanitizer --tool memcheck: GpuOps.*, GpuLayers.*"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/dl_engine_tests" \
        --gtest_filter='GpuOps.*:GpuLayers.*' > "$work/ops.log" 2>&1 || status=$?
    grep -E 'ERROR SUMMARY|========= Invalid|PASSED|FAILED' "$work/ops.log" | head -20
    rm -rf "$work"
    exit "$status"
    ;;
dp)
    # Data parallel on the one GPU: the GpuDataParallel tests (1-rank NCCL parity; two ranks
    # sharing the GPU through MPI with host staging), then a 1-rank NCCL training against the
    # same training without it.
    unwrapped_env
    export DLJOB_SOURCE_DIR="$root" DLTRAIN_BINARY="$build/engine/dltrain"
    # shellcheck disable=SC2086 # $site is a list of directories
    nccl=$(find $site /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu -name libnccl.so.2 2>/dev/null | head -1)
    export DLTRAIN_NCCL_LIBRARY="$nccl"
    echo "NCCL: ${nccl:-not found}"
    # The machine's own Open MPI for the MPI plugin (the bundle carries the plugin, not libmpi).
    if command -v mpirun >/dev/null; then
        mpi_lib=$(dirname "$(readlink -f "$(command -v mpirun)")")/../lib
        export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$mpi_lib"
        mpirun --version 2>&1 | head -1
    fi
    status=0
    "$build/tests/dl_engine_tests" --gtest_filter='GpuDataParallel.*:DataParallelComm.*:MpiPlugin.*' ||
        status=$?
    work=$(mktemp -d)
    for comm in single nccl; do
        if [ "$comm" = nccl ]; then export DLTRAIN_COMM=nccl; else unset DLTRAIN_COMM; fi
        "$build/engine/dltrain" train \
            --device cuda --config "$root/recipes/networks/lenet.yaml" --data-dir "$bundle/fashion-mnist" \
            --run-dir "$work/$comm" --max-iter 500 --deadline none | tail -1
    done
    head -1 "$work/nccl/metrics.jsonl" | grep -o '"communicator":"[^"]*"'
    if cmp "$work/single/checkpoints/iter_00000500.ckpt" "$work/nccl/checkpoints/iter_00000500.ckpt"; then
        echo "1-rank NCCL: checkpoint byte-identical to the run without it"
    fi
    # Two ranks that meet through Gloo, with no MPI (DLTRAIN_RANK, a rendezvous directory: a
    # Spark executor's way, issue 37) and sum over NCCL, whose unique id goes through Gloo. Both
    # on the one GPU: where this NCCL refuses two ranks on one device ("Duplicate GPU"), what ran
    # is the bootstrap up to ncclCommInitRank, and the logs say so.
    if [ -f "$build/engine/libdltrain-gloo.so" ]; then
        mkdir -p "$work/rendezvous"
        pids=""
        for rank in 0 1; do
            DLTRAIN_RANK=$rank DLTRAIN_WORLD_SIZE=2 DLTRAIN_RENDEZVOUS="$work/rendezvous" \
                DLTRAIN_COMM=nccl timeout 180 "$build/engine/dltrain" train --device cuda \
                --config "$root/recipes/networks/lenet.yaml" --data-dir "$bundle/fashion-mnist" \
                --run-dir "$work/gloo-nccl" --max-iter 200 --deadline none >"$work/gloo-nccl.$rank.log" 2>&1 &
            pids="$pids $!"
        done
        gloo_status=0
        for pid in $pids; do wait "$pid" || gloo_status=$?; done
        echo "Gloo-bootstrapped NCCL, 2 ranks on one GPU: exit $gloo_status"
        tail -3 "$work/gloo-nccl.0.log" "$work/gloo-nccl.1.log"
        head -1 "$work/gloo-nccl/metrics.jsonl" 2>/dev/null | grep -o '"communicator":"[^"]*"'
    else
        echo "Gloo-bootstrapped NCCL: not run (no libdltrain-gloo.so in the bundle)"
    fi
    rm -rf "$work"
    exit "$status"
    ;;
opcheck)
    # The quick part of sanitize: memcheck and racecheck over the op and layer tests only.
    unwrapped_env
    export DLJOB_SOURCE_DIR="$root" DLTRAIN_BINARY="$build/engine/dltrain"
    status=0
    for tool in memcheck racecheck; do
        echo "compute-sanitizer --tool $tool: GpuOps.*, GpuLayers.*"
        filter=""
        [ "$tool" != racecheck ] || filter="--kernel-name kns=_kernel" # our kernels, not cuDNN's
        # shellcheck disable=SC2086 # $filter is two words or none
        timeout 100 compute-sanitizer --tool "$tool" $filter --error-exitcode 9 \
            "$build/tests/dl_engine_tests" --gtest_filter='GpuOps.*:GpuLayers.*' > "/tmp/$tool.log" 2>&1 ||
            status=$?
        grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|========= (Invalid|Program hit|Race)|PASSED|FAILED' "/tmp/$tool.log" | head -12
    done
    exit "$status"
    ;;
profile)
    for batch in 64 256; do
        sed "s/batch_size: 64/batch_size: $batch/" "$root/recipes/networks/lenet.yaml" > "/tmp/lenet_$batch.yaml"
        "$build/engine/dltrain" time --config "/tmp/lenet_$batch.yaml" --device cuda --iterations 200
    done
    ;;
kernels)
    unwrapped_env
    work=$(mktemp -d)
    ncu=$(command -v ncu || find /opt/nvidia/nsight-compute -name ncu -type f 2>/dev/null | head -1)
    for batch in 16 32 64 128 256; do
        sed "s/batch_size: 64/batch_size: $batch/; s/test_interval: 500/test_interval: 100000/" \
            "$root/recipes/networks/lenet.yaml" > "$work/lenet_$batch.yaml"
        "$build/engine/dltrain.bin" train --config "$work/lenet_$batch.yaml" \
            --run-dir "$work/run_$batch" --data-dir "$bundle/fashion-mnist" --device cuda \
            --max-iter 3000 --deadline none > /dev/null 2>&1
        tail -1 "$work/run_$batch/metrics.jsonl" | "$python" -c '
import json, sys
batch, rate = int(sys.argv[1]), json.load(sys.stdin)["train_images_per_s"]
print(f"batch {batch}: {rate:.0f} images/s, {1e6 * batch / rate:.0f} us a step")' "$batch"
    done
    # Steps 100-102 at batch 64 (after the capture; the first test pass is 100 batches).
    [ -n "$ncu" ] || { echo "no ncu here" >&2; exit 1; }
    "$ncu" --metrics gpu__time_duration.sum --launch-skip 3000 --launch-count 150 \
        --print-summary per-kernel "$build/engine/dltrain.bin" train \
        --config "$work/lenet_64.yaml" --run-dir "$work/ncu" --data-dir "$bundle/fashion-mnist" \
        --device cuda --max-iter 400 --deadline none 2>&1 |
        grep -E '^  [A-Za-z_]|gpu__time_duration|Invocations|^==' | head -150
    rm -rf "$work"
    ;;
job)
    # A job store and run directories of its own.
    HOME=$(mktemp -d)
    export HOME
    unset XDG_DATA_HOME DLJOB_RUNS_DIR DLJOB_STORE
    dljob="$build/src/dljob"
    status=0
    "$dljob" submit "$root/recipes/fashion-mnist.yaml" --site local --wait \
        --set "data.source=$bundle/fashion-mnist" || status=$?
    "$dljob" status --all
    for metrics in "$HOME"/.local/share/dljob/runs/*/metrics.jsonl; do
        head -1 "$metrics"
        tail -1 "$metrics"
    done
    exit "$status"
    ;;
cifar)
    iters=5000
    while [ $# -gt 0 ]; do
        case $1 in
        --iters) iters=$2; shift 2 ;;
        *) echo "usage: $0 cifar [--iters N]" >&2; exit 2 ;;
        esac
    done
    work=$(mktemp -d)
    "$python" "$root/scripts/make-cifar-fashion-mnist.py" "$work/data" --source "$bundle/fashion-mnist"
    config=$root/recipes/networks/cifar10_quick.yaml
    # The PyTorch twin subtracts the mean the shipped config does (as bench/cifar10/run.sh).
    mean=$(sed -n 's/^ *mean_value: *\([0-9.]*\) *$/\1/p' "$config" | head -1)
    status=0
    echo "dltrain --device cuda: $iters iterations"
    "$build/engine/dltrain" train --device cuda --config "$config" --run-dir "$work/dltrain" \
        --data-dir "$work/data" --max-iter "$iters" --deadline none > "$work/dltrain.log" 2>&1 ||
        { status=$?; tail -5 "$work/dltrain.log"; }
    for mode in eager graph; do
        echo "pytorch $mode: $iters iterations"
        flag=""
        [ "$mode" = eager ] || flag=--cuda-graph
        # shellcheck disable=SC2086 # $flag is one word or none
        "$python" "$root/bench/cifar10/cifar10_quick_torch.py" --device cuda $flag \
            --iters "$iters" --mean "$mean" --data-dir "$work/data" > "$work/$mode.jsonl" ||
            { status=$?; tail -5 "$work/$mode.jsonl"; }
    done
    "$python" - "$work" <<'PY' || status=$?
import json, sys
work = sys.argv[1]
def final(path):
    try:
        lines = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
        return [l for l in lines if l.get("type") == "final"][-1]
    except (OSError, IndexError, ValueError):
        return None
runs = [("dltrain", final(f"{work}/dltrain/metrics.jsonl")),
        ("torch eager", final(f"{work}/eager.jsonl")),
        ("torch graph", final(f"{work}/graph.jsonl"))]
print(f"{'':16}" + "".join(f"{name:>14}" for name, _ in runs))
for key, label, form in (("train_images_per_s", "train images/s", "{:14.0f}"),
                         ("test_accuracy", "test accuracy", "{:14.4f}")):
    print(f"{label:16}" + "".join(form.format(r[key]) if r else f"{'failed':>14}" for _, r in runs))
d = runs[0][1]
for name, r in runs[1:]:
    if d and r:
        print(f"dltrain / {name}: {d['train_images_per_s'] / r['train_images_per_s']:.2f}x images/s, "
              f"accuracy {d['test_accuracy'] - r['test_accuracy']:+.4f}")
PY
    rm -rf "$work"
    exit "$status"
    ;;
*)
    echo "usage: $0 all [MODE...] | tests|bench|sanitize|opcheck|dp|profile|kernels|job|cifar [arguments]" >&2
    exit 2
    ;;
esac
