#!/usr/bin/env bash
# sweep_cancel.sh SITE: a recipe's sweep: block (three points, no --sweep) through SITE's
# scheduler: every point is submitted (a task of one job array on Slurm, PBS and Moab, a job of
# its own on sqsub) and runs, status tells each point apart and folds the sweep, cancelling one
# point ends only that one, and `dljob cancel SWEEP` ends every other point. (sweep_array.sh
# checks the array itself: the commands run, the tasks' times.)
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
site=$1

# shellcheck disable=SC2046 # site_args is several words
out=$("$DLJOB" submit "$HERE/recipes/sweep_cancel.yaml" $(site_args "$site") 2>/dev/null)
echo "$out"
sweep=$(sed -n 's/^sweep \(sw-[0-9a-f]*\): .*/\1/p' <<<"$out")
mapfile -t ids < <(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
check "a sweep id" 1 "$([ -n "$sweep" ] && echo 1 || echo 0)"
check "one job per value of the recipe's sweep: block" 3 "${#ids[@]}"
for i in 0 1 2; do
  check "point $((i + 1)) is the recipe's value $((i + 1))" 1 \
    "$(grep -c "^submitted job ${ids[$i]} .*: command.environment.POINT=$((i + 1))\$" <<<"$out")"
done
for id in "${ids[@]}"; do
  check "point $id has its own scheduler id" 1 "$([ -n "$(field "$id" scheduler_id)" ] && echo 1 || echo 0)"
  check "point $id belongs to the sweep" "$sweep" "$(field "$id" sweep)"
  check "point $id runs" RUNNING "$(wait_state "$id" RUNNING)"
done
check "each point's own run directory" 3 \
  "$(for id in "${ids[@]}"; do field "$id" run_dir; done | sort -u | wc -l)"
check "status SWEEP lists every point" 3 "$("$DLJOB" status "$sweep" --json | wc -l)"
folded=$("$DLJOB" status)
echo "$folded"
check "status folds the sweep into one line" 1 "$(grep -c "SWEEP 3: 3 RUNNING" <<<"$folded")"

# One point cancelled: it leaves the scheduler's queue, the others go on.
"$DLJOB" cancel "${ids[1]}" >/dev/null
check "the cancelled point is CANCELLED" CANCELLED "$(field "${ids[1]}" state)"
run1=$(field "${ids[1]}" run_dir)
for ((i = 0; i < 240; i++)); do
  [ "$(queued PD,R,CG,CF,S "$run1/")" = 0 ] && break
  sleep 0.25
done
check "the scheduler no longer holds the cancelled point" 0 "$(queued PD,R,CG,CF,S "$run1/")"
check "the other points still run" "RUNNING RUNNING" \
  "$(field "${ids[0]}" state) $(field "${ids[2]}" state)"
check "status counts one cancelled point" 1 \
  "$("$DLJOB" status --all | grep -c "SWEEP 3: 2 RUNNING 1 CANCELLED")"

# The whole sweep: every point that still runs is cancelled, one line per point.
cancelled=$("$DLJOB" cancel "$sweep")
echo "$cancelled"
check "cancel SWEEP reports every point" 3 "$(grep -c "^job [0-9]*: CANCELLED" <<<"$cancelled")"
for id in "${ids[@]}"; do
  check "point $id is CANCELLED" CANCELLED "$(field "$id" state)"
done
if wait_queue_empty 60; then empty=1; else empty=0; fi
check "the scheduler holds no point of the sweep" 1 "$empty"
check "dljob sweep lists three cancelled points" 3 \
  "$("$DLJOB" sweep "$sweep" | tail -n +2 | grep -c " CANCELLED")"
set +e
"$DLJOB" cancel sw-000000 >/dev/null 2>&1
rc=$?
set -e
check "cancelling an unknown sweep exits 7" 7 "$rc"
finish
