#!/usr/bin/env bash
# sweep.sh SITE: submit --sweep (a cartesian product of 3 x 2 points under one sweep id: one
# job array on Slurm, PBS and Moab, a job each on sqsub and local) with --sweep-limit 2: every
# point completes, never more than two run at once, and `dljob sweep ID` lists each point's
# values with its own metrics, best first.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
site=$1

# shellcheck disable=SC2046 # site_args is several words
out=$("$DLJOB" submit "$HERE/recipes/sweep.yaml" $(site_args "$site") \
  --sweep command.environment.ACC=0.5,0.9,0.7 --sweep command.environment.LOSS=1..2 \
  --sweep-limit 2 2>/dev/null)
echo "$out"
sweep=$(sed -n 's/^sweep \(sw-[0-9a-f]*\): .*/\1/p' <<<"$out")
mapfile -t ids < <(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
check "a sweep id" 1 "$([ -n "$sweep" ] && echo 1 || echo 0)"
check "one job per point of the product" 6 "${#ids[@]}"
check "the first point is the first values" 1 \
  "$(grep -c "^submitted job ${ids[0]} .*: command.environment.ACC=0.5 command.environment.LOSS=1\$" <<<"$out")"
for id in "${ids[@]}"; do
  check "point $id completes" COMPLETED "$(wait_state "$id" COMPLETED)"
  check "point $id belongs to the sweep" "$sweep" "$(field "$id" sweep)"
done
# The limit, whatever makes it (an array's %2, or dependencies): at each point's start, the
# points started and not yet ended (dljob's own start and end times, in seconds).
for id in "${ids[@]}"; do echo "$(field "$id" started_at) $(field "$id" finished_at)"; done >"$WORK/times"
check "never more than two points running at once (limit 2)" 1 "$(awk '{ s[NR] = $1; e[NR] = $2 }
  END { for (i = 1; i <= NR; i++) { n = 0; for (j = 1; j <= NR; j++) if (s[j] <= s[i] && s[i] < e[j]) n++;
        if (n > most) most = n }; print (most >= 1 && most <= 2) }' "$WORK/times")"
check "some point waited for another to end" 1 "$(awk '{ s[NR] = $1; e[NR] = $2 }
  END { for (i = 1; i <= NR; i++) for (j = 1; j <= NR; j++) if (i != j && s[i] >= e[j]) { print 1; exit } print 0 }' "$WORK/times")"
table=$("$DLJOB" sweep "$sweep")
echo "$table"
check "the table has a row per point" 6 "$(tail -n +2 <<<"$table" | wc -l)"
# Columns: ID STATE ACC LOSS ITER LOSS ACCURACY; each row's metrics are its own values.
check "each row's metrics are its point's values" 6 "$(tail -n +2 <<<"$table" |
  awk '$3 + 0 == $7 + 0 && $4 + 0 == $6 + 0 { n++ } END { print n + 0 }')"
check "best first: the highest accuracy, then the lowest loss" "0.9 1" \
  "$(awk 'NR == 2 { print $3, $4 }' <<<"$table")"
check "worst last" "0.5 2" "$(awk 'END { print $3, $4 }' <<<"$table")"
set +e
"$DLJOB" sweep sw-000000 >/dev/null 2>&1
rc=$?
set -e
check "an unknown sweep exits 7" 7 "$rc"
finish
