#!/usr/bin/env bash
# shell_local.sh: `dljob shell` on the local site through a real terminal (no scheduler), and
# the refusals that must leave nothing behind: over the node's limits (exit 3 before any
# scheduler is asked) and SHARCNET's sqsub, which has no interactive mode (exit 4); and
# `dljob cancel` of an open session ends it.
# shellcheck disable=SC1091,SC2016 # SC2016: probes are typed into the session, expanded there
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/shell_lib.sh"

rows() { "$DLJOB" status --all --json | python3 -c 'import json,sys; print(len([json.loads(l) for l in sys.stdin]))'; }

set +e
err=$("$DLJOB" shell --site local --gpus 99 2>&1)
rc=$?
set -e
check "a request over the node's GPUs exits 3" 3 "$rc"
# The local site is this machine: its GPUs (none here, or a few) are what is found here.
check "naming the limit" 1 "$(grep -Eq 'this machine has (none|[0-9]+)' <<<"$err" && echo 1 || echo 0)"
check "and records nothing" 0 "$(rows)"
set +e
err=$("$DLJOB" shell --site sharcnet --gpus 1 2>&1)
rc=$?
set -e
check "sqsub has no interactive mode: exit 4" 4 "$rc"
check "saying so, with the closest thing" 1 "$(grep -q 'no interactive mode' <<<"$err" && grep -q 'screen -D -m' <<<"$err" && echo 1 || echo 0)"
check "and records nothing" 0 "$(rows)"
dry=$("$DLJOB" shell --site bigred2 --gpus 1 --dry-run 2>&1)
check "dry run: Big Red II asks qsub -I for the gpu queue" 1 "$(grep -Eq '^qsub -I .*-q gpu .*nodes=1:ppn=16' <<<"$dry" && echo 1 || echo 0)"
check "dry run: and exports the aprun helper" 1 "$(grep -q "^DLJOB_LAUNCH='aprun -n 1 -N 1 -d 16 -cc none'" <<<"$dry" && echo 1 || echo 0)"
check "dry run: records nothing" 0 "$(rows)"
check "dry run: creates no run directory" 0 "$(find "$DLJOB_RUNS_DIR" -mindepth 1 2>/dev/null | wc -l)"

tmux_start
tmux_type "\"$DLJOB\" shell --site local --cores 2; echo \"DLJOB-EXIT=\$?\""
wait_for '^\[dljob local local-[0-9]+\]' 30
check "the prompt shows the site and the job id" 1 "$(screen_text | grep -Eq '^\[dljob local local-[0-9]+\]' && echo 1 || echo 0)"
check "DLJOB_SITE is set" local "$(probe site '$DLJOB_SITE')"
check "DLJOB_RUN_DIR is the session's run dir" 1 "$(case $(probe rundir '$DLJOB_RUN_DIR') in "$DLJOB_RUNS_DIR"/interactive-*) echo 1 ;; *) echo 0 ;; esac)"
check "the shell starts in it" 1 "$([ "$(probe pwd '$PWD')" = "$(probe rundir2 '$DLJOB_RUN_DIR')" ] && echo 1 || echo 0)"
check "the user's ~/.bashrc was sourced" sourced "$(probe bashrc '$DLJOB_TEST_BASHRC')"
check "DLJOB_CORES_PER_NODE follows --cores" 2 "$(probe cores '$DLJOB_CORES_PER_NODE')"
check "status lists the session as interactive, RUNNING" "interactive RUNNING" "$("$DLJOB" status --json | python3 -c 'import json,sys; j=[json.loads(l) for l in sys.stdin][0]; print(j["name"], j["state"])')"
tmux_type "exit 3"
wait_for '^DLJOB-EXIT=' 20
check "dljob exits with the shell's status" 3 "$(screen_text | sed -n 's/^DLJOB-EXIT=//p' | tail -n 1)"
check "the row ended COMPLETED" COMPLETED "$("$DLJOB" status --all --json | python3 -c 'import json,sys; print([json.loads(l) for l in sys.stdin][0]["state"])')"
tmux_reset
tmux_type "\"$DLJOB\" shell --site local; echo \"CANCEL-EXIT=\$?\""
wait_for '^\[dljob local local-[0-9]+\]' 30
# The session's own row, by id, once it runs (not whichever row status lists first).
session=""
for ((i = 0; i < 150; i++)); do
  session=$("$DLJOB" status --json | python3 -c 'import json,sys; print(" ".join(str(j["id"]) for j in [json.loads(l) for l in sys.stdin] if j["state"] == "RUNNING"))')
  [ -n "$session" ] && break
  sleep 0.2
done
check "the second session runs" 1 "$([ -n "$session" ] && [ "${session// /}" = "$session" ] && echo 1 || echo 0)"
"$DLJOB" cancel "$session" >/dev/null
wait_for '^CANCEL-EXIT=' 20
check "dljob cancel ends a session" 1 "$(screen_text | grep -q '^CANCEL-EXIT=' && echo 1 || echo 0)"
check "and the row stays CANCELLED" CANCELLED "$("$DLJOB" status --all --json | python3 -c 'import json,sys; print(next(j["state"] for j in [json.loads(l) for l in sys.stdin] if str(j["id"]) == sys.argv[1]))' "$session")"
finish
