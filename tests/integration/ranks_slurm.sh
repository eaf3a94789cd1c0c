#!/usr/bin/env bash
# ranks_slurm.sh: issue 21 through the real test Slurm. A train: recipe with resources.ranks: 2
# on a partition whose launcher is srun renders `srun --ntasks-per-node=2 ...`; the job runs two
# dltrain ranks (MPICH's plugin joined through Slurm's PMI-2), completes, and rank 0 alone writes
# metrics.jsonl: one start record, saying 2 ranks and the global batch. job.log keeps the
# ranks' lines apart (srun --label).
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
command -v squeue >/dev/null || { echo "SKIP: no squeue (the test cluster is not running)"; exit 77; }
root=$(cd "$HERE/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no $data (scripts/setup.sh installs it)"; exit 77; }
args=(--site test-slurm --site-file "$HERE/sites/test-slurm.yaml" --partition ranks
  --set resources.gpus=0 --set resources.ranks=2 --set resources.memory=1G
  --set resources.walltime=00:10:00 --set train.max_iter=30 --set train.threads=1
  --set data.stage_to=none)
"$DLJOB" render "$root/recipes/fashion-mnist.yaml" "${args[@]}" >"$WORK/rendered.sh"
check "the script asks Slurm for 2 tasks on the node" 1 \
  "$(grep -c '^#SBATCH --ntasks-per-node=2$' "$WORK/rendered.sh")"
check "srun starts both ranks" 1 \
  "$(grep -c '^srun --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --kill-on-bad-exit=1 --label --mpi=pmi2 -- ' "$WORK/rendered.sh")"
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${args[@]}")
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
check "submitted" 1 "$([ -n "$job" ] && [ -d "$run_dir" ] && echo 1 || echo 0)"
check "the job completes" COMPLETED "$(wait_state "$job" COMPLETED)"
check "exit code 0" 0 "$(cat "$run_dir/exit_code" 2>/dev/null)"
read -r starts ranks global finals < <(python3 - "$run_dir/metrics.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
starts = [r for r in records if r["type"] == "start"]
finals = [r for r in records if r["type"] == "final"]
print(len(starts), starts[0].get("ranks", 1) if starts else 0,
      starts[0].get("global_batch_size", 0) if starts else 0, len(finals))
PY
)
check "metrics.jsonl is written once (rank 0): one start record" 1 "$starts"
check "one final record" 1 "$finals"
check "the training ran as 2 ranks" 2 "$ranks"
check "the global batch is 2 x 64" 128 "$global"
check "the log says 2 ranks" 1 "$(grep -c '2 ranks x batch 64 = 128' "$run_dir/job.log")"
# srun --label: each rank's lines in job.log carry its rank; dltrain's own lines come from rank 0.
check "rank 0's lines are labelled" 1 "$(grep -c '^0: dltrain: training from iteration 0' "$run_dir/job.log")"
check "no unlabelled dltrain line" 0 "$(grep -c '^dltrain:' "$run_dir/job.log")"
check "logs --rank 0 prints rank 0's lines without the label" 1 \
  "$("$DLJOB" logs "$job" --rank 0 | grep -c '^dltrain: training from iteration 0')"
# dljob status shows the ranks (issue 21), from the start line, in the table and in --json.
check "status shows the job's 2 ranks" 1 "$("$DLJOB" status "$job" | grep -c "(2 ranks")"
check "status --json has them" 2 \
  "$("$DLJOB" status "$job" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["metrics"]["ranks"])')"
finish
