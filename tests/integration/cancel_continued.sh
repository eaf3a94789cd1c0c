#!/usr/bin/env bash
# cancel_continued.sh: on `local`, an attempt the wrapper continued by itself (exit 75) is a
# job like the first: it does not ignore SIGTERM, `dljob cancel` ends it and everything it
# started, and no process of the earlier attempt (its walltime watchdog) is left behind.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
out=$("$DLJOB" submit "$HERE/recipes/continue-then-sleep.yaml" --site local)
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
first_token=$(field "$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")" token)
for ((i = 0; i < 300; i++)); do
  [ -s "$run_dir/sleeper.pid" ] && break
  sleep 0.2
done
check "the second attempt started" 1 "$([ -s "$run_dir/sleeper.pid" ] && echo 1 || echo 0)"
sleeper=$(cat "$run_dir/sleeper.pid")
wrapper=$(sed -n 's/^pid=//p' "$run_dir/local_job")
check "the first attempt's token was read" 1 "$([ -n "$first_token" ] && echo 1 || echo 0)"
# SIGTERM is signal 15: bit 14 of the SigIgn mask in /proc/PID/status.
ignores_term() { # PID -> 1 if it ignores SIGTERM
  local mask
  mask=$(sed -n 's/^SigIgn:\s*//p' "/proc/$1/status" 2>/dev/null)
  [ -n "$mask" ] || { echo gone; return; }
  echo $(((16#$mask >> 14) & 1))
}
check "the continued attempt's wrapper does not ignore SIGTERM" 0 "$(ignores_term "$wrapper")"
check "its training does not ignore SIGTERM" 0 "$(ignores_term "$sleeper")"
"$DLJOB" status --all >/dev/null 2>&1 || true
job=$("$DLJOB" status --all --json | python3 -c '
import json, sys
jobs = [j for j in map(json.loads, sys.stdin) if j["name"] == "itest-cancel-continued"]
print(max(j["id"] for j in jobs) if jobs else "")')
"$DLJOB" cancel "$job" >/dev/null 2>&1
for ((i = 0; i < 100; i++)); do
  kill -0 "$sleeper" 2>/dev/null || kill -0 "$wrapper" 2>/dev/null || break
  sleep 0.1
done
check "cancel ends the continued attempt's training" 0 "$(kill -0 "$sleeper" 2>/dev/null && echo 1 || echo 0)"
check "and its wrapper" 0 "$(kill -0 "$wrapper" 2>/dev/null && echo 1 || echo 0)"
check "the continued attempt reads CANCELLED" CANCELLED "$(field "$job" state)"
# Nothing of the first attempt (its watchdog, its sleep) outlives the chain.
left=$({ grep -lsz "^DLJOB_JOB_TOKEN=$first_token\$" /proc/[0-9]*/environ 2>/dev/null || true; } | wc -l)
check "no process of the first attempt is left" 0 "$left"
finish
