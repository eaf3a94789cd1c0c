#!/usr/bin/env bash
# many_jobs.sh: `dljob status` with 10,000 finished jobs and a few active ones in the store.
# Prints how long it took (no timing assertion: CI machines vary); checks what it lists.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
"$DLJOB" status >/dev/null # creates the store with the current schema
python3 - "$DLJOB_STORE" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = [(f"tok{i:06d}", "bulk", "local", "local", str(100000 + i), "submitted",
         "COMPLETED" if i >= 5 else "RUNNING", 1000 + i, 1000 + i) for i in range(10000)]
db.executemany("INSERT INTO jobs (token, name, site, scheduler, scheduler_id, phase, state, "
               "created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?)", rows)
db.commit()
PY
start=$(date +%s%N)
"$DLJOB" status --all --json >"$WORK/all.json"
all_ms=$((($(date +%s%N) - start) / 1000000))
start=$(date +%s%N)
"$DLJOB" status >"$WORK/active.txt"
active_ms=$((($(date +%s%N) - start) / 1000000))
echo "dljob status --all --json with 10000 jobs: ${all_ms} ms; dljob status: ${active_ms} ms"
check "status --all lists 10000 jobs" 10000 "$(python3 -c 'import json,sys; print(len([json.loads(l) for l in open(sys.argv[1])]))' "$WORK/all.json")"
# The 5 RUNNING rows have no live process and no run dir: not found is UNKNOWN, never COMPLETED.
check "vanished jobs are UNKNOWN, not COMPLETED" 5 "$(grep -c UNKNOWN "$WORK/active.txt" || true)"
finish
