#!/usr/bin/env bash
# shell_cluster.sh FAMILY (slurm | pbs | moab | bigred2): `dljob shell --gpus N` through a real terminal
# against the project's test Slurm: salloc for slurm, `qsub -I` through Slurm's Torque wrapper
# for pbs, `msub -I -x` through tests/shims/msub for moab; bigred2 is pbs with the aprun
# launcher, whose shell is on a service node: DLJOB_LAUNCH (aprun, tests/shims) reaches the GPU. The shell must land inside the
# allocation (job id set, 2 of the node's 4 fake GPUs in CUDA_VISIBLE_DEVICES), with the site's
# modules loaded from the test cluster's Lmod, be listed as an interactive job, and `exit` must
# release the allocation and end the row. Also: a request over the partition's limits (exit 3,
# nothing asked), a queue the scheduler refuses (exit 4, row FAILED, nothing allocated) and, for
# slurm, a hangup of dljob (allocation released, row CANCELLED).
# shellcheck disable=SC1091,SC2016 # SC2016: probes are typed into the session, expanded there
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/shell_lib.sh"
family=$1
scheduler=$family launcher=none cores=8 gpus=4 want=2
# The test node's 4 GPUs are shared with other tests: one is enough to see the translation.
[ "$family" = slurm ] || want=1
if [ "$family" = bigred2 ]; then
  # XK7-like: whole nodes with one GPU that comes with the node (no GPU directive).
  scheduler=pbs launcher=aprun cores=2 gpus=1 want=1
fi
: "${DLJOB_TEST_MODULES_INIT:?scripts/test-cluster/env.sh must define it (scripts/test-cluster/start.sh)}"
site=test-shell-$family
cat >"$WORK/$site.yaml" <<YAML
# The test cluster seen through the $family family, with its GPUs and Lmod modulefiles.
name: $site
description: Test cluster for dljob shell ($family)
modules:
  system: lmod
  init: $DLJOB_TEST_MODULES_INIT
  needs:
    cuda: [cuda/12.4]
    cudnn: [cudnn/9.0]
scheduler:
  job_name_max: 15
  job_name_pattern: "^[A-Za-z][A-Za-z0-9_-]*\$"
  warning_signal: USR2
  grace_seconds: 10
default_partition: gpu
partitions:
  gpu:
    queue: gpu
    scheduler: $scheduler
    launcher: $launcher
    node: {cores: $cores, memory: 2G, gpus: $gpus, gpu_model: fake}
    max_nodes: 1
    walltime: {default: "00:10:00", max: "01:00:00"}
storage:
  home: {path: \$HOME, network: false}
  node-local: {path: $WORK/node, per_node: true, network: false}
YAML
mkdir -p "$WORK/node" "$WORK/data/sub"
echo payload >"$WORK/data/sub/sample.txt"
cat >"$WORK/recipe.yaml" <<YAML
name: shell-recipe
resources:
  walltime: "00:05:00"
data:
  source: $WORK/data
  stage_to: node-local
command:
  argv: [bash, -c, 'cat "\$DLJOB_DATA_DIR/sub/sample.txt" >staged-copy.txt; echo "ran in \$(pwd)"']
YAML
sed -e "s/^name: .*/name: $site-refused/" -e 's/queue: gpu/queue: nosuch/' \
  "$WORK/$site.yaml" >"$WORK/$site-refused.yaml"
args=(--site "$site" --site-file "$WORK/$site.yaml")
state() { "$DLJOB" status --all --json | python3 -c "import json,sys; j=[json.loads(l) for l in sys.stdin][0]; print(j['$1'])"; }

set +e
err=$("$DLJOB" shell "${args[@]}" --gpus "$want" --time 2:00:00 2>&1)
rc=$?
set -e
check "over the partition's walltime: exit 3 before asking $family" 3 "$rc"
check "naming the maximum" 1 "$(grep -q '01:00:00' <<<"$err" && echo 1 || echo 0)"
check "and leaves no row" 0 "$("$DLJOB" status --all --json | python3 -c 'import json,sys; print(len([json.loads(l) for l in sys.stdin]))')"

