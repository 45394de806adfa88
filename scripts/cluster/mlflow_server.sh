#!/usr/bin/env bash
# An MLflow tracking server for cluster runs (many jobs, one store), started/stopped by one command.
#
#   scripts/cluster/mlflow_server.sh start [--backend URI] [--artifacts DIR] [--host H] [--port P]
#                                          [--workers N] [--state DIR]
#   scripts/cluster/mlflow_server.sh status|stop [--state DIR]
#
#   --backend    sqlite:////shared/icml25/mlflow/mlflow.db (default: sqlite under --state)
#                postgresql://user:pass@dbhost:5432/mlflow  (needs `pip install psycopg2-binary`;
#                the better choice beyond a few dozen concurrent writers)
#   --artifacts  artifact root on storage every node sees (default: <state>/artifacts); the server also
#                proxies it (mlflow-artifacts:/) for clients without the shared filesystem
#   --host       interface to bind (default 0.0.0.0: reachable from compute nodes)
#   --port       default 5000
#   --workers    server worker processes (default 4; use 1 with a SQLite backend on NFS)
#   --state      where the pid file and server log go (default $ICML25_MLFLOW_STATE or ./.mlflow-server)
#
# Then point the pipeline at it, e.g. `snakemake all --profile profiles/slurm --config
# tracking_uri=http://$(hostname -f):5000` (or set tracking_uri in config/config.yaml).
# The store is created/upgraded once (`mlflow db upgrade`) before the server starts, so concurrent
# clients never race on schema creation. `start` waits until /health answers (20-90 s is normal).
# Environment: ICML25_MLFLOW_PYTHON_BIN (dir holding the `mlflow` executable; default: from PATH).
set -euo pipefail

cmd=${1:-}; shift || true
STATE=${ICML25_MLFLOW_STATE:-$PWD/.mlflow-server}
BACKEND=""; ARTIFACTS=""; HOST=0.0.0.0; PORT=5000; WORKERS=4; WAIT=240
while (($#)); do
  case "$1" in
    --backend) BACKEND=$2; shift 2 ;;
    --artifacts) ARTIFACTS=$2; shift 2 ;;
    --host) HOST=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --state) STATE=$2; shift 2 ;;
    --wait) WAIT=$2; shift 2 ;;
    *) echo "mlflow_server.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
MLFLOW=${ICML25_MLFLOW_PYTHON_BIN:+$ICML25_MLFLOW_PYTHON_BIN/}mlflow
PIDFILE=$STATE/server.pid
LOG=$STATE/server.log
log() { echo "mlflow_server: $*" >&2; }
running() { [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }
url() { echo "http://$( [ "$HOST" = 0.0.0.0 ] && hostname -f || echo "$HOST"):$PORT"; }

case "$cmd" in
  start)
    mkdir -p "$STATE"
    STATE=$(cd "$STATE" && pwd)
    PIDFILE=$STATE/server.pid; LOG=$STATE/server.log
    if running; then log "already running (pid $(cat "$PIDFILE")): $(cat "$STATE/url")"; cat "$STATE/url"; exit 0; fi
    BACKEND=${BACKEND:-sqlite:///$STATE/mlflow.db}
    ARTIFACTS=${ARTIFACTS:-$STATE/artifacts}
    mkdir -p "$ARTIFACTS"
    ARTIFACTS=$(cd "$ARTIFACTS" && pwd)
    case "$BACKEND" in
      postgresql*) python3 -c 'import psycopg2' 2>/dev/null || "${MLFLOW%mlflow}python" -c 'import psycopg2' 2>/dev/null \
                     || { log "a PostgreSQL backend needs psycopg2: pip install psycopg2-binary"; exit 2; } ;;
      sqlite:///*) mkdir -p "$(dirname "${BACKEND#sqlite:///}")" ;;
    esac
    log "initialising/upgrading the store $BACKEND"
    "$MLFLOW" db upgrade "$BACKEND" >>"$LOG" 2>&1 || { log "mlflow db upgrade failed; see $LOG"; tail -5 "$LOG" >&2; exit 4; }
    # Host headers the server accepts: localhost, private IPs (MLflow's default) and this host's names.
    ALLOWED="localhost,127.0.0.1,$(hostname -s),$(hostname -f),$(hostname -s):$PORT,$(hostname -f):$PORT,localhost:$PORT,127.0.0.1:$PORT,10.*,192.168.*,172.*"
    log "starting on $HOST:$PORT (backend $BACKEND, artifacts $ARTIFACTS, $WORKERS workers); log: $LOG"
    # Own session, so `stop` ends the server and all its workers together.
    setsid "$MLFLOW" server --backend-store-uri "$BACKEND" --artifacts-destination "$ARTIFACTS" \
      --host "$HOST" --port "$PORT" --workers "$WORKERS" --allowed-hosts "${ICML25_MLFLOW_ALLOWED_HOSTS:-$ALLOWED}" \
      >>"$LOG" 2>&1 < /dev/null &
    echo $! >"$PIDFILE"
    url >"$STATE/url"
    probe="http://127.0.0.1:$PORT/health"; [ "$HOST" = 0.0.0.0 ] || probe="http://$HOST:$PORT/health"
    for _ in $(seq "$WAIT"); do
      if python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" "$probe" 2>/dev/null; then
        log "up: $(cat "$STATE/url")  (set tracking_uri to this)"; cat "$STATE/url"; exit 0
      fi
      running || { log "server exited; see $LOG"; tail -20 "$LOG" >&2; exit 4; }
      sleep 1
    done
    log "no answer from $probe after ${WAIT}s; see $LOG"; exit 4 ;;
  status)
    if running; then echo "running (pid $(cat "$PIDFILE")): $(cat "$STATE/url")"; else echo "not running"; exit 1; fi ;;
  stop)
    if running; then
      pid=$(cat "$PIDFILE")
      log "stopping pid $pid and its workers"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE" ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
