#!/usr/bin/env bash
# scripts/test-cluster/start.sh -- the project's own single-node Slurm for the integration tests
# (Debian 12, run as root, no systemd): munged, slurmctld and slurmd started by hand with every
# file under one state directory, the Torque wrappers (qsub/qstat/qdel), Lmod with fake test
# modulefiles and fake GPUs. Installs its Debian packages when missing.
#
#   eval "$(scripts/test-cluster/start.sh)"     # start or reuse; prints 'export' lines only
#   scripts/test-cluster/stop.sh [--purge]
#
# Settings (environment): DLJOB_TEST_CLUSTER_DIR (default /tmp/dljob-test-cluster),
# DLJOB_TEST_CLUSTER_CPUS (CPUs advertised, default 8, so several jobs run at once on 2 cores),
# DLJOB_TEST_CLUSTER_GPUS (default 4), DLJOB_TEST_CLUSTER_PORT (slurmctld; slurmd uses +1,
# default 6917: not Slurm's 6817, so a system or testbed Slurm is not disturbed),
# DLJOB_TEST_CLUSTER_INSTALL=no (never run apt-get).
#
# Why it is built this way (learned in ../shared/testbed, see docs/schedulers.md):
# - No file in /etc is written; everything is found through SLURM_CONF, which the clients, the
#   daemons, the Torque wrappers and the jobs honour.
# - Fake GPUs need File= entries (Slurm 22.05 drops file-less gres/gpu): dummy char devices.
# - batch_sched_delay=0 schedules jobs at submit time; EnforcePartLimits=ALL rejects impossible
#   requests at submit instead of leaving them pending; MinJobAge=86400 keeps finished jobs
#   visible to squeue -t all; KillWait=5 makes cancels and timeouts quick.
set -Eeuo pipefail

PROG=test-cluster/start
SECONDS=0
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=/usr/sbin:/sbin:$PATH ;; esac
export PATH

STATE_DIR=${DLJOB_TEST_CLUSTER_DIR:-/tmp/dljob-test-cluster}
CPUS=${DLJOB_TEST_CLUSTER_CPUS:-8}
GPUS=${DLJOB_TEST_CLUSTER_GPUS:-4}
CTLD_PORT=${DLJOB_TEST_CLUSTER_PORT:-6917}
SLURMD_PORT=$((CTLD_PORT + 1))
INSTALL=${DLJOB_TEST_CLUSTER_INSTALL:-auto}
NODE=node01
PACKAGES=(munge slurmctld slurmd slurm-client slurm-wlm-torque lmod)
LMOD_INIT=/usr/share/lmod/lmod/init/bash

