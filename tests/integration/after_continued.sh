#!/usr/bin/env bash
# after_continued.sh SITE: `submit --after A:ok` where A continues (exits 75 and submits its next
# attempt itself, issue 25). The dependant waits through A's continuation and runs once A's
# final attempt has completed: the job moved it to its next attempt before exiting 75 (else
# the scheduler sees an afterok on a job that failed, and kill_invalid_depend cancels it).
# No dljob command runs while the chain goes on: the job does it alone. A sweep submitted
# --after A (one job array where there are arrays) waits the same way.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
site=${1:-test-slurm}
command -v squeue >/dev/null || { echo "SKIP: no squeue (the test cluster is not running)"; exit 77; }

first=$(submit "$site" continue_gated --set "command.environment.GATE=$WORK/gate")
check "the chain's first attempt runs" RUNNING "$(wait_state "$first" RUNNING)"
after=$(submit "$site" ok --after "$first:ok")
# A sweep waits too: one job array on Slurm, PBS and Moab, moved as a whole.
mapfile -t swept < <(submit "$site" sweep --sweep command.environment.ACC=0.5,0.9 --after "$first:ok")
sleep 2
check "the dependant waits" PENDING "$(field "$after" state)"
check "the dependant sweep waits" "PENDING PENDING" "$(field "${swept[0]}" state) $(field "${swept[1]}" state)"
touch "$WORK/gate"
# Unattended from here: only the scheduler's own queue until it holds nothing of this test.
if wait_queue_empty 240; then empty=1; else empty=0; fi
check "the chain and its dependant ended" 1 "$empty"
"$DLJOB" status --all --json >"$WORK/all.json"
attempts() { # NAME -> the states of its attempts, oldest first
  python3 -c '
import json, sys
jobs = sorted((j for j in map(json.loads, open(sys.argv[1])) if j["name"] == sys.argv[2]), key=lambda j: j["attempt"])
print(" ".join(j["state"] for j in jobs))' "$WORK/all.json" "$1"
}
check "the chain continued once and completed" "TIMEOUT COMPLETED" "$(attempts itest-gated)"
check "the dependant ran and completed" COMPLETED "$(field "$after" state)"
check "its program ran" 1 "$(grep -c integration-ok "$(field "$after" run_dir)/job.log" || true)"
final=$(python3 -c '
import json, sys
jobs = [j for j in map(json.loads, open(sys.argv[1])) if j["name"] == "itest-gated"]
print(max(jobs, key=lambda j: j["attempt"])["finished_at"])' "$WORK/all.json")
check "it started no earlier than the final attempt ended" 1 \
  "$([ "$(field "$after" started_at)" -ge "$final" ] && echo 1 || echo 0)"
for point in "${swept[@]}"; do
  check "sweep point $point completed" COMPLETED "$(field "$point" state)"
  check "after the final attempt" 1 "$([ "$(field "$point" started_at)" -ge "$final" ] && echo 1 || echo 0)"
done
finish