tmux_start
tmux_type "\"$DLJOB\" shell --site $site-refused --site-file $WORK/$site-refused.yaml; echo \"REFUSED-EXIT=\$?\""
wait_for '^REFUSED-EXIT=' 60
check "a queue the scheduler refuses: exit 4" 4 "$(screen_text | sed -n 's/^REFUSED-EXIT=//p' | tail -n 1)"
check "with dljob's message" 1 "$(screen_text | grep -q 'no interactive session' && echo 1 || echo 0)"
check "the row ended FAILED" FAILED "$(state state)"
check "nothing is allocated" 0 "$(squeue -h -t PD,R,CG -o '%k %j' 2>/dev/null | grep -c "$(state token)")"
tmux_reset
tmux_type "export PATH='$PATH' SLURM_CONF='$SLURM_CONF'"
tmux_type "\"$DLJOB\" shell ${args[*]} --gpus $want --time 5:00; echo \"DLJOB-EXIT=\$?\""
wait_for "^\[dljob $site [A-Za-z.]*[0-9]+\]" 150 # queued behind other tests' jobs at worst
job=$(probe job '$DLJOB_JOB_ID')
slurm_job=$(probe slurmjob '$SLURM_JOB_ID')
check "DLJOB_JOB_ID is set" 1 "$([ -n "$job" ] && echo 1 || echo 0)"
check "the shell is inside the allocation (SLURM_JOB_ID is the job)" 1 "$([ -n "$slurm_job" ] && [ "${job##*.}" = "$slurm_job" ] && echo 1 || echo 0)"
check "squeue lists the allocation as running" R "$(squeue -h -j "$slurm_job" -o %t 2>/dev/null)"
if [ "$family" = bigred2 ]; then
  check "the shell says it is on a service node" 1 "$(screen_text | grep -q 'service (MOM) node' && echo 1 || echo 0)"
  check "DLJOB_LAUNCH is aprun for the node" "aprun -n 1 -N 1 -d 2 -cc none" "$(probe launch '$DLJOB_LAUNCH')"
  check "and runs a command" via-aprun "$(probe viaaprun '$($DLJOB_LAUNCH printf via-aprun)')"
else
  count_gpus='$(echo "$CUDA_VISIBLE_DEVICES" | tr , " " | wc -w)'
  check "$want GPUs are visible" "$want" "$(probe gpus "$count_gpus")"
fi
loaded='$(module -t list 2>&1 | sort | xargs)'
check "the site's modules are loaded" "cuda/12.4 cudnn/9.0" "$(probe modules "$loaded")"
check "the user's ~/.bashrc was sourced" sourced "$(probe bashrc '$DLJOB_TEST_BASHRC')"
check "DLJOB_SITE is set" "$site" "$(probe site '$DLJOB_SITE')"
check "status lists an interactive job, RUNNING" "interactive RUNNING" "$(state name) $(state state)"
main_id=$(state id)
check "srun typed in the session starts a step at once" "$slurm_job" "$(probe nested '$(timeout 20 srun -n1 printenv SLURM_JOB_ID)')"
if [ "$family" = slurm ]; then
  # Ctrl-C while a second session waits in the queue (this one holds 2 of the 4 GPUs).
  tmux -L "$TMUX_SOCKET" new-window -t "$PANE" -n queued "bash --norc --noprofile"
  PANE=session:queued
  tmux_type "\"$DLJOB\" shell ${args[*]} --gpus 4 --time 5:00; echo \"QUEUED-EXIT=\$?\""
  wait_for 'queued and waiting for resources' 60
  tmux -L "$TMUX_SOCKET" send-keys -t "$PANE" C-c
  wait_for '^QUEUED-EXIT=' 60
  check "Ctrl-C while queued: exit 130" 130 "$(screen_text | sed -n 's/^QUEUED-EXIT=//p' | tail -n 1)"
  check "the queued session's row is CANCELLED" CANCELLED "$(state state)"
  check "and nothing of it is left" 0 "$(squeue -h -t PD,R,CG -o '%k %j' 2>/dev/null | grep -c "$(state token)")"
  tmux -L "$TMUX_SOCKET" kill-window -t "$PANE"
  PANE=session
fi
tmux_type "exit"
wait_for '^DLJOB-EXIT=' 60
check "dljob exits 0 after exit" 0 "$(screen_text | sed -n 's/^DLJOB-EXIT=//p' | tail -n 1)"
check "squeue shows nothing left" "" "$(squeue -h -t PD,R,CG -j "$slurm_job" -o %i 2>/dev/null)"
check "the row ended COMPLETED" COMPLETED "$(field "$main_id" state)"
sched_id=$(field "$main_id" scheduler_id)
check "with the allocation's id" "$slurm_job" "${sched_id##*.}"
if [ "$family" = slurm ]; then
  # --recipe: the data is staged and the run directory prepared; dljob_run runs the command.
  tmux_reset
  tmux_type "\"$DLJOB\" shell ${args[*]} --recipe $WORK/recipe.yaml; echo \"RECIPE-EXIT=\$?\""
  wait_for "^\[dljob $site [0-9]+\]" 150
  run_dir=$(probe recipedir '$DLJOB_RUN_DIR')
  check "--recipe: the data is staged to the node-local tier" payload "$(cat "$WORK/node/dljob-$(state token)/sub/sample.txt" 2>/dev/null)"
  check "--recipe: the run directory holds the job script and the recipe" 2 "$(find "$run_dir" -maxdepth 1 \( -name job.sh -o -name recipe.yaml \) | wc -l)"
  tmux_type "dljob_run"
  wait_for '^ran in /' 30
  check "--recipe: dljob_run runs the command in the run directory" "ran in $run_dir" "$(screen_text | grep '^ran in /' | tail -n 1)"
  check "--recipe: reading the staged data" payload "$(cat "$run_dir/staged-copy.txt" 2>/dev/null)"
  tmux_type "exit"
  wait_for '^RECIPE-EXIT=' 60
  # A hangup of dljob (its terminal closed) ends the session and releases the allocation.
  tmux_reset
  tmux_type "\"$DLJOB\" shell ${args[*]} --gpus 1 --time 5:00; echo \"HUP-EXIT=\$?\""
  wait_for "^\[dljob $site [0-9]+\]" 150
  hup_job=$(probe hupjob '$SLURM_JOB_ID')
  pane_shell=$(tmux -L "$TMUX_SOCKET" display-message -p -t "$PANE" '#{pane_pid}')
  dljob_pid=$(ps -o pid= --ppid "$pane_shell" | head -n 1 | tr -d ' ')
  kill -HUP "$dljob_pid"
  wait_for '^HUP-EXIT=' 60
  check "a hangup of dljob exits 130" 130 "$(screen_text | sed -n 's/^HUP-EXIT=//p' | tail -n 1)"
  check "and releases the allocation" "" "$(squeue -h -t PD,R,CG -j "$hup_job" -o %i 2>/dev/null)"
  check "the row ended CANCELLED" CANCELLED "$(state state)"
fi
finish