log() { printf '[%s %3ss] %s\n' "$PROG" "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd launches jobs as root here)"
case "$STATE_DIR" in /*) ;; *) die "DLJOB_TEST_CLUSTER_DIR must be absolute" ;; esac
case "$STATE_DIR" in *[[:space:]]*) die "DLJOB_TEST_CLUSTER_DIR must not contain spaces" ;; esac
[[ $CPUS =~ ^[1-9][0-9]*$ && $GPUS =~ ^[0-9]+$ && $CTLD_PORT =~ ^[0-9]+$ ]] ||
  die "CPUS, GPUS and PORT must be numbers"

ETC=$STATE_DIR/etc RUN=$STATE_DIR/run LOG=$STATE_DIR/log SPOOL=$STATE_DIR/spool
MUNGE=$STATE_DIR/munge DEV=$STATE_DIR/dev MODULES=$STATE_DIR/modulefiles SW=$STATE_DIR/sw
CONF=$ETC/slurm.conf
MUNGE_SOCKET=$MUNGE/munge.socket.2
export SLURM_CONF=$CONF

# ----------------------------------------------------------------- install --
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$INSTALL" != no ] || die "missing packages: ${missing[*]}"
  command -v apt-get >/dev/null || die "apt-get not found; install: ${missing[*]}"
  log "installing ${missing[*]}"
  mkdir -p "$STATE_DIR"
  # Package scripts would start untracked daemons through invoke-rc.d; forbid that.
  policy=/usr/sbin/policy-rc.d created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && created_policy=1
  fi
  rc=0
  { apt-get -y -q -o DPkg::Lock::Timeout=300 update &&
    DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=300 \
      install --no-install-recommends "${missing[@]}"; } >"$STATE_DIR/apt.log" 2>&1 || rc=$?
  [ "$created_policy" = 0 ] || rm -f "$policy"
  [ "$rc" = 0 ] || { tail -n 20 "$STATE_DIR/apt.log" >&2; die "apt-get failed (exit $rc)"; }
fi

# ------------------------------------------------------------------ helpers --
# ours PIDFILE COMM MARKER: the pid if it is a live COMM whose command line names MARKER; a
# recycled or foreign pid is never signalled.
ours() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(tr -dc '0-9' <"$1")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)" != Z ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$3" || return 1
  echo "$pid"
}
node_ready() {
  case "$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n1)" in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
  esac
}
wait_for() { # DESCRIPTION COMMAND...: up to 30 s
  local what=$1 i
  shift
  for ((i = 0; i < 150; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "timed out waiting for $what (logs in $LOG)"
}
print_env() {
  # What a site's /etc/profile.d/modules.sh does: Lmod plus the test modulefiles. Site profiles
  # of the tests name it as modules.init (written on reuse too, so no restart is needed).
  cat >"$STATE_DIR/lmod-init.sh" <<INIT
# Generated by scripts/test-cluster/start.sh: Lmod with the test cluster's modulefiles.
. $LMOD_INIT
module use $MODULES
INIT
  cat >"$STATE_DIR/env.sh" <<ENV
export SLURM_CONF=$CONF
export DLJOB_TEST_CLUSTER_DIR=$STATE_DIR
export DLJOB_TEST_MODULEPATH=$MODULES
export DLJOB_LMOD_INIT=$LMOD_INIT
export DLJOB_TEST_MODULES_INIT=$STATE_DIR/lmod-init.sh
ENV
  cat "$STATE_DIR/env.sh"
}

SETTINGS="cpus=$CPUS gpus=$GPUS port=$CTLD_PORT"
if [ "$(cat "$STATE_DIR/settings" 2>/dev/null)" = "$SETTINGS" ] &&
  ours "$RUN/munged.pid" munged "$MUNGE_SOCKET" >/dev/null &&
  ours "$RUN/slurmctld.pid" slurmctld "$CONF" >/dev/null &&
  ours "$RUN/slurmd.pid" slurmd "$CONF" >/dev/null && node_ready; then
  log "cluster in $STATE_DIR is up; reusing it"
  print_env
  exit 0
fi

# Anything left over from an earlier run is stopped first; job state starts empty.
"$(dirname "$0")/stop.sh" >/dev/null 2>&1 || true
rm -rf "$ETC" "$RUN" "$LOG" "$SPOOL" "$MUNGE" "$DEV"
mkdir -p "$ETC" "$RUN" "$LOG" "$SPOOL/slurmctld" "$SPOOL/slurmd" "$MUNGE" "$DEV" "$MODULES" "$SW"
chmod 755 "$STATE_DIR" "$MUNGE" # munged checks that the socket's directories are searchable
echo "$SETTINGS" >"$STATE_DIR/settings"
failed_start() {
  local rc=$?
  if [ "$rc" != 0 ]; then
    for f in "$LOG"/munged.log "$LOG"/slurmctld.log "$LOG"/slurmd.log; do
      [ -s "$f" ] && { log "---- $f ----"; tail -n 10 "$f" >&2; }
    done
    "$(dirname "$0")/stop.sh" >/dev/null 2>&1 || true
  fi
}
trap failed_start EXIT

# ------------------------------------------------------------------- munge --
mungekey --create --keyfile="$MUNGE/munge.key" --bits=1024 2>>"$LOG/munged.log"
chmod 600 "$MUNGE/munge.key"
munged --socket="$MUNGE_SOCKET" --key-file="$MUNGE/munge.key" --pid-file="$RUN/munged.pid" \
  --log-file="$LOG/munged.log" --seed-file="$MUNGE/munged.seed" </dev/null >>"$LOG/munged.log" 2>&1
wait_for munged sh -c "munge --socket='$MUNGE_SOCKET' -n | unmunge --socket='$MUNGE_SOCKET'"

# -------------------------------------------------------------- slurm.conf --
hw=$(slurmd -C | head -n1)
field() { sed -n "s/.*[[:space:]]$1=\([0-9]*\).*/\1/p" <<<"$hw"; }
MEM_MB=$(field RealMemory)
[ -n "$MEM_MB" ] || die "cannot read RealMemory from 'slurmd -C': $hw"
gres_node=
: >"$ETC/gres.conf"
if [ "$GPUS" -gt 0 ]; then
  for ((i = 0; i < GPUS; i++)); do
    mknod -m 666 "$DEV/nvidia$i" c 1 3 2>/dev/null || : >"$DEV/nvidia$i"
  done
  gres_node="Gres=gpu:$GPUS"
  echo "NodeName=$NODE Name=gpu File=$DEV/nvidia[0-$((GPUS - 1))]" >"$ETC/gres.conf"
fi
cat >"$CONF" <<CONF
# Generated by scripts/test-cluster/start.sh: single-node test cluster, not for production.
ClusterName=dljobtest
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$SPOOL/slurmctld
SlurmdSpoolDir=$SPOOL/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
MinJobAge=86400
KillWait=5
ReturnToService=2
EnforcePartLimits=ALL
DependencyParameters=kill_invalid_depend
SlurmdParameters=config_overrides
MaxJobCount=100000
GresTypes=gpu
NodeName=$NODE NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB $gres_node State=UNKNOWN
PartitionName=cpu Nodes=$NODE Default=YES DefaultTime=01:00:00 MaxTime=7-00:00:00 State=UP
PartitionName=gpu Nodes=$NODE DefaultTime=01:00:00 MaxTime=7-00:00:00 State=UP
CONF

# ----------------------------------------------------------- slurm daemons --
slurmctld -f "$CONF" </dev/null >>"$LOG/slurmctld.log" 2>&1
wait_for slurmctld sh -c 'scontrol ping | grep -q "is UP"'
slurmd -f "$CONF" -N "$NODE" </dev/null >>"$LOG/slurmd.log" 2>&1
wait_for "node $NODE" node_ready

# ------------------------------------------------------- Lmod modulefiles --
write_module() { # NAME VERSION EXTRA-LUA
  local root=$SW/$1/$2
  mkdir -p "$MODULES/$1" "$root/bin"
  cat >"$MODULES/$1/$2.lua" <<LUA
-- Fake $1 $2 for dljob's tests: sets environment variables only.
help([[Fake $1 $2 (test cluster; no real software)]])
local root = "$root"
$3
prepend_path("PATH", pathJoin(root, "bin"))
LUA
}
write_module cuda 12.4 'family("cuda")
setenv("CUDA_HOME", root)
setenv("CUDA_VERSION", "12.4")'
write_module cudnn 9.0 'prereq("cuda")
setenv("CUDNN_VERSION", "9.0")'
write_module openmpi 4.1 'family("mpi")
setenv("MPI_HOME", root)'

trap - EXIT
log "cluster ready in ${SECONDS}s (state in $STATE_DIR)"
print_env
