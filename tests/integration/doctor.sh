#!/usr/bin/env bash
# doctor.sh: `dljob doctor` against the test cluster. A healthy profile (Slurm, Lmod with the
# cluster's fake cuda and cudnn modulefiles, writable tiers) is all ok with exit 0; a missing
# module, an unwritable tier and an absent scheduler command are each an error with its fix,
# and exit 1.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
: "${DLJOB_TEST_MODULES_INIT:?scripts/test-cluster/env.sh must define it (scripts/test-cluster/start.sh)}"

profile() { # NAME CUDA-MODULE SCRATCH-PATH -> writes $WORK/NAME.yaml
  cat >"$WORK/$1.yaml" <<YAML
name: $1
description: dljob doctor test
modules:
  system: lmod
  init: $DLJOB_TEST_MODULES_INIT
  needs:
    cuda: [$2]
    cudnn: [cudnn/9.0]
default_partition: cpu
partitions:
  cpu:
    queue: cpu
    scheduler: slurm
    launcher: none
    node: {cores: 8, memory: 2G}
    max_nodes: 1
    walltime: {default: "00:10:00", max: "01:00:00"}
storage:
  home: {path: \$HOME, network: false}
  scratch: {path: $3, purge_days: 60, file_quota: 1000000}
YAML
}
doctor() { # NAME [env...] -> output; exit status in $WORK/rc
  local name=$1
  shift
  set +e
  env "$@" "$DLJOB" doctor --site "$name" --site-file "$WORK/$name.yaml" >"$WORK/out" 2>&1
  echo $? >"$WORK/rc"
  set -e
  cat "$WORK/out"
}
mkdir -p "$WORK/scratch"

profile healthy cuda/12.4 "$WORK/scratch"
out=$(doctor healthy)
echo "$out"
check "healthy profile exits 0" 0 "$(cat "$WORK/rc")"
check "with no error or warning" 0 "$(grep -c -E '^(error|warning) ' <<<"$out" || true)"
check "the scheduler answers with its version" 1 "$(grep -c -E '^ok +scheduler +slurm: squeue answers \(slurm' <<<"$out")"
check "each module exists and loads" 2 "$(grep -c -E '^ok +module +(cuda/12.4|cudnn/9.0): exists and loads' <<<"$out")"
check "scratch is writable with its purge policy and quota" 1 \
  "$(grep -c -E "^ok +storage +storage.scratch: $WORK/scratch writable, .* GiB free .*file quota 1.0M \(profile\); files unused for 60 days are purged" <<<"$out")"
check "dltrain runs" 1 "$(grep -c -E '^ok +dltrain +dltrain [0-9]' <<<"$out")"

profile nomodule cuda/12.5 "$WORK/scratch"
out=$(doctor nomodule)
echo "$out"
check "a missing module exits 1" 1 "$(cat "$WORK/rc")"
check "names the module" 1 "$(grep -c -E "^error +module +cuda/12.5: not found by 'module -t avail cuda/12.5'" <<<"$out")"
check "with the fix" 1 "$(grep -c "fix: 'module spider cuda' lists the versions" <<<"$out")"
# cudnn's modulefile has prereq("cuda"): with no cuda loaded before it, it cannot load either.
check "and the module that needs it does not load" 1 \
  "$(grep -c -E "^error +module +cudnn/9.0: exists but does not load in the job's order" <<<"$out")"

# Unwritable even for root: sysfs refuses new files.
if [ "$(id -u)" = 0 ]; then readonly_dir=/sys/kernel; else readonly_dir=$WORK/readonly; mkdir -p "$readonly_dir"; chmod 555 "$readonly_dir"; fi
profile readonly cuda/12.4 "$readonly_dir"
out=$(doctor readonly)
echo "$out"
check "an unwritable tier exits 1" 1 "$(cat "$WORK/rc")"
check "names the tier" 1 "$(grep -c -E "^error +storage +storage.scratch: $readonly_dir is not writable" <<<"$out")"
check "with the fix" 1 "$(grep -c 'fix: ask for write access to it' <<<"$out")"
profile missingdir cuda/12.4 "$WORK/nowhere"
out=$(doctor missingdir)
check "a missing tier is an error with mkdir as the fix" 1 "$(grep -c "fix: create it (mkdir -p $WORK/nowhere)" <<<"$out")"

# sbatch absent from PATH (the other Slurm commands and what the module check needs are there).
mkdir -p "$WORK/bin"
for program in squeue sacct scancel bash sed grep env cat; do
  ln -sf "$(command -v "$program")" "$WORK/bin/$program"
done
profile healthy cuda/12.4 "$WORK/scratch"
out=$(doctor healthy "PATH=$WORK/bin")
echo "$out"
check "an absent scheduler command exits 1" 1 "$(cat "$WORK/rc")"
check "names it" 1 "$(grep -c -E '^error +scheduler +slurm: sbatch is not on PATH' <<<"$out")"
check "with the fix" 1 "$(grep -c 'fix: run dljob on the site.s login node, or load the module that provides sbatch' <<<"$out")"
finish
