#!/bin/bash
# shellcheck disable=SC2089,SC2090 # values below are single-quoted on purpose
# Spark takes no directives: the whole request is on the spark-submit command below.
# dljob's Spark driver runs this script's batch side (in YARN's application master, or here for
# a standalone master) and starts its compute side once per rank, each in an executor of its
# own (docs/schedulers.md, Spark).
# dljob job script: recipe lenet-mnist, site mapr, partition yarn (spark).
# Rendered by dljob from templates/; edit the recipe or the site profile, not this file.
# note: 2 executor(s) of 11 core(s) and 27927m each, one rank per executor (Spark 1.5: every executor is awaited before the ranks start)
# Submitted with:
#   /opt/mapr/spark/spark-1.5.2/bin/spark-submit --master yarn --deploy-mode cluster --name lenet-mnist --num-executors 2 --executor-cores 11 --executor-memory 27927m --queue default --conf spark.task.cpus=11 --conf spark.dynamicAllocation.enabled=false --conf spark.task.maxFailures=1 --conf spark.yarn.maxAppAttempts=1 --conf spark.yarn.submit.waitAppCompletion=false --conf spark.scheduler.minRegisteredResourcesRatio=1.0 --conf spark.scheduler.maxRegisteredResourcesWaitingTime=300s /opt/dljob/share/dljob/spark/dljob_spark_driver.py --ranks 2 --threads 11 --script /scratch/dljob/runs/golden-run/job.sh --log /scratch/dljob/runs/golden-run/job.log
set -uo pipefail

# Values, each validated or single-quoted by dljob.
DLJOB_RUN_DIR='/scratch/dljob/runs/golden-run'
DLJOB_SCRIPT="$DLJOB_RUN_DIR"/'job.sh'
DLJOB_JOB_TOKEN='golden-token'
DLJOB_SCHEDULER=spark
DLJOB_WALLTIME_SECONDS=3600
DLJOB_WARNING_SIGNAL=USR2
DLJOB_WARNING_SECONDS=120
DLJOB_NODES=1
DLJOB_GPUS_PER_NODE=0
DLJOB_CORES_PER_NODE=2
DLJOB_DATA_SOURCE="${HOME-}"'/data/mnist'
DLJOB_DATA_DIR='/tmp'/'dljob-golden-token'
DLJOB_COMMAND=('/opt/dljob/bin/dltrain' train --config '/opt/dljob/recipes/networks/lenet.yaml' --run-dir "$DLJOB_RUN_DIR" --data-dir "$DLJOB_DATA_DIR" --device cpu --resume auto)
export DLJOB_RUN_DIR DLJOB_JOB_TOKEN DLJOB_SCHEDULER DLJOB_WALLTIME_SECONDS DLJOB_NODES
export DLJOB_GPUS_PER_NODE DLJOB_CORES_PER_NODE DLJOB_DATA_DIR DLJOB_WARNING_SIGNAL DLJOB_WARNING_SECONDS


# ---- prologue -------------------------------------------------------------------------------
dljob_step='start'
dljob_child=''
dljob_data_link='' # set when the compute side linked $DLJOB_DATA_DIR to a staged pack
dljob_data_copy='' # set when the compute side copied a tree (not a pack) to $DLJOB_DATA_DIR

# Writes <run_dir>/NAME atomically (temporary file, then rename).
dljob_write() {
    printf '%s\n' "$2" >"$DLJOB_RUN_DIR/.$1.$$" && mv -f -- "$DLJOB_RUN_DIR/.$1.$$" "$DLJOB_RUN_DIR/$1"
}

# Forwards a signal to the running child (training, or the launcher that runs it). Any signal
# but the walltime warning (a cancel, the walltime's own kill) means the job must not continue
# itself; dljob status decides then, from what the scheduler says.
dljob_stopped=''
# shellcheck disable=SC2034 # dljob_stopped is read by the batch families' epilogue
dljob_forward() {
    if [ "$1" != "$DLJOB_WARNING_SIGNAL" ]; then
        dljob_stopped=$1
    fi
    if [ -n "$dljob_child" ]; then
        kill -s "$1" "$dljob_child" 2>/dev/null || true
    fi
}

# Waits for the child; a trapped signal interrupts `wait`, so wait again until it has exited.
dljob_wait_child() {
    local rc=0
    while true; do
        wait "$dljob_child"
        rc=$?
        if ! kill -0 "$dljob_child" 2>/dev/null; then
            break
        fi
    done
    wait "$dljob_child" 2>/dev/null
    local final=$?
    if [ "$final" -ne 127 ]; then
        rc=$final
    fi
    dljob_child=''
    return "$rc"
}

dljob_trap_signals() {
    trap 'dljob_forward TERM' TERM
    trap 'dljob_forward INT' INT
    trap 'dljob_forward HUP' HUP
    trap 'dljob_forward USR1' USR1
    trap 'dljob_forward USR2' USR2
}

