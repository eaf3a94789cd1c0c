#!/usr/bin/env bash
# Builds the fuzz targets of dl_fuzz.cpp (dltrain's readers) and dljob_fuzz.cpp (dljob's) with
# Clang, libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, and fuzzes each target for
# SECONDS, starting from the repository's own files of that kind (the hostile corpus, Caffe's nets,
# the recipes and site profiles, the recorded scheduler outputs; the harnesses write a
# caffemodel, a checkpoint and packs, seeds.py images, IDX and CIFAR files and metrics). A
# finding is left as crash-*/leak-*/oom-*/timeout-* in OUT/TARGET and the script exits 1; the
# input that showed it belongs in tests/engine/hostile (or a unit test) once fixed.
#
#   tests/fuzz/run.sh [--seconds 60] [--build build-fuzz] [--out fuzz-out] [TARGET ...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
seconds=60
build=$root/build-fuzz
out=$root/fuzz-out
targets=()
while (($#)); do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

# shellcheck source=tests/fuzz/corpus.sh
source "$root/tests/fuzz/corpus.sh"
((${#targets[@]})) || targets=("${fuzz_targets[@]}")

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDLJOB_FUZZ=ON \
    -DDLJOB_BUILD_TESTS=OFF -DDLJOB_CUDA=OFF -DDLJOB_MPI=OFF -DDLJOB_SANITIZE=address,undefined \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
    -DCMAKE_CXX_FLAGS=-DDL_CPU_NO_CLONES >/dev/null
cmake --build "$build" --target dl_fuzz dljob_fuzz
dl=$build/tests/fuzz/dl_fuzz
dljob=$build/tests/fuzz/dljob_fuzz
gather_corpus "$out" "$dl" "$dljob"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
shopt -s nullglob
status=0
for target in "${targets[@]}"; do
    echo "== $target (${seconds} s)"
    binary=$(fuzz_binary "$target" "$dl" "$dljob")
    (cd "$out/$target" &&
        DL_FUZZ_TARGET=$target "$binary" corpus -max_total_time="$seconds" -timeout=10 \
            -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=65536 -print_final_stats=1 \
            >log.txt 2>&1) || true
    grep -E '^Done [0-9]+ runs' "$out/$target/log.txt" || true
    findings=("$out/$target"/{crash,leak,oom,timeout}-*)
    if ((${#findings[@]})); then
        echo "$target: ${#findings[@]} finding(s), see $out/$target/log.txt: ${findings[*]}"
        status=1
    fi
done
exit $status
