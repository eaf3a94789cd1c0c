#!/bin/bash
# Alternates whole-pack copies N times each on one target and prints their medians: a check
# beside run.sh with nothing else in the loop (docs/benchmarks.md, staging runs 7 and 8).
# Usage: bench/staging/alternate.sh N TARGET 'LABEL:COMMAND' ...
#   COMMAND runs in $WORK (default /tmp/dljob-bench-staging) and writes under $dest, which is
#   emptied and synced before every run. Example:
#   bench/staging/alternate.sh 10 /tmp \
#     "dd:dd if=fmnist.dlpack/data.tar of=\$dest/x.tar bs=256K status=none" \
#     "stage:$PWD/build-tests/src/dljob stage-data fmnist.dlpack --to \$dest"
set -euo pipefail
N=$1 TARGET=$2
shift 2
cd "${WORK:-/tmp/dljob-bench-staging}"
dest=$TARGET/dljob-bench-dest
declare -A samples
for _ in $(seq "$N"); do
    for spec in "$@"; do
        rm -rf "$dest"; mkdir -p "$dest"; sync
        start=$(date +%s%N)
        eval "${spec#*:}" > /dev/null 2>&1
        end=$(date +%s%N)
        samples[${spec%%:*}]+="$(((end - start) / 1000)) "
    done
done
rm -rf "$dest"
for spec in "$@"; do
    label=${spec%%:*}
    median=$(printf '%s\n' ${samples[$label]} | sort -n | awk '{x[NR]=$1} END {print x[int((NR+1)/2)]}')
    echo "$label: median $median us [${samples[$label]% }]"
done