# Compute side: runs where the GPUs are (started by spark on the compute nodes). Stages the data, then runs
# the training in the background and waits, so signals reach the trap at once.
if [ "${1:-}" = "--dljob-compute" ]; then
    dljob_trap_signals
    cd -- "$DLJOB_RUN_DIR" || exit 1
    # shellcheck disable=SC2034 # dljob_self is read where the job stages its data
    dljob_self='/opt/dljob/bin/dljob'
    # shellcheck disable=SC2034
    if [ -n "${DLJOB_SHIPPED_BIN:-}" ]; then
        # dljob's release, shipped to this node with the job (Spark's --archives): its programs,
        # not the submit host's paths, which this node may not have.
        dljob_self=$DLJOB_SHIPPED_BIN/dljob
        if [ "${DLJOB_COMMAND[0]##*/}" = dltrain ]; then
            DLJOB_COMMAND[0]=$DLJOB_SHIPPED_BIN/dltrain
        fi
    fi
    # Once per node (the launcher starts this side once per node). A pack (`dljob pack`) is
    # staged by `dljob stage-data`: one sequential copy, verified, cached per node by its
    # content hash and shared by this user's jobs on the node, each registered as a user of
    # it; $DLJOB_DATA_DIR becomes a link to the staged copy, which dltrain reads through its
    # index. Any other tree is copied file by file into $DLJOB_DATA_DIR, this job's own
    # directory on the node (named by its token), which goes at the end as a staged pack does.
    dljob_step='stage data'
    if [ -f "$DLJOB_DATA_SOURCE/manifest.json" ]; then
        : several ranks on this node: their links to the one staged copy replace each other atomically
        dljob_staged=$("$dljob_self" stage-data "$DLJOB_DATA_SOURCE" --to "$(dirname -- "$DLJOB_DATA_DIR")" --user-pid $$) &&
            ln -s -- "$dljob_staged" "$DLJOB_DATA_DIR.$$" && mv -Tf -- "$DLJOB_DATA_DIR.$$" "$DLJOB_DATA_DIR" && dljob_data_link=1
    else
        dljob_data_copy=1
        echo "dljob: error: $DLJOB_DATA_SOURCE is not a pack, and several ranks on this node would each copy it into one directory: make it a pack (dljob pack) or set data.stage_to: none" >&2 && false
    fi || {
        echo "dljob: error: staging $DLJOB_DATA_SOURCE to $DLJOB_DATA_DIR failed" >&2
        if [ -n "$dljob_data_copy" ]; then
            rm -rf -- "$DLJOB_DATA_DIR" # a partial copy is of use to nobody
        fi
        dljob_write failed_command "$dljob_step"
        exit 1
    }
    dljob_step='train'
    "${DLJOB_COMMAND[@]}" &
    dljob_child=$!
    dljob_wait_child
    dljob_rc=$?
    if [ "$dljob_rc" -ne 0 ] && [ "$dljob_rc" -ne 75 ]; then
        dljob_write failed_command "$dljob_step: ${DLJOB_COMMAND[0]}"
    fi
    if [ -n "$dljob_data_link" ]; then
        : the link stays: another rank of this node may still read through it
        # The staged copy goes with the last job on this node that uses it: node-local disks
        # and RAM disks belong to whoever runs here next.
        "$dljob_self" stage-data "$DLJOB_DATA_SOURCE" --to "$(dirname -- "$DLJOB_DATA_DIR")" --cleanup --user-pid $$ ||
            echo "dljob: warning: could not remove the staged copy of $DLJOB_DATA_SOURCE" >&2
    fi
    if [ -n "$dljob_data_copy" ]; then
        # The copy is this job's alone, and on a RAM disk (Big Red II's ramdisk tier) it is node
        # memory that would outlive the job.
        rm -rf -- "$DLJOB_DATA_DIR" ||
            echo "dljob: warning: could not remove the copy $DLJOB_DATA_DIR of $DLJOB_DATA_SOURCE" >&2
    fi
    exit "$dljob_rc"
fi

# Batch side.
cd -- "$DLJOB_RUN_DIR" || {
    echo "dljob: error: cannot enter the run directory $DLJOB_RUN_DIR" >&2
    exit 1
}
rm -f -- "$DLJOB_RUN_DIR/exit_code" "$DLJOB_RUN_DIR/failed_command"
if [ ! -r "$DLJOB_SCRIPT" ]; then
    DLJOB_SCRIPT=$0 # rendered with -o elsewhere: the compute side runs this copy
fi
# This attempt's own token and number: the script was rendered with the first attempt's token,
# and whoever continued the job (the job itself, dljob status) named the next attempt's token in
# continuation.<token> before submitting it, so the last link of that chain is this attempt.
DLJOB_ATTEMPT=1
dljob_previous_token=''
# shellcheck disable=SC2034 # dljob_previous_token is read by the batch families' epilogue
while [ "$DLJOB_ATTEMPT" -lt 100000 ]; do
    dljob_next=$(sed -n 's/^next_token=//p' "$DLJOB_RUN_DIR/continuation.$DLJOB_JOB_TOKEN" 2>/dev/null | tail -n 1)
    case "$dljob_next" in
    '' | *[!A-Za-z0-9._-]*) break ;;
    esac
    dljob_previous_token=$DLJOB_JOB_TOKEN
    DLJOB_JOB_TOKEN=$dljob_next
    DLJOB_ATTEMPT=$((DLJOB_ATTEMPT + 1))
