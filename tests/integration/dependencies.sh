#!/usr/bin/env bash
# dependencies.sh SITE: submit --after ID[:ok|any]. The dependant waits (PENDING, "waiting on
# job ID") while the job it names runs, starts only after that job ended, and an afterok one
# whose job failed never runs and says so.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
site=$1

gate() { # NAME -> a gated job's id; the job ends when "$WORK/NAME" gets its exit status
  submit "$site" gate --set "command.environment.GATE=$WORK/$1"
}

# afterok, first job completes: the second starts only after it.
first=$(gate one)
wait_state "$first" RUNNING >/dev/null
second=$(submit "$site" ok --after "$first")
sleep 3
check "afterok dependant is pending while the first runs" PENDING "$(field "$second" state)"
check "and says what it waits on" "waiting on job $first (afterok)" "$(field "$second" reason)"
echo 0 >"$WORK/one"
check "first completes" COMPLETED "$(wait_state "$first" COMPLETED)"
check "then the dependant completes" COMPLETED "$(wait_state "$second" COMPLETED)"
check "it started no earlier than the first ended" 1 \
  "$([ "$(field "$second" started_at)" -ge "$(field "$first" finished_at)" ] && echo 1 || echo 0)"

# afterany, first job fails: the second still runs, after it.
third=$(gate two)
wait_state "$third" RUNNING >/dev/null
fourth=$(submit "$site" ok --after "$third:any")
sleep 3
check "afterany dependant is pending" PENDING "$(field "$fourth" state)"
check "and says so" "waiting on job $third (afterany)" "$(field "$fourth" reason)"
echo 3 >"$WORK/two"
check "first of the afterany pair fails" FAILED "$(wait_state "$third" FAILED)"
check "the afterany dependant runs anyway" COMPLETED "$(wait_state "$fourth" COMPLETED)"
check "after it" 1 \
  "$([ "$(field "$fourth" started_at)" -ge "$(field "$third" finished_at)" ] && echo 1 || echo 0)"

# afterok, first job fails: the dependant never runs, and status says why.
fifth=$(gate three)
wait_state "$fifth" RUNNING >/dev/null
sixth=$(submit "$site" ok --after "$fifth")
echo 3 >"$WORK/three"
check "the job waited on fails" FAILED "$(wait_state "$fifth" FAILED)"
check "the afterok dependant is CANCELLED" CANCELLED "$(wait_state "$sixth" CANCELLED)"
check "never having run" "$(field "$sixth" finished_at)" "$(field "$sixth" started_at)"
check "and is reported as never running" 1 \
  "$(grep -c "never runs: job $fifth it waited on (afterok) ended FAILED" <<<"$(field "$sixth" reason)")"
# shellcheck disable=SC2002 # the log may not exist: no output at all would read as "ran"
check "its program never ran" 0 "$(cat "$(field "$sixth" run_dir)/job.log" 2>/dev/null | grep -c integration-ok || true)"
# A new afterok on a job known to have failed is refused at once.
set +e
# shellcheck disable=SC2046 # site_args is several words
err=$("$DLJOB" submit "$HERE/recipes/ok.yaml" $(site_args "$site") --after "$fifth" 2>&1 >/dev/null)
rc=$?
set -e
check "afterok on a failed job is refused" 2 "$rc"
check "naming why" 1 "$(grep -c 'would never run' <<<"$err")"
"$DLJOB" status --all
finish
