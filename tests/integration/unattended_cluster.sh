#!/usr/bin/env bash
# unattended_cluster.sh SITE...: issue 25 on the batch families (the test cluster's Slurm, its
# Torque wrappers, and the Moab, sqsub and Big Red II shims), on every site given, all at once.
# A job that exits 75 submits its next attempt itself (`dljob continue-job` from its epilogue).
# 1. Unattended: continue (75, 75, 0), stall (75 without a checkpoint) and capped (always 75,
#    max_continuations 2) are submitted, then NO dljob command runs until the scheduler's own
#    queue (squeue) holds none of this test's jobs; then one `dljob status` records every chain:
#    TIMEOUT TIMEOUT COMPLETED, TIMEOUT, TIMEOUT x3, each attempt continuing the one before,
#    and a second status changes nothing. The scheduler ran exactly as many jobs as attempts.
# 2. Attended: midway (attempt 2 trains until cancelled) is cancelled by the id submit printed
#    while attempt 2 runs: the chain ends there, no attempt 3. race (attempt 1 writes exit_code
#    75 itself, then exits 75 3 s later) is watched by a `dljob status` loop that continues it
#    while the job's own epilogue tries too, and a continue chain runs under the same loop:
#    exactly one next attempt each time.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || set -- test-slurm
command -v squeue >/dev/null || { echo "SKIP: no squeue (the test cluster is not running)"; exit 77; }

jobs_run() { # RUN_DIR -> how many jobs the scheduler ever ran there (MinJobAge keeps them)
  squeue -h --me -t all -o '%Z' 2>/dev/null | grep -c "^$1\$" || true
}
chain() { # SITE NAME -> "state:continues-the-previous ..." oldest first, from $WORK/all.json
  python3 - "$WORK/all.json" "$1" "$2" <<'PY'
import json, sys
jobs = [j for j in map(json.loads, open(sys.argv[1])) if j["site"] == sys.argv[2] and j["name"] == sys.argv[3]]
jobs.sort(key=lambda j: j["attempt"])
out = []
for k, j in enumerate(jobs):
    linked = j["continues"] is None if k == 0 else j["continues"] == jobs[k - 1]["id"]
    out.append(f'{j["state"]}:{int(linked and j["run_dir"] == jobs[0]["run_dir"])}')
print(" ".join(out))
PY
}
run_dir_of() { # ID -> its run directory (from the store: for the checks after the chains end)
  "$DLJOB" status "$1" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["run_dir"])'
}

# ---- 1. unattended --------------------------------------------------------------------------
declare -A dir
for site in "$@"; do
  for recipe in continue stall capped; do
    # shellcheck disable=SC2046
    out=$("$DLJOB" submit "$HERE/recipes/$recipe.yaml" $(site_args "$site"))
    dir[$site/$recipe]=$(sed -n 's/^run dir: //p' <<<"$out")
    check "$site: $recipe: submitted" 1 "$([ -n "${dir[$site/$recipe]}" ] && echo 1 || echo 0)"
  done
done
# No dljob from here until the queue is empty: only the scheduler's own listing.
wait_queue_empty || echo "the queue still holds jobs of this test"
check "every unattended chain ended with no dljob command run" 0 "$(queued PD,R,CG,CF,S)"
"$DLJOB" status --all --json >"$WORK/all.json" 2>"$WORK/warnings"
for site in "$@"; do
  check "$site: continue: three attempts, linked, the last COMPLETED" \
    "TIMEOUT:1 TIMEOUT:1 COMPLETED:1" "$(chain "$site" itest-continue)"
  check "$site: stall: one attempt, not continued (no progress)" "TIMEOUT:1" "$(chain "$site" itest-stall)"
  check "$site: capped: max_continuations 2 gives three attempts" "TIMEOUT:1 TIMEOUT:1 TIMEOUT:1" \
    "$(chain "$site" itest-capped)"
  check "$site: the scheduler ran one job per attempt" "3 1 3" \
    "$(jobs_run "${dir[$site/continue]}") $(jobs_run "${dir[$site/stall]}") $(jobs_run "${dir[$site/capped]}")"
  # The job that decided says so; status relays it.
  check "$site: continue: the attempts were submitted by the jobs" 2 \
    "$(cat "${dir[$site/continue]}"/continuation.* | grep -c '^by=job$')"
  check "$site: each attempt's job_identity named its own token" 1 \
    "$(python3 - "$WORK/all.json" "$site" "${dir[$site/continue]}" <<'PY'
