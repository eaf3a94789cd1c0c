#!/usr/bin/env bash
# lifecycle.sh SITE: submit -> running -> completed, a failing job (FAILED with its exit code),
# cancel, and (for a scheduler site) a rejected submit that leaves no row or run directory behind.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
site=$1

ok=$(submit "$site" ok)
check "submit prints a job id" 1 "$([ -n "$ok" ] && echo 1 || echo 0)"
check "job reaches RUNNING or beyond" ok "$(case $(wait_state "$ok" RUNNING) in RUNNING | COMPLETED) echo ok ;; *) echo bad ;; esac)"
check "job completes" COMPLETED "$(wait_state "$ok" COMPLETED)"
check "its output is in the log" 1 "$("$DLJOB" logs "$ok" | grep -c integration-ok)"

bad=$(submit "$site" fail)
check "failing job is FAILED" FAILED "$(wait_state "$bad" FAILED)"
check "with its exit code" 3 "$(field "$bad" exit_code)"

long=$(submit "$site" sleep)
wait_state "$long" RUNNING >/dev/null
"$DLJOB" cancel "$long" >/dev/null
check "cancelled job is CANCELLED" CANCELLED "$(field "$long" state)"
sleep 2
check "and stays CANCELLED" CANCELLED "$(field "$long" state)"

# Several ids at once, one of them unknown: like scancel, the others are still cancelled, the
# unknown one is named, and the exit status says something failed (7: not found).
first=$(submit "$site" sleep)
second=$(submit "$site" sleep)
set +e
err=$("$DLJOB" cancel "$first" 999999 "$second" 2>&1 >/dev/null)
rc=$?
set -e
check "cancel with an unknown id among others exits 7" 7 "$rc"
check "and names the unknown id" 1 "$(grep -c 'job 999999' <<<"$err")"
check "the jobs around it are cancelled" "CANCELLED CANCELLED" "$(field "$first" state) $(field "$second" state)"

if [ "$site" != local ]; then
  before=$("$DLJOB" status --all --json | python3 -c 'import json,sys; print(len([json.loads(l) for l in sys.stdin]))')
  dirs_before=$(find "$DLJOB_RUNS_DIR" -mindepth 1 -maxdepth 1 | wc -l)
  set +e
  # shellcheck disable=SC2046
  err=$("$DLJOB" submit "$HERE/recipes/ok.yaml" $(site_args "$site-reject") 2>&1 >/dev/null)
  rc=$?
  set -e
  check "rejected submit exits 4" 4 "$rc"
  check "with the scheduler's reason" 1 "$(grep -qi 'partition' <<<"$err" && echo 1 || echo 0)"
  after=$("$DLJOB" status --all --json | python3 -c 'import json,sys; print(len([json.loads(l) for l in sys.stdin]))')
  check "and leaves no row" "$before" "$after"
  check "nor a run directory" "$dirs_before" "$(find "$DLJOB_RUNS_DIR" -mindepth 1 -maxdepth 1 | wc -l)"
fi
"$DLJOB" status --all
finish
