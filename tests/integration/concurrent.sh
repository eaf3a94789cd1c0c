#!/usr/bin/env bash
# concurrent.sh SITE N: N dljob submits at once: none lost, none duplicated.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
site=$1 n=${2:-50}
pids=()
for ((i = 0; i < n; i++)); do
  submit "$site" quick >"$WORK/id.$i" 2>"$WORK/err.$i" &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed=$((failed + 1))
    echo "submit $i failed: $(cat "$WORK/err.$i")"
  fi
done
check "every submit succeeded" 0 "$failed"
check "N distinct dljob ids" "$n" "$(cat "$WORK"/id.* | sort -u | grep -c .)"
"$DLJOB" status --all --json >"$WORK/all.json"
check "N rows in the store" "$n" "$(python3 -c 'import json,sys; print(len([json.loads(l) for l in open(sys.argv[1])]))' "$WORK/all.json")"
check "N distinct scheduler ids" "$n" "$(python3 -c 'import json,sys; print(len({j["scheduler_id"] for j in [json.loads(l) for l in open(sys.argv[1])]}))' "$WORK/all.json")"
if [ "$site" != local ]; then
  tokens=$(python3 -c 'import json,sys; print("\n".join(j["token"] for j in [json.loads(l) for l in open(sys.argv[1])]))' "$WORK/all.json")
  found=0
  # The token travels in Slurm's comment, elsewhere in the job name dlj-<token>.
  listing=$(squeue -h --me -t all -o '%k %j')
  for t in $tokens; do
    c=$(grep -c -- "$t" <<<"$listing" || true)
    [ "$c" = 1 ] && found=$((found + 1))
  done
  check "each token exactly once in the scheduler" "$n" "$found"
fi
finish
