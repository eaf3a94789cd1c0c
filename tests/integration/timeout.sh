#!/usr/bin/env bash
# timeout.sh SITE: a job over its walltime ends as TIMEOUT (Slurm: 1 min + up to ~30 s).
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
job=$(submit "$1" timeout)
for ((i = 0; i < 150; i++)); do
  state=$(field "$job" state)
  case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
  sleep 1
done
check "job over its walltime is TIMEOUT" TIMEOUT "$state"
finish
