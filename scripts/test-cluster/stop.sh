#!/usr/bin/env bash
# scripts/test-cluster/stop.sh [--purge] -- stops the test cluster started by start.sh: cancels
# its jobs, then stops slurmd, leftover job steps, slurmctld and munged, each by its pid file
# and only when the pid is still that daemon started with our config (never by name).
# --purge also removes the state directory. Exit 0 when nothing of ours is left running.
set -Euo pipefail
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=/usr/sbin:/sbin:$PATH ;; esac

STATE_DIR=${DLJOB_TEST_CLUSTER_DIR:-/tmp/dljob-test-cluster}
RUN=$STATE_DIR/run CONF=$STATE_DIR/etc/slurm.conf MUNGE_SOCKET=$STATE_DIR/munge/munge.socket.2
export SLURM_CONF=$CONF
log() { printf '[test-cluster/stop] %s\n' "$*" >&2; }
[ -d "$STATE_DIR" ] || { log "nothing to stop in $STATE_DIR"; exit 0; }

ours() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(tr -dc '0-9' <"$1")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$3" || return 1
  echo "$pid"
}
failed=0
stop() { # PIDFILE COMM MARKER
  local pid i
  if pid=$(ours "$@"); then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 50; i++)); do
      ours "$@" >/dev/null || break
      sleep 0.2
    done
    if ours "$@" >/dev/null; then
      kill -KILL "$pid" 2>/dev/null
      sleep 0.3
      ours "$@" >/dev/null && { log "$2 (pid $pid) survived SIGKILL"; failed=1; }
    fi
    log "$2 (pid $pid) stopped"
  fi
  rm -f "$1"
}

if ours "$RUN/slurmctld.pid" slurmctld "$CONF" >/dev/null; then
  jobs=$(timeout 10 squeue -h -t PD,R,CG,S -o '%i' 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    # shellcheck disable=SC2086
    timeout 10 scancel $jobs 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do
      [ -z "$(timeout 5 squeue -h -t R,CG -o '%i' 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
fi
stop "$RUN/slurmd.pid" slurmd "$CONF"
# Job steps that outlived slurmd carry our SLURM_CONF in their environment.
for p in $(pgrep -x slurmstepd 2>/dev/null); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then
    kill -KILL "$p" 2>/dev/null || true
  fi
done
stop "$RUN/slurmctld.pid" slurmctld "$CONF"
stop "$RUN/munged.pid" munged "$MUNGE_SOCKET"
if [ "$failed" = 0 ] && [ "${1:-}" = --purge ]; then
  rm -rf "$STATE_DIR"
  log "removed $STATE_DIR"
fi
exit "$failed"
