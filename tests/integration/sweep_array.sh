#!/usr/bin/env bash
# sweep_array.sh SITE: a sweep is ONE job array where the scheduler has them (issue 22), on the
# real test Slurm (test-slurm: --array=0-2%2), through the Torque wrappers (test-pbs: qsub -t
# 0-2%2) and the Moab shims (test-moab: msub -t dljob[0-2]%2), all running on the test Slurm:
# each point's record holds its task's id in the family's form, Slurm holds one array and
# never runs more than two of its tasks at once (from the tasks' own start and end times),
# every point's status is its own, a point is cancelled alone (by its task's id; the throttled
# task then starts), `dljob cancel SWEEP` ends the whole array with one command, and a point
# that exits 75 continues as a job of its own.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
command -v squeue >/dev/null || { echo "SKIP: no squeue (the test cluster is not running)"; exit 77; }
site=${1:-test-slurm}
family=${site#test-}
# The family's cancel command, its form of task 1 of array A and of the whole array.
case $family in
slurm) cancel=scancel task1='%s_1' whole='%s' ;;
pbs) cancel=qdel task1='%s[1]' whole='%s[]' ;;
moab) cancel=canceljob task1='Moab.%s[1]' whole='Moab.%s' ;;
esac

# Every cancel command dljob runs, logged, then the one it would have run.
mkdir -p "$WORK/bin"
real_cancel=$(command -v "$cancel")
printf '#!/bin/sh\necho "$*" >>"%s"\nexec "%s" "$@"\n' "$WORK/cancel.log" "$real_cancel" >"$WORK/bin/$cancel"
chmod +x "$WORK/bin/$cancel"
export PATH=$WORK/bin:$PATH
: >"$WORK/cancel.log"

points() { # OUTPUT -> "dljob-id scheduler-id" per submitted point
  sed -n "s/^submitted job \([0-9]*\) .* as $family \([^:]*\):.*/\1 \2/p" <<<"$1"
}
slurm_array() { # a point's scheduler id -> the Slurm number of its array
  local id=${1#Moab.}
  echo "${id%%[_[]*}"
}
task_of() { # ARRAY INDEX -> the family's id of that task
  case $family in slurm) echo "$1_$2" ;; pbs) echo "$1[$2]" ;; moab) echo "Moab.$1[$2]" ;; esac
}
task_times() { # ARRAY -> "start end" (epoch seconds) per task, from slurmctld's records
  scontrol show job "$1" -o | tr ' ' '\n' | sed -n 's/^\(StartTime\|EndTime\)=//p' |
    while read -r t; do date -d "$t" +%s; done | paste - -
}

# ---- 1. three points, at most two at once -----------------------------------------------------
# shellcheck disable=SC2046 # site_args is several words
out=$("$DLJOB" submit "$HERE/recipes/sweep.yaml" $(site_args "$site") \
  --sweep command.environment.ACC=0.5,0.9,0.7 --sweep-limit 2 2>/dev/null)
