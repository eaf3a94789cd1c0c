#!/usr/bin/env bash
# unattended_continuation.sh: on `local`, a job that exits 75 is continued by its wrapper with
# nobody running dljob (issue 25). No `dljob status` runs until every chain has ended; then one
# status records every attempt the jobs started, by their tokens, and a second changes nothing:
#   - continue (75, 75, then 0): three attempts, TIMEOUT TIMEOUT COMPLETED, each continuing the
#     one before, each attempt's log kept;
#   - stall (75 without a new checkpoint): one attempt, not continued (no progress);
#   - capped (always 75 with progress, max_continuations 2): three attempts, then not (limit).
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
declare -A run_dir
for recipe in continue stall capped; do
  out=$("$DLJOB" submit "$HERE/recipes/$recipe.yaml" --site local)
  run_dir[$recipe]=$(sed -n 's/^run dir: //p' <<<"$out")
done
# Each chain's last attempt writes local_exit (a continued attempt leaves its end in its
# continuation record instead).
for recipe in continue stall capped; do
  for ((i = 0; i < 600; i++)); do
    [ -e "${run_dir[$recipe]}/local_exit" ] && break
    sleep 0.2
  done
  check "$recipe: the chain ended by itself" 1 "$([ -e "${run_dir[$recipe]}/local_exit" ] && echo 1 || echo 0)"
done
chains() {
  "$DLJOB" status --all --json 2>>"$WORK/warnings" | python3 -c '
import json, sys
chains = {}
for j in map(json.loads, sys.stdin):
    chains.setdefault(j["name"], []).append(j)
for name in sorted(chains):
    jobs = sorted(chains[name], key=lambda j: j["attempt"])
    linked = all(b["continues"] == a["id"] for a, b in zip(jobs, jobs[1:]))
    print(name, " ".join(j["state"] for j in jobs), "linked" if linked else "BROKEN")'
}
first=$(chains)
echo "$first"
check "continue: three attempts, the last COMPLETED" "itest-continue TIMEOUT TIMEOUT COMPLETED linked" "$(grep itest-continue <<<"$first")"
check "stall: one attempt, not continued" "itest-stall TIMEOUT linked" "$(grep itest-stall <<<"$first")"
check "capped: three attempts, then its limit" "itest-capped TIMEOUT TIMEOUT TIMEOUT linked" "$(grep itest-capped <<<"$first")"
check "a second status records no other attempt" "$first" "$(chains)"
check "stall: status says why it was not continued" 1 "$(grep -c 'makes no progress' "$WORK/warnings" | head -1)"
check "capped: and why the chain stopped" 1 "$(grep -c 'checkpoint.max_continuations: 2' "$WORK/warnings" | head -1)"
check "continue: each attempt's log kept" "attempt with 0 checkpoints|attempt with 1 checkpoints|attempt with 2 checkpoints" \
  "$(cat "${run_dir[continue]}/job.attempt1.log" "${run_dir[continue]}/job.attempt2.log" "${run_dir[continue]}/job.log" | grep '^attempt with' | paste -sd '|')"
"$DLJOB" status --all
finish