import json, sys
jobs = sorted((j for j in map(json.loads, open(sys.argv[1])) if j["site"] == sys.argv[2] and j["name"] == "itest-continue"), key=lambda j: j["attempt"])
identity = dict(l.split("=", 1) for l in open(sys.argv[3] + "/job_identity").read().splitlines() if "=" in l)
print(int(len(jobs) == 3 and identity.get("token") == jobs[-1]["token"] and len({j["token"] for j in jobs}) == 3))
PY
)"
  logs=
  for id in $(python3 -c 'import json,sys; print(" ".join(str(j["id"]) for j in sorted((j for j in map(json.loads, open(sys.argv[1])) if j["site"] == sys.argv[2] and j["name"] == "itest-continue"), key=lambda j: j["attempt"])))' "$WORK/all.json" "$site"); do
    logs+="$("$DLJOB" logs "$id" | grep -o 'attempt with [0-9] checkpoints' | paste -sd,)|"
  done
  check "$site: continue: dljob logs of each attempt shows that attempt's output" \
    "attempt with 0 checkpoints|attempt with 1 checkpoints|attempt with 2 checkpoints|" "$logs"
done
check "the stalled chains were reported" "$#" "$(grep -c 'makes no progress' "$WORK/warnings" || true)"
check "the capped chains were reported at their limit" "$#" \
  "$(grep -c 'checkpoint.max_continuations: 2' "$WORK/warnings" || true)"
"$DLJOB" status --all --json >"$WORK/again.json" 2>/dev/null
check "a second status records nothing new" "$(wc -l <"$WORK/all.json")" "$(wc -l <"$WORK/again.json")"
"$DLJOB" status --all

# ---- 2. cancelled mid-way, and the race ------------------------------------------------------
declare -A id
for site in "$@"; do
  for recipe in midway race continue; do
    id[$site/$recipe]=$(submit "$site" "$recipe")
  done
done
# Status loops: one continues race's attempt 1 as soon as its exit_code says 75, while its job
# sleeps and then tries to continue it too (status mostly first); the other looks at the
# continue chains while their jobs continue them (the job mostly first). Either way: one next
# attempt.
watch() { # IDS...
  while [ ! -e "$WORK/stop-watching" ]; do
    "$DLJOB" status "$@" --json >/dev/null 2>&1 || true
    sleep 0.1
  done
}
races=() continues=()
for site in "$@"; do
  races+=("${id[$site/race]}")
  continues+=("${id[$site/continue]}")
done
watch "${races[@]}" &
watchers=$!
watch "${continues[@]}" &
watchers="$watchers $!"
for site in "$@"; do
  run=$(run_dir_of "${id[$site/midway]}")
  for ((i = 0; i < 600; i++)); do # attempt 2 has checkpointed and trains
    [ -e "$run/checkpoints/step1" ] && [ "$(queued R "$run")" = 1 ] && break
    sleep 0.25
  done
  check "$site: midway: attempt 2 runs" 1 "$([ -e "$run/checkpoints/step1" ] && echo 1 || echo 0)"
  "$DLJOB" cancel "${id[$site/midway]}" >/dev/null || echo "$site: cancel failed"
  dir[$site/midway]=$run
  dir[$site/race]=$(run_dir_of "${id[$site/race]}")
  dir[$site/continue2]=$(run_dir_of "${id[$site/continue]}")
done
wait_queue_empty || echo "the queue still holds jobs of this test"
: >"$WORK/stop-watching"
# shellcheck disable=SC2086 # two pids
wait $watchers
"$DLJOB" status --all --json >"$WORK/all.json" 2>/dev/null
for site in "$@"; do
  check "$site: midway: no attempt after the cancel" "2 no-step2" \
    "$(jobs_run "${dir[$site/midway]}") $([ -e "${dir[$site/midway]}/checkpoints/step2" ] && echo step2 || echo no-step2)"
  check "$site: midway: the chain ends CANCELLED" CANCELLED "$(chain "$site" itest-midway | awk '{print $NF}' | cut -d: -f1)"
  check "$site: race: exactly one next attempt" "2 TIMEOUT:1 COMPLETED:1" \
    "$(jobs_run "${dir[$site/race]}") $(chain "$site" itest-race)"
  echo "$site: race decided by: $(sed -n 's/^by=//p' "${dir[$site/race]}"/continuation.* | paste -sd,)"
  check "$site: continue under a status loop: exactly three attempts" "3" "$(jobs_run "${dir[$site/continue2]}")"
done
"$DLJOB" status --all
finish
