#!/usr/bin/env bash
# interrupted_submit.sh SITE [N]: `dljob submit` killed (KILL or TERM) at N random instants
# (default 40), from before it records the job to after the scheduler has it. For each kill:
#   - the job ran at most once (the recipe appends its token to <run_dir>/ran each time it runs);
#   - a job that ran is recorded with its scheduler id and the state it really reached
#     (COMPLETED), whether submit recorded it or `dljob status` found it by its token;
#   - a job that never reached the scheduler ends FAILED ("not submitted") once the grace
#     period has passed, its row out of the submitting phase, and no run directory is left;
#   - the table and --json agree, and no run directory is left that no row records.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
site=$1
n=${2:-40}
grace_s=61 # status.cpp's submit grace (60 s) and a second

# How long an undisturbed submit takes here: the kills fall anywhere in it (and a bit after).
start_ns=$(date +%s%N)
# shellcheck disable=SC2046
first_out=$("$DLJOB" submit "$HERE/recipes/ledger.yaml" $(site_args "$site") 2>&1)
full_s=$(python3 -c "print(($(date +%s%N) - $start_ns) / 1e9)")
first=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$first_out")
check "an undisturbed submit prints a job id" 1 "$([ -n "$first" ] && echo 1 || echo 0)"
if [ -z "$first" ]; then
  # Nothing to time the kills against, and no store to read: say why and stop here.
  echo "$first_out" | tail -20 | sed 's/^/  | /'
  finish
fi
echo "one submit takes ${full_s} s here; killing $n submits within $(python3 -c "print(round($full_s * 1.2, 3))") s"

# Drawn beforehand: a python3 start between submit and kill would delay every kill.
read -r -a delays <<<"$(python3 -c "import random; print(' '.join(str(random.uniform(0, $full_s * 1.2)) for _ in range($n)))")"
for ((i = 0; i < n; i++)); do
  # shellcheck disable=SC2046
  "$DLJOB" submit "$HERE/recipes/ledger.yaml" $(site_args "$site") >/dev/null 2>&1 &
  pid=$!
  sleep "${delays[$i]}"
  kill -s "$( ((i % 2)) && echo TERM || echo KILL)" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
last_kill=$(date +%s)

# What the kills left, read from the store before any `dljob status` reconciles it.
python3 - "$DLJOB_STORE" <<'PY'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT phase, COUNT(*) FROM jobs GROUP BY phase").fetchall()
print("rows by phase before status:", dict(rows))
PY

# Until every job that started has ended and the grace period of the last row has passed.
for ((i = 0; i < 600; i++)); do
  active=$("$DLJOB" status --json 2>/dev/null |
    python3 -c 'import json,sys; print(sum(j["state"] in ("PENDING","RUNNING") for j in map(json.loads, sys.stdin)))')
  [ "$active" = 0 ] && [ $(($(date +%s) - last_kill)) -gt "$grace_s" ] && break
  sleep 1
done
"$DLJOB" status --all --json >"$WORK/all.json"
"$DLJOB" status --all >"$WORK/table.txt"

python3 - "$WORK/all.json" "$WORK/table.txt" "$DLJOB_RUNS_DIR" "$site" >"$WORK/verdict" <<'PY'
import json, os, subprocess, sys
jobs = [json.loads(line) for line in open(sys.argv[1])]
table = open(sys.argv[2]).read().splitlines()[1:]
runs, site = sys.argv[3], sys.argv[4]
problems, ran, lost = [], 0, 0
states = {row.split()[0]: row for row in table if row.split()}
for j in jobs:
    d = j["run_dir"]
    count = len(open(os.path.join(d, "ran")).read().split()) if os.path.exists(os.path.join(d, "ran")) else 0
    if count > 1:
        problems.append(f"job {j['id']} ran {count} times")
    if count >= 1:
        ran += 1
        if (j["state"], j["phase"]) != ("COMPLETED", "submitted") or not j["scheduler_id"]:
            problems.append(f"job {j['id']} ran but reads {j['phase']} {j['state']} ({j['reason']})")
    else:
        lost += 1
        if (j["state"], j["native_state"], j["phase"]) != ("FAILED", "not submitted", "submitted"):
            problems.append(f"job {j['id']} never ran but reads {j['phase']} {j['state']} {j['native_state']}")
        if os.path.exists(d):
            problems.append(f"job {j['id']} never ran but left {d}: {sorted(os.listdir(d))}")
    row = states.get(str(j["id"]), "")
    if j["state"] not in row or "SUBMIT" in row:
        problems.append(f"job {j['id']}: --json says {j['state']}, the table '{row}'")
if site != "local":
    queue = subprocess.run(["squeue", "-h", "--me", "-t", "all", "-o", "%k"], capture_output=True, text=True).stdout
    for j in jobs:
        copies = queue.count("dljob:" + j["token"]) if site == "test-slurm" else None
        if copies is not None and copies > 1:
            problems.append(f"job {j['id']}: {copies} scheduler jobs carry its token")
recorded = {os.path.realpath(j["run_dir"]) for j in jobs}
for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
    if os.path.realpath(os.path.join(runs, name)) not in recorded:
        problems.append(f"run directory {name} has no row: {sorted(os.listdir(os.path.join(runs, name)))}")
print(f"rows {len(jobs)}: ran {ran}, never submitted {lost}")
for p in problems:
    print("PROBLEM:", p)
PY
cat "$WORK/verdict"
check "every interrupted submit ran at most once and status says what happened" 0 "$(grep -c '^PROBLEM' "$WORK/verdict" || true)"
finish
