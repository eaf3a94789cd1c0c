#!/usr/bin/env bash
# recipe_all_paths.sh: the real recipes/fashion-mnist.yaml (LeNet on Fashion-MNIST with the
# bundled dltrain, data staged to node-local storage) through the Slurm, PBS, Moab, SHARCNET and
# Big Red II paths at once, shortened the way a user would try a recipe first:
#   dljob submit recipes/fashion-mnist.yaml --set train.max_iter=100 --set resources.memory=1G
# Each job must end COMPLETED with the training's own metrics (final accuracy) in
# `dljob status --json`, and `dljob show` must record the overrides. The five jobs run side by
# side on the test cluster, so the wall time is about that of one.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
recipe=$(cd "$HERE/../.." && pwd)/recipes/fashion-mnist.yaml
data=/usr/share/datasets/fashion-mnist
if [ ! -r "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: $data is missing (apt install dataset-fashion-mnist)"
  exit 77 # ctest: SKIP_RETURN_CODE
fi
max_iter=100
sites=(test-slurm test-pbs test-moab test-sqsub test-bigred2)
declare -A job
for site in "${sites[@]}"; do
  # shellcheck disable=SC2046
  # resources.gpus=0: the test cluster's GPUs are fake, and a job that asks for a GPU renders
  # dltrain --device cuda, which refuses a node without one (a real GPU job must not train on
  # the CPU); the gpu partition's directives for GPUs are the golden files' to check.
  job[$site]=$("$DLJOB" submit "$recipe" $(site_args "$site") --partition gpu \
    --set resources.gpus=0 --set train.max_iter=$max_iter --set resources.memory=1G |
    sed -n 's/^submitted job \([0-9]*\) .*/\1/p' || true)
  check "$site: submit prints a job id" 1 "$([ -n "${job[$site]}" ] && echo 1 || echo 0)"
done

# Until every job has ended (5 minutes at most: five trainings share the machine's cores).
for ((i = 0; i < 300; i++)); do
  "$DLJOB" status --all --json >"$WORK/all.json"
  active=$(python3 -c 'import json,sys; print(sum(j["state"] not in ("COMPLETED","FAILED","CANCELLED","TIMEOUT","UNKNOWN") for j in [json.loads(l) for l in open(sys.argv[1])]))' "$WORK/all.json")
  [ "$active" = 0 ] && break
  sleep 1
done
"$DLJOB" status --all

for site in "${sites[@]}"; do
  id=${job[$site]}
  [ -n "$id" ] || continue
  "$DLJOB" status "$id" --json >"$WORK/job.json"
  get() { python3 -c 'import json,sys; v=[json.loads(l) for l in open(sys.argv[1])][0]
for k in sys.argv[2].split("."): v=(v or {}).get(k)
print("" if v is None else v)' "$WORK/job.json" "$1"; }
  check "$site: fashion-mnist COMPLETED" COMPLETED "$(get state)"
  check "$site: trained to the overridden max_iter" "$max_iter/$max_iter" "$(get metrics.iter)/$(get metrics.max_iter)"
  check "$site: the training finished (not checkpointed)" completed "$(get metrics.final_status)"
  accuracy=$(get metrics.accuracy)
  # Ten classes: chance is 0.1; 100 iterations of LeNet get well above it.
  check "$site: final accuracy reported and above chance" 1 "$(python3 -c 'import sys; print(1 if sys.argv[1] and 0.3 < float(sys.argv[1]) <= 1 else 0)' "$accuracy")"
  echo "$site: job $id accuracy $accuracy"
  "$DLJOB" show "$id" >"$WORK/show.txt"
  check "$site: dljob show records the override" 1 "$(grep -q -- "^# --set train.max_iter=$max_iter\$" "$WORK/show.txt" && echo 1 || echo 0)"
  check "$site: the job script runs dltrain with --max-iter" 1 "$(grep -q -- "--max-iter $max_iter" "$WORK/show.txt" && echo 1 || echo 0)"
  # The staged copy (node-local: /tmp/dljob-<token> in the test sites) is the job's to clean up
  # on a real node; here the test removes it.
  token=$(get token)
  [ -n "$token" ] && rm -rf "/tmp/dljob-$token"
done
finish
