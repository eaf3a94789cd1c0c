# shellcheck shell=bash
# Shared helpers for the scheduler integration tests (sourced). Each test gets its own job store
# and runs directory, so tests never see each other's jobs.
set -euo pipefail
: "${DLJOB:?DLJOB must name the dljob binary}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dljob-itest.XXXXXX")
# On exit, jobs this test left queued or running are cancelled: the test cluster is shared by
# the tests running beside this one, and 50 abandoned jobs would hold its CPUs for minutes.
cleanup() {
  local ids
  ids=$("$DLJOB" status --json 2>/dev/null |
    python3 -c 'import json,sys; print(" ".join(str(j["id"]) for j in [json.loads(l) for l in sys.stdin]))' 2>/dev/null || true)
  # shellcheck disable=SC2086 # a list of ids
  [ -z "$ids" ] || "$DLJOB" cancel $ids >/dev/null 2>&1 || true
  rm -rf "$WORK" 2>/dev/null || true
}
trap cleanup EXIT
export DLJOB_STORE=$WORK/jobs.db DLJOB_RUNS_DIR=$WORK/runs DLJOB_POLL_INTERVAL=0
if [ -f "${DLJOB_TEST_CLUSTER_DIR:-/tmp/dljob-test-cluster}/env.sh" ]; then
  # shellcheck disable=SC1091
  . "${DLJOB_TEST_CLUSTER_DIR:-/tmp/dljob-test-cluster}/env.sh"
fi
failures=0
check() { # DESCRIPTION EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then
    echo "ok: $1"
  else
    echo "FAIL: $1: expected '$2', got '$3'"
    failures=$((failures + 1))
  fi
}
site_args() { # SITE -> --site/--site-file arguments
  if [ "$1" = local ]; then echo "--site local"; else echo "--site $1 --site-file $HERE/sites/$1.yaml"; fi
}
submit() { # SITE RECIPE [more args] -> prints the dljob job id
  local site=$1 recipe=$2
  shift 2
  # shellcheck disable=SC2046
  "$DLJOB" submit "$HERE/recipes/$recipe.yaml" $(site_args "$site") "$@" | sed -n 's/^submitted job \([0-9]*\) .*/\1/p'
}
field() { # JOB FIELD -> a field of `dljob status JOB --json`
  "$DLJOB" status "$1" --json | python3 -c "import json,sys; v=[json.loads(l) for l in sys.stdin][0]['$2']; print('' if v is None else v)"
}
wait_state() { # JOB STATE...: until the job is in one of the states (4 min at most); prints it
  # Patient: the test node is shared by every test running beside this one, so a job may queue
  # behind others for a while; this checks states, not speed.
  local job=$1 state i
  shift
  for ((i = 0; i < 1200; i++)); do
    state=$(field "$job" state)
    for want in "$@"; do
      [ "$state" = "$want" ] && { echo "$state"; return 0; }
    done
    case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT) echo "$state"; return 0 ;; esac
    sleep 0.2
  done
  echo "$state"
}
# Issue 25's tests wait on the scheduler's own queue, not on dljob: this test's jobs that squeue
# lists in STATES (their work directory is a run directory under $WORK).
queued() { # STATES [RUN_DIR]
  squeue -h --me -t "$1" -o '%Z' 2>/dev/null | grep -c "^${2:-$WORK/}" || true
}
wait_queue_empty() { # [SECONDS]: until the scheduler holds no pending or running job of this test
  local i empty=0
  for ((i = 0; i < ${1:-300} * 4; i++)); do
    if [ "$(queued PD,R,CG,CF,S)" = 0 ]; then
      # Twice in a row: a job submitting its next attempt is still listed while it does.
      empty=$((empty + 1))
      [ "$empty" -ge 2 ] && return 0
    else
      empty=0
    fi
    sleep 0.25
  done
  return 1
}
finish() {
  if [ "$failures" -gt 0 ]; then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all checks passed"
}
