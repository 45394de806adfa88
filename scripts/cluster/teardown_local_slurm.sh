#!/usr/bin/env bash
# Stops the single-node SLURM cluster that setup_local_slurm.sh started: cancels every job still in the
# queue (a killed Snakemake leaves queued jobs behind), then stops only the daemons setup started.
#   scripts/cluster/teardown_local_slurm.sh           # stop daemons, keep packages/config/logs
#   scripts/cluster/teardown_local_slurm.sh --purge   # also remove our slurm.conf and state
set -uo pipefail
# the daemons live in sbin, which a non-login shell's PATH may lack
export PATH="$PATH:/usr/sbin:/sbin"

MARKER="# managed by icml25 scripts/cluster/setup_local_slurm.sh"
CONF=/etc/slurm/slurm.conf
STATE_DIR=${ICML25_SLURM_STATE:-/var/lib/icml25-slurm}
STARTED="$STATE_DIR/started"
log() { echo "teardown_local_slurm: $*" >&2; }

[ -e "$CONF" ] && [ "$(head -1 "$CONF")" = "$MARKER" ] || { log "no slurm.conf of ours; nothing to do"; exit 0; }

if command -v squeue >/dev/null && squeue -h >/dev/null 2>&1; then
  left=$(squeue -h -o %i | wc -l)
  if [ "$left" != 0 ]; then log "cancelling $left leftover job(s)"; scancel --full $(squeue -h -o %i) 2>/dev/null || true; fi
fi

stop() {  # stop() NAME PIDFILE
  grep -qx "$1" "$STARTED" 2>/dev/null || return 0
  if [ -s "$2" ]; then
    pid=$(cat "$2")
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping $1 (pid $pid)"; kill -TERM "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
  fi
  sed -i "/^$1\$/d" "$STARTED"
}
stop slurmd /run/slurmd.pid
stop slurmctld /run/slurmctld.pid
stop munged /run/munge/munged.pid

if [ "${1:-}" = "--purge" ]; then
  log "removing $CONF and slurm state"
  rm -f "$CONF"; grep -qxF "$MARKER" /etc/slurm/gres.conf 2>/dev/null && rm -f /etc/slurm/gres.conf; rm -rf /var/lib/slurm/slurmctld/* /var/lib/slurm/slurmd/* "$STATE_DIR"
fi
exit 0
