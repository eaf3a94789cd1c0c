#!/usr/bin/env bash
# hanging.sh SITE...: the site's submit command (sbatch, qsub, msub, sqsub) submits and then
# hangs. dljob times out (exit 9), keeps the row, and the next `dljob status` finds the job by
# its token: submitted once, never twice. All sites at once, each with its own hanging command.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || set -- test-slurm
submit_program() {
  case "$1" in
    test-slurm) echo sbatch ;;
    test-pbs | test-bigred2) echo qsub ;;
    test-moab) echo msub ;;
    test-sqsub) echo sqsub ;;
    *) echo "hanging.sh: no submit program known for $1" >&2; exit 2 ;;
  esac
}
# The timeout must outlast a real submit on a busy machine, and the hang must outlast it.
timeout_s=8
for site in "$@"; do
  program=$(submit_program "$site")
  real=$(command -v "$program")
  mkdir -p "$WORK/bin-$site"
  cat >"$WORK/bin-$site/$program" <<SH
#!/bin/bash
"$real" "\$@"
exec sleep 120
SH
  chmod +x "$WORK/bin-$site/$program"
  (
    set +e
    # shellcheck disable=SC2046
    PATH=$WORK/bin-$site:$PATH DLJOB_COMMAND_TIMEOUT=$timeout_s "$DLJOB" submit \
      "$HERE/recipes/ok.yaml" $(site_args "$site") >"$WORK/out.$site" 2>"$WORK/err.$site"
    echo $? >"$WORK/rc.$site"
  ) &
done
wait
for site in "$@"; do
  check "$site: hung submit is a timeout (exit 9)" 9 "$(cat "$WORK/rc.$site")"
  id=$(sed -n 's/.*(job \([0-9]*\) recorded.*/\1/p' "$WORK/err.$site")
  check "$site: the message says the job is recorded" 1 "$([ -n "$id" ] && echo 1 || echo 0)"
  [ -n "$id" ] || { cat "$WORK/err.$site"; continue; }
  phase=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT phase FROM jobs WHERE id=?", (int(sys.argv[2]),)).fetchone()[0])' "$DLJOB_STORE" "$id")
  check "$site: the row is kept for reconciliation" submit_unknown "$phase"
  echo "$id" >"$WORK/id.$site"
done
for site in "$@"; do
  [ -f "$WORK/id.$site" ] || continue
  id=$(cat "$WORK/id.$site")
  check "$site: status reconciles it by token and follows it" COMPLETED "$(wait_state "$id" COMPLETED)"
  check "$site: it got a scheduler id" 1 "$([ -n "$(field "$id" scheduler_id)" ] && echo 1 || echo 0)"
  token=$(field "$id" token)
  # The token travels in Slurm's comment, elsewhere in the job name dlj-<token>.
  check "$site: exactly one scheduler job carries the token" 1 "$(squeue -h --me -t all -o '%k %j' | grep -c -- "$token")"
done
"$DLJOB" status --all
finish
