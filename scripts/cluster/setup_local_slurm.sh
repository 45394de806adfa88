#!/usr/bin/env bash
# A single-node SLURM cluster on localhost (Debian's slurm-wlm + munge), for tests and demos.
#
#   sudo scripts/cluster/setup_local_slurm.sh      # install if missing, configure, start; idempotent
#   sudo scripts/cluster/teardown_local_slurm.sh   # stop what this script started
#
# Idempotent: packages are installed only when missing, the config is (re)written only when it is ours
# (first line is the marker below) or absent, daemons are started only when not already answering.
# It never touches a foreign /etc/slurm/slurm.conf: it exits 3 and says so.
#
# Choices (each one fixes a measured trap):
#   - no accounting store (no slurmdbd): jobs are recorded by JobCompType=jobcomp/filetxt in
#     $JOBCOMP_LOG, and the Snakemake slurm plugin must poll with `squeue` (profiles/slurm sets
#     slurm-status-command: squeue, slurm-no-account: true); MinJobAge=300 keeps finished jobs visible
#     to squeue long enough (the plugin falls back to sacct when MinJobAge < 3x its first poll delay).
#   - DefMemPerCPU: without it every job is given the whole node's memory and jobs run one at a time.
#   - proctrack/linuxproc + task/none: works in containers without a writable cgroup tree.
# Exit codes: 0 ready, 2 cannot install (not root / no apt-get), 3 foreign slurm.conf, 4 did not start.
set -euo pipefail
# daemons and runuser live in sbin, which a non-login shell's PATH may lack
export PATH="$PATH:/usr/sbin:/sbin"

MARKER="# managed by icml25 scripts/cluster/setup_local_slurm.sh"
CONF=/etc/slurm/slurm.conf
STATE_DIR=${ICML25_SLURM_STATE:-/var/lib/icml25-slurm}
JOBCOMP_LOG=${ICML25_SLURM_JOBCOMP:-/var/log/slurm/icml25-jobcomp.log}
DEF_MEM_PER_CPU=${ICML25_SLURM_DEF_MEM_PER_CPU:-1000}
# GPUs declared as GRES without devices (File=), so that the GPU requests of full-scale jobs
# (`--gpus=1`) can be validated with `sbatch --test-only`; a job given one runs on the CPU. 0: none.
FAKE_GPUS=${ICML25_SLURM_FAKE_GPUS:-1}
STARTED="$STATE_DIR/started"   # the daemons this script started (teardown stops only these)

log() { echo "setup_local_slurm: $*" >&2; }

# --- 1. packages -----------------------------------------------------------------------------------
need=()
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "missing ${need[*]} and cannot install them (needs root and apt-get)"; exit 2
  fi
  log "installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; } \
    || { log "apt-get install ${need[*]} failed"; exit 2; }
fi
if [ "$(id -u)" != 0 ]; then log "must run as root to configure and start slurmctld/slurmd"; exit 2; fi

mkdir -p "$STATE_DIR" /var/log/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /run/munge /etc/slurm
touch "$STARTED"

# --- 2. munge --------------------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  log "creating /etc/munge/munge.key"
  mkdir -p /etc/munge
  if command -v mungekey >/dev/null; then mungekey --create --keyfile /etc/munge/munge.key --force
  else dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; fi
fi
chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  runuser -u munge -- /usr/sbin/munged
  grep -qx munged "$STARTED" || echo munged >>"$STARTED"
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || { log "munged does not answer"; exit 4; }
fi

# --- 3. slurm.conf ---------------------------------------------------------------------------------
if [ -e "$CONF" ] && [ "$(head -1 "$CONF")" != "$MARKER" ]; then
  log "$CONF exists and was not written by this script; refusing to overwrite it"; exit 3
fi
HOST=$(hostname -s)
# The node's real geometry (CPUs, sockets, cores, memory) as slurmd sees it.
NODE=$(slurmd -C | head -1 | sed -E "s/^NodeName=[^ ]+/NodeName=$HOST NodeAddr=127.0.0.1/")
NEW=$(mktemp)
cat >"$NEW" <<EOF
$MARKER
ClusterName=icml25local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP_LOG
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$DEF_MEM_PER_CPU
MinJobAge=300
ReturnToService=2
KillWait=5
InactiveLimit=0
$( ((FAKE_GPUS)) && echo "GresTypes=gpu" )
$NODE$( ((FAKE_GPUS)) && echo " Gres=gpu:$FAKE_GPUS" ) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
GRES=/etc/slurm/gres.conf
if ((FAKE_GPUS)); then
  { echo "$MARKER"; echo "NodeName=$HOST Name=gpu File=/dev/null Count=$FAKE_GPUS"; } >"$NEW.gres"
  if [ -e "$GRES" ] && [ "$(head -1 "$GRES")" != "$MARKER" ]; then log "$GRES is not ours; refusing to overwrite it"; exit 3; fi
  cmp -s "$NEW.gres" "$GRES" || { install -m 644 "$NEW.gres" "$GRES"; changed=1; }
  rm -f "$NEW.gres"
fi
changed=${changed:-0}
if ! cmp -s "$NEW" "$CONF"; then install -m 644 "$NEW" "$CONF"; changed=1; log "wrote $CONF"; fi
rm -f "$NEW"

# --- 4. daemons ------------------------------------------------------------------------------------
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ((changed)); then  # node definitions change only with a restart of both daemons
  for d in slurmd slurmctld; do
    if alive /run/$d.pid; then log "config changed: restarting $d"; kill "$(cat /run/$d.pid 2>/dev/null)" 2>/dev/null || true
      for _ in $(seq 50); do alive /run/$d.pid || break; sleep 0.1; done; fi
  done
fi
if ! alive /run/slurmctld.pid; then
  log "starting slurmctld"
  slurmctld
  grep -qx slurmctld "$STARTED" || echo slurmctld >>"$STARTED"
fi
if ! alive /run/slurmd.pid; then
  log "starting slurmd"
  slurmd
  grep -qx slurmd "$STARTED" || echo slurmd >>"$STARTED"
fi

# --- 5. wait until the node takes jobs -------------------------------------------------------------
for i in $(seq 120); do
  st=$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null | head -1 || true)
  case "$st" in
    idle*|mixed*|allocated*|completing*) log "ready: node $HOST is $st ($(sinfo -h -N -o '%c CPUs, %m MB' | head -1))"; exit 0 ;;
    inval*) break ;;   # the node's real resources contradict slurm.conf: a restart will not help
    down*|drain*|fail*) [ $((i % 10)) = 1 ] && scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
  esac
  sleep 0.5
done
log "node $HOST did not become idle (state: ${st:-none}); see /var/log/slurm/slurmctld.log and slurmd.log"
exit 4
