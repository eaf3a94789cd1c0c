#!/usr/bin/env bash
# ranks_local.sh: issue 21 on the local site, on any laptop: resources.ranks: 2 renders
# `mpirun.openmpi -n 2 ...` (Open MPI by its Debian name), the job runs two CPU ranks,
# completes, rank 0 alone writes metrics.jsonl, and job.log tags each line with its rank.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
command -v mpirun.openmpi >/dev/null || { echo "SKIP: no mpirun.openmpi (scripts/setup.sh installs it)"; exit 77; }
root=$(cd "$HERE/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no $data (scripts/setup.sh installs it)"; exit 77; }
# CI runs as root, in a container without the ptrace rights of Open MPI's single-copy transport.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none MPIEXEC_TIMEOUT=120
# A session directory of this test's own: mpiruns of tests run at once race to create
# /tmp/ompi.<host>.<uid>, and the loser fails in orte_init ("mkdir ... File exists").
mkdir -p "$WORK/ompi"
export OMPI_MCA_orte_tmpdir_base="$WORK/ompi"
args=(--site local --set resources.gpus=0 --set resources.ranks=2 --set resources.memory=1G
  --set resources.walltime=00:10:00 --set train.max_iter=30 --set train.threads=1
  --set data.stage_to=none)
"$DLJOB" render "$root/recipes/fashion-mnist.yaml" "${args[@]}" >"$WORK/rendered.sh"
check "mpirun.openmpi starts both ranks" 1 \
  "$(grep -c '^mpirun.openmpi -n 2 --tag-output --oversubscribe --bind-to none -- ' "$WORK/rendered.sh")"
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${args[@]}")
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
check "submitted" 1 "$([ -n "$job" ] && [ -d "$run_dir" ] && echo 1 || echo 0)"
check "the job completes" COMPLETED "$(wait_state "$job" COMPLETED)"
check "exit code 0" 0 "$(cat "$run_dir/exit_code" 2>/dev/null)"
check "metrics.jsonl is written once (rank 0): one start record, of 2 ranks" "1 2" \
  "$(python3 -c 'import json,sys; s=[r for r in map(json.loads, open(sys.argv[1])) if r["type"]=="start"]; print(len(s), s[0].get("ranks", 1) if s else 0)' "$run_dir/metrics.jsonl")"
check "job.log tags rank 0's lines" 1 "$(grep -c '^\[1,0\]<stdout>:dltrain: training from iteration 0' "$run_dir/job.log")"
# dljob logs --rank keeps each rank's lines apart, untagged (Open MPI's --tag-output).
check "logs --rank 0 prints rank 0's lines untagged" 1 \
  "$("$DLJOB" logs "$job" --rank 0 | grep -c '^dltrain: training from iteration 0')"
check "logs --rank 0 has no other rank's line" 0 "$("$DLJOB" logs "$job" --rank 0 | grep -c '^\[1,')"
check "logs --rank 1 is not rank 0's" 0 \
  "$("$DLJOB" logs "$job" --rank 1 | grep -c '^dltrain: training from iteration 0')"
# dljob status shows the ranks (issue 21), from the start line, in the table and in --json.
check "status shows the job's 2 ranks" 1 "$("$DLJOB" status "$job" | grep -c "(2 ranks")"
check "status --json has them" 2 \
  "$("$DLJOB" status "$job" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["metrics"]["ranks"])')"
# A walltime warning by SIGTERM (a site whose warning_signal is TERM, as Torque's walltime kill
# is) reaches mpirun, which forwards it: both ranks checkpoint and exit 75, and mpirun.openmpi
# itself exits 1. The job's exit code is 75 all the same (rank 0's final record in metrics.jsonl
# says the training checkpointed), so it reads as checkpointed, not failed. No continuation.
sed 's/^\(  warning_signal:\) .*/\1 TERM/' "$root/site-profiles/local.yaml" >"$WORK/local-term.yaml"
grep -q '^  warning_signal: TERM$' "$WORK/local-term.yaml" || { echo "FAIL: cannot set warning_signal"; exit 1; }
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" --site local --site-file "$WORK/local-term.yaml" \
  --set resources.gpus=0 --set resources.ranks=2 --set resources.memory=1G --set train.threads=1 \
  --set data.stage_to=none --set train.max_iter=1000000 --set resources.walltime=00:01:10 \
  --set checkpoint.signal_margin=60 --set checkpoint.max_continuations=0)
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
check "warned by TERM: the job ends at its warning, not its walltime" TIMEOUT "$(wait_state "$job" TIMEOUT)"
check "warned by TERM: exit code 75 though mpirun exited 1" 75 "$(cat "$run_dir/exit_code" 2>/dev/null)"
check "warned by TERM: the script says why" 1 "$(grep -c 'the launcher exited 1, but the training checkpointed' "$run_dir/job.log")"
check "warned by TERM: rank 0 checkpointed" 1 "$(tail -n 1 "$run_dir/metrics.jsonl" | grep -c '"status":"checkpointed"')"
finish
