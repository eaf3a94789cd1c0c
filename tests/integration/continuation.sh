#!/usr/bin/env bash
# continuation.sh SITE...: a job that checkpoints and exits 75 is submitted again by dljob, in
# its own run directory, as a new row that continues it (docs/schedulers.md, Continuations); on
# every site given, all at once. Here `dljob status` runs all along, as a user's (or `submit
# --wait`'s) would: the jobs continue themselves (issue 25; unattended_cluster.sh checks that
# with no dljob running) and status records and reports their attempts. Per site:
# - continue: exits 75 twice, each time with one more checkpoint, then 0: three attempts, the
#   last COMPLETED, each continuing the one before, all in one run directory.
# - stall: exits 75 without a new checkpoint: not submitted again (no progress).
# - capped: always progresses, always exits 75, max_continuations 2: three attempts, then stops.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || set -- local
for site in "$@"; do
  for recipe in continue stall capped; do
    id=$(submit "$site" "$recipe")
    check "$site: $recipe: submit prints a job id" 1 "$([ -n "$id" ] && echo 1 || echo 0)"
  done
done
# Until no job is active; each `dljob status` refreshes every active job and continues those
# that checkpointed. Continuations queue behind the other tests' jobs on the shared cluster.
for ((i = 0; i < 240; i++)); do
  active=$("$DLJOB" status --json 2>>"$WORK/warnings" |
    python3 -c 'import json,sys; print(len([json.loads(l) for l in sys.stdin]))')
  [ "$active" = 0 ] && break
  sleep 1
done
check "every chain ended" 0 "$active"
"$DLJOB" status --all --json >"$WORK/all.json"
chain() { # SITE NAME -> "attempt:state:continues-the-previous:same-run-dir ..." oldest first
  python3 - "$WORK/all.json" "$1" "$2" <<'PY'
import json, sys
jobs = [j for j in [json.loads(l) for l in open(sys.argv[1])] if j["site"] == sys.argv[2] and j["name"] == sys.argv[3]]
jobs.sort(key=lambda j: j["attempt"])
out = []
for k, j in enumerate(jobs):
    linked = k == 0 and j["continues"] is None or k > 0 and j["continues"] == jobs[k - 1]["id"]
    same_dir = j["run_dir"] == jobs[0]["run_dir"]
    out.append(f'{j["attempt"]}:{j["state"]}:{int(linked)}:{int(same_dir)}')
print(" ".join(out))
PY
}
for site in "$@"; do
  check "$site: continue: three attempts, linked, one run directory, the last COMPLETED" \
    "1:TIMEOUT:1:1 2:TIMEOUT:1:1 3:COMPLETED:1:1" "$(chain "$site" itest-continue)"
  check "$site: stall: no progress, not submitted again" "1:TIMEOUT:1:1" \
    "$(chain "$site" itest-stall)"
  check "$site: capped: max_continuations 2 gives three attempts, then stops" \
    "1:TIMEOUT:1:1 2:TIMEOUT:1:1 3:TIMEOUT:1:1" "$(chain "$site" itest-capped)"
  # Each attempt's own output, by `dljob logs` of that attempt (Torque, Moab and sqsub would
  # overwrite one file: earlier attempts' logs are kept as job.attempt<N>.log).
  ids=$(python3 -c 'import json,sys; print(" ".join(str(j["id"]) for j in sorted((j for j in [json.loads(l) for l in open(sys.argv[1])] if j["site"] == sys.argv[2] and j["name"] == "itest-continue"), key=lambda j: j["attempt"])))' "$WORK/all.json" "$site")
  logs=
  for id in $ids; do
    logs+="$("$DLJOB" logs "$id" | grep -o 'attempt with [0-9] checkpoints' | paste -sd,)|"
  done
  check "$site: continue: dljob logs of each attempt shows that attempt's output" \
    "attempt with 0 checkpoints|attempt with 1 checkpoints|attempt with 2 checkpoints|" "$logs"
done
check "the stalled jobs were reported, not continued" "$#" \
  "$(grep -c 'makes no progress' "$WORK/warnings" || true)"
check "the capped jobs were reported at their limit" "$#" \
  "$(grep -c 'checkpoint.max_continuations: 2' "$WORK/warnings" || true)"
"$DLJOB" status --all
finish
