#!/usr/bin/env bash
# ctest fuzz.replay: every fuzz target over its corpus as run.sh gathers it (corpus.sh: the
# repository's files of its kind, the harnesses' and seeds.py's seeds, and regressions/TARGET/,
# the inputs fuzzing once found), through the harnesses built without libFuzzer
# (replay_main.cpp). Fails when any input ends in a crash or an escaped exception.
#
#   tests/fuzz/replay.sh DL_FUZZ_REPLAY DLJOB_FUZZ_REPLAY
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dl=${1:?usage: $0 DL_FUZZ_REPLAY DLJOB_FUZZ_REPLAY}
dljob=${2:?usage: $0 DL_FUZZ_REPLAY DLJOB_FUZZ_REPLAY}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# shellcheck source=tests/fuzz/corpus.sh
source "$here/corpus.sh"
gather_corpus "$out" "$dl" "$dljob"
for target in "${fuzz_targets[@]}"; do
    inputs=("$out/$target/corpus"/*)
    printf '%-10s ' "$target"
    DL_FUZZ_TARGET=$target "$(fuzz_binary "$target" "$dl" "$dljob")" "${inputs[@]}"
done