echo "$out"
mapfile -t rows < <(points "$out")
check "three points" 3 "${#rows[@]}"
array=$(slurm_array "${rows[0]#* }")
check "each point is a task of one array, in order" \
  "$(task_of "$array" 0) $(task_of "$array" 1) $(task_of "$array" 2)" \
  "$(for r in "${rows[@]}"; do printf '%s ' "${r#* }"; done | sed 's/ $//')"
# Once tasks start, Slurm shows each running task as its own record, each with the throttle.
check "throttled to two tasks at once" 1 \
  "$(scontrol show job "$array" -o | grep -m1 -c "ArrayTaskThrottle=2")"
for r in "${rows[@]}"; do
  id=${r% *}
  check "point $id completes" COMPLETED "$(wait_state "$id" COMPLETED)"
  check "point $id's status names its task" "${r#* }" "$(field "$id" scheduler_id)"
done
check "Slurm ran one array of three tasks" 3 \
  "$(scontrol show job "$array" -o | grep -c "ArrayJobId=$array ")"
task_times "$array" >"$WORK/times"
cat "$WORK/times"
check "the scheduler ran three tasks" 3 "$(wc -l <"$WORK/times")"
# The most tasks running at one instant: at each task's start, those started and not yet ended.
check "never more than two tasks running" 2 "$(awk '{ s[NR] = $1; e[NR] = $2 }
  END { for (i = 1; i <= NR; i++) { n = 0; for (j = 1; j <= NR; j++) if (s[j] <= s[i] && s[i] < e[j]) n++;
        if (n > most) most = n }; print most }' "$WORK/times")"
check "a task ran after another had ended (the limit held it back)" 1 "$(awk '{ s[NR] = $1; e[NR] = $2 }
  END { for (i = 1; i <= NR; i++) for (j = 1; j <= NR; j++) if (i != j && s[i] >= e[j]) { print 1; exit } print 0 }' "$WORK/times")"
check "each point's own metrics" "0.5 0.9 0.7" \
  "$(for r in "${rows[@]}"; do "$DLJOB" status "${r% *}" --json |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["metrics"]["accuracy"])'; done | xargs)"

# ---- 2. cancel one point, then the sweep --------------------------------------------------------
# shellcheck disable=SC2046
out=$("$DLJOB" submit "$HERE/recipes/sweep_cancel.yaml" $(site_args "$site") --sweep-limit 2 2>/dev/null)
echo "$out"
mapfile -t rows < <(points "$out")
sweep=$(sed -n 's/^sweep \(sw-[0-9a-f]*\): .*/\1/p' <<<"$out")
array=$(slurm_array "${rows[0]#* }")
ids=()
for r in "${rows[@]}"; do ids+=("${r% *}"); done
check "points 1 and 2 run" "RUNNING RUNNING" \
  "$(wait_state "${ids[0]}" RUNNING) $(wait_state "${ids[1]}" RUNNING)"
check "point 3 waits for the limit" PENDING "$(field "${ids[2]}" state)"
check "squeue -r shows the throttled task pending" PENDING \
  "$(squeue -h -r -j "${array}_2" -o %T 2>/dev/null)"
"$DLJOB" cancel "${ids[1]}" >/dev/null
# shellcheck disable=SC2059 # the family's form is the format
check "one point cancelled with its task's id" "$(printf "$task1" "$array")" "$(tail -n 1 "$WORK/cancel.log")"
check "the cancelled point is CANCELLED" CANCELLED "$(field "${ids[1]}" state)"
check "its place goes to point 3" RUNNING "$(wait_state "${ids[2]}" RUNNING)"
check "point 1 still runs" RUNNING "$(field "${ids[0]}" state)"
: >"$WORK/cancel.log"
cancelled=$("$DLJOB" cancel "$sweep")
echo "$cancelled"
# shellcheck disable=SC2059
check "cancel SWEEP is one $cancel of the array" "$(printf "$whole" "$array")" "$(cat "$WORK/cancel.log")"
check "and reports every point" 3 "$(grep -c "^job [0-9]*: CANCELLED" <<<"$cancelled")"
if wait_queue_empty 60; then empty=1; else empty=0; fi
check "the scheduler holds no task of the array" 1 "$empty"
check "Slurm ended every task CANCELLED" 3 \
  "$(scontrol show job "$array" -o | grep -c "JobState=CANCELLED")"

# ---- 3. a point that continues ----------------------------------------------------------------
# Each point of continue.yaml exits 75 twice: its task submits the point's next attempt as a
# job of its own, in the point's run directory, with no dljob command run meanwhile.
# shellcheck disable=SC2046
out=$("$DLJOB" submit "$HERE/recipes/continue.yaml" $(site_args "$site") \
  --sweep command.environment.POINT=1,2 2>/dev/null)
echo "$out"
mapfile -t rows < <(points "$out")
array=$(slurm_array "${rows[0]#* }")
check "two points, one array" "$(task_of "$array" 0) $(task_of "$array" 1)" "${rows[0]#* } ${rows[1]#* }"
if wait_queue_empty 240; then empty=1; else empty=0; fi
check "both chains ended unattended" 1 "$empty"
"$DLJOB" status --all --json >"$WORK/all.json"
for r in "${rows[@]}"; do
  check "point ${r% *}: three attempts in its run directory, the last COMPLETED, attempts 2 and 3 jobs of their own" \
    "TIMEOUT:${r#* } TIMEOUT:job COMPLETED:job 1" "$(python3 - "$WORK/all.json" "${r% *}" <<'PY'
import json, sys
jobs = {j["id"]: j for j in map(json.loads, open(sys.argv[1]))}
chain = [jobs[int(sys.argv[2])]]
while True:
    nxt = [j for j in jobs.values() if j["continues"] == chain[-1]["id"]]
    if not nxt:
        break
    chain.append(nxt[0])
ids = [j["scheduler_id"] if k == 0 else ("job" if "[" not in j["scheduler_id"] and "_" not in j["scheduler_id"] else j["scheduler_id"])
       for k, j in enumerate(chain)]
print(" ".join(f'{j["state"]}:{i}' for j, i in zip(chain, ids)), len({j["run_dir"] for j in chain}))
PY
)"
done
finish
