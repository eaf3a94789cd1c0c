#!/usr/bin/env bash
# timeout.sh SITE...: jobs over their walltime end as TIMEOUT, on every site given, all at once
# (so the wall time is that of one job). Two per site:
# - timeout: the program dies of the walltime warning signal. Slurm sends it (--signal); PBS,
#   Moab and sqsub have none, so the rendered script's own timer does.
# - overtime: the program ignores the warning, so the scheduler kills it at the walltime. Slurm
#   and Moab say TIMEOUT; sqjobs and the Torque wrappers' qstat do not, and dljob tells it from
#   the job's run time (past the walltime: the scheduler was killing it).
# Slurm's minimum walltime is a minute and it checks limits every 30 s: up to ~100 s.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || set -- test-slurm
declare -A job
for site in "$@"; do
  for recipe in timeout overtime; do
    job[$site.$recipe]=$(submit "$site" "$recipe")
    check "$site: $recipe: submit prints a job id" 1 "$([ -n "${job[$site.$recipe]}" ] && echo 1 || echo 0)"
  done
done
declare -A state
for ((i = 0; i < 180; i++)); do
  pending=0
  for key in "${!job[@]}"; do
    case "${state[$key]:-}" in COMPLETED | FAILED | CANCELLED | TIMEOUT) continue ;; esac
    [ -n "${job[$key]}" ] || continue
    state[$key]=$(field "${job[$key]}" state)
    case "${state[$key]}" in COMPLETED | FAILED | CANCELLED | TIMEOUT) ;; *) pending=1 ;; esac
  done
  [ "$pending" = 0 ] && break
  sleep 1
done
for site in "$@"; do
  for recipe in timeout overtime; do
    id=${job[$site.$recipe]}
    check "$site: $recipe: job over its walltime is TIMEOUT" TIMEOUT "${state[$site.$recipe]:-}"
    [ -n "$id" ] && echo "$site: $recipe: native $(field "$id" native_state), exit $(field "$id" exit_code), reason: $(field "$id" reason)"
  done
done
"$DLJOB" status --all
finish
