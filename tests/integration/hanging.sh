#!/usr/bin/env bash
# hanging.sh: an sbatch that submits and then hangs. dljob times out (exit 9), keeps the row,
# and the next `dljob status` finds the job by its token: submitted once, never twice.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
mkdir -p "$WORK/bin"
real=$(command -v sbatch)
cat >"$WORK/bin/sbatch" <<SH
#!/bin/bash
"$real" "\$@"
exec sleep 30
SH
chmod +x "$WORK/bin/sbatch"
set +e
# shellcheck disable=SC2046
PATH=$WORK/bin:$PATH DLJOB_COMMAND_TIMEOUT=2 "$DLJOB" submit "$HERE/recipes/ok.yaml" $(site_args test-slurm) >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
check "hung sbatch is a timeout (exit 9)" 9 "$rc"
check "the message says the job is recorded" 1 "$(grep -c 'recorded' "$WORK/err")"
phase=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT phase FROM jobs").fetchone()[0])' "$DLJOB_STORE")
check "the row is kept for reconciliation" submit_unknown "$phase"
state=$(wait_state 1 COMPLETED)
check "status reconciles it by token and follows it" COMPLETED "$state"
check "it got a scheduler id" 1 "$([ -n "$(field 1 scheduler_id)" ] && echo 1 || echo 0)"
token=$(field 1 token)
check "exactly one scheduler job carries the token" 1 "$(squeue -h --me -t all -o '%k' | grep -c "$token")"
finish