done
export DLJOB_JOB_TOKEN DLJOB_ATTEMPT
DLJOB_JOB_ID="${DLJOB_SPARK_APP_ID:-}"
# A task of a sweep's job array is named by the array's id and its index (docs/schedulers.md,
# Sweeps as job arrays), which its array script passes; a next attempt this job submits is a
# job of its own, so the name is not passed on.
DLJOB_JOB_ID=${DLJOB_ARRAY_TASK_ID:-$DLJOB_JOB_ID}
unset DLJOB_ARRAY_TASK_ID
DLJOB_JOB_START=$(date +%s)
export DLJOB_JOB_ID DLJOB_JOB_START
dljob_write job_identity "token=$DLJOB_JOB_TOKEN
scheduler=$DLJOB_SCHEDULER
job_id=$DLJOB_JOB_ID
host=$(hostname 2>/dev/null || echo unknown)
started=$DLJOB_JOB_START
pid=$$"

# Ends the job: records the failing step (if any), then exit_code last (readers rely on it);
# none when a next attempt is named (continuation.<token> holds this attempt's end, and an
# exit_code would read as the next attempt's).
dljob_continued=''
dljob_finish() {
    trap - TERM INT HUP USR1 USR2
    if [ -n "${dljob_timer:-}" ]; then
        kill "$dljob_timer" 2>/dev/null || true
    fi
    if [ "$1" -ne 0 ] && [ "$1" -ne 75 ] && [ ! -e "$DLJOB_RUN_DIR/failed_command" ]; then
        dljob_write failed_command "$dljob_step"
    fi
    if [ -z "$dljob_continued" ]; then
        dljob_write exit_code "$1"
    fi
    exit "$1"
}
dljob_fail() {
    echo "dljob: error: $dljob_step failed with exit status $1" >&2
    dljob_finish "$1"
}

# Whether this attempt's training checkpointed and exited: rank 0 writes metrics.jsonl and ends it
# with a final record, which says so, after this attempt began. A launcher's own exit status can
# hide it: mpirun.openmpi, sent SIGTERM, forwards it, both ranks checkpoint and exit 75, and it
# exits 1 (the job would read as failed and not be continued).
dljob_checkpointed() {
    local metrics="$DLJOB_RUN_DIR/metrics.jsonl" last
    [ -f "$metrics" ] && [ "$(stat -c %Y -- "$metrics" 2>/dev/null || echo 0)" -ge "$DLJOB_JOB_START" ] ||
        return 1
    last=$(tail -n 1 -- "$metrics")
    case "$last" in
    *'"type":"final"'*) ;;
    *) return 1 ;;
    esac
    case "$last" in
    *'"status":"checkpointed"'*) return 0 ;;
    esac
    return 1
}

# Loads with `module "$@"` and checks the module is really loaded: Tcl and Cray modules exit 0
# even when a module is missing.
dljob_module() {
    local name="${*: -1}"
    module "$@" || return $?
    case ":${LOADEDMODULES:-}:" in
    *":$name:"* | *":$name/"*) return 0 ;;
    esac
    echo "dljob: error: module $name is not loaded after 'module $*'" >&2
    return 1
}






dljob_trap_signals
# No warning signal from the scheduler: send USR2 to this shell 120 s before the
# walltime; the trap forwards it to the training, which checkpoints and exits 75.
(
    trap 'kill "$dljob_sleep" 2>/dev/null; exit 0' TERM
    sleep "$((DLJOB_WALLTIME_SECONDS > DLJOB_WARNING_SECONDS ? DLJOB_WALLTIME_SECONDS - DLJOB_WARNING_SECONDS : 1))" &
    dljob_sleep=$!
    wait "$dljob_sleep"
    kill -s USR2 "$$"
) >/dev/null 2>&1 &
dljob_timer=$!
dljob_step='run the training through spark launcher'
"${PYSPARK_PYTHON:-python3}" "${DLJOB_SPARK_LAUNCH:?set by the dljob Spark driver}" --launch --ranks 2 -- /bin/bash "$DLJOB_SCRIPT" --dljob-compute &
dljob_child=$!
dljob_wait_child
dljob_rc=$?
if [ "$dljob_rc" -ne 0 ] && [ "$dljob_rc" -ne 75 ] && dljob_checkpointed; then
    echo "dljob: the launcher exited $dljob_rc, but the training checkpointed (metrics.jsonl): exit 75" >&2
    dljob_rc=75
fi

# ---- epilogue -------------------------------------------------------------------------------
# exit_code: 0 finished, 75 checkpointed before the walltime (resume me), anything else failed.

dljob_finish "$dljob_rc"

