#!/usr/bin/env bash
# An MLflow tracking server for cluster runs (many jobs, one store), started/stopped by one command.
#
#   scripts/cluster/mlflow_server.sh start [--backend URI] [--backend-password-file F] [--artifacts DIR]
#                                          [--host H] [--port P] [--workers N] [--state DIR] [--auth]
#                                          [--tls-cert CERT --tls-key KEY]
#   scripts/cluster/mlflow_server.sh status|stop [--state DIR]
#
#   --backend    sqlite:////shared/icml25/mlflow/mlflow.db (default: sqlite under --state)
#                postgresql://user@dbhost:5432/mlflow  (needs `pip install psycopg2-binary`; the better
#                choice beyond a few dozen concurrent writers). Never put the password in the URI (every
#                user sees it in `ps`): use --backend-password-file, or PostgreSQL's PGPASSFILE/~/.pgpass.
#   --backend-password-file  file holding the database password (kept out of argv and the environment)
#   --artifacts  artifact root on storage every node sees (default: <state>/artifacts); the server also
#                proxies it (mlflow-artifacts:/) for clients without the shared filesystem
#   --host       interface to bind (default 0.0.0.0: reachable from compute nodes). Any address other
#                than loopback turns on MLflow's login (basic-auth app): see "Logins" below.
#   --auth       turn the login on for a loopback bind too
#   --tls-cert/--tls-key  serve HTTPS with this certificate (PEM) and key; or put a TLS-terminating
#                reverse proxy in front of a loopback bind (README, "Tracking on a cluster")
#   --port       default 5000
#   --workers    server worker processes (default 4; use 1 with a SQLite backend on NFS)
#   --state      pid file, server log, logins (default $ICML25_MLFLOW_STATE or ./.mlflow-server)
#
# Logins: on first start with the login on, random passwords for `admin` (manages users), `pipeline`
# (writes runs) and `reader` (browses) go to <state>/credentials (mode 600; its path is printed, the
# secrets never are). The user database and auth config are in <state>/auth/. Point the pipeline at it
# with tracking_credentials=<state>/credentials (or MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD).
#
# Then e.g. `snakemake all --profile profiles/slurm --config tracking_uri=http://$(hostname -f):5000
# tracking_credentials=$PWD/.mlflow-server/credentials` (or set both in config/config.yaml).
# The store is created/upgraded once (`mlflow db upgrade`) before the server starts, so concurrent
# clients never race on schema creation. `start` waits until /health answers (20-90 s is normal).
# Environment: ICML25_MLFLOW_PYTHON_BIN (dir holding the `mlflow` executable; default: from PATH).
set -euo pipefail

cmd=${1:-}; shift || true
STATE=${ICML25_MLFLOW_STATE:-$PWD/.mlflow-server}
BACKEND=""; PWFILE=""; ARTIFACTS=""; HOST=0.0.0.0; PORT=5000; WORKERS=4; WAIT=240; AUTH=0; CERT=""; KEY=""
while (($#)); do
  case "$1" in
    --backend) BACKEND=$2; shift 2 ;;
    --backend-password-file) PWFILE=$2; shift 2 ;;
    --artifacts) ARTIFACTS=$2; shift 2 ;;
    --host) HOST=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --state) STATE=$2; shift 2 ;;
    --wait) WAIT=$2; shift 2 ;;
    --auth) AUTH=1; shift ;;
    --tls-cert) CERT=$2; shift 2 ;;
    --tls-key) KEY=$2; shift 2 ;;
    *) echo "mlflow_server.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
MLFLOW=${ICML25_MLFLOW_PYTHON_BIN:+$ICML25_MLFLOW_PYTHON_BIN/}mlflow
HERE=$(cd "$(dirname "$0")" && pwd)
PIDFILE=$STATE/server.pid
LOG=$STATE/server.log
log() { echo "mlflow_server: $*" >&2; }
running() { [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }
scheme() { [ -n "$CERT" ] && echo https || echo http; }
url() { echo "$(scheme)://$( [ "$HOST" = 0.0.0.0 ] && hostname -f || echo "$HOST"):$PORT"; }
# the python next to the mlflow executable (the one whose packages the server imports)
mlflow_python() { local m; m=$(command -v "$MLFLOW" 2>/dev/null) && [ -x "${m%mlflow}python" ] && echo "${m%mlflow}python" || echo python3; }
is_loopback() { case "$1" in 127.*|localhost|::1|\[::1\]) return 0 ;; *) return 1 ;; esac; }

case "$cmd" in
  start)
    mkdir -p "$STATE"
    STATE=$(cd "$STATE" && pwd)
    PIDFILE=$STATE/server.pid; LOG=$STATE/server.log
    is_loopback "$HOST" || AUTH=1
    if running; then
      log "already running (pid $(cat "$PIDFILE")): $(cat "$STATE/url")"
      [ -f "$STATE/credentials" ] && log "logins: $STATE/credentials"
      cat "$STATE/url"; exit 0
    fi
    if [ -n "$CERT$KEY" ] && { [ ! -r "$CERT" ] || [ ! -r "$KEY" ]; }; then
      log "--tls-cert and --tls-key both need a readable file"; exit 2
    fi
    BACKEND=${BACKEND:-sqlite:///$STATE/mlflow.db}
    # scheme://user:password@host...: a password on the command line is visible to every user in `ps`
    if [[ "$BACKEND" =~ ^[A-Za-z0-9+]+://[^/@]*:[^/@]*@ ]]; then
      log "the --backend URI carries a password, which every user on this host can read in 'ps';" \
          "drop it from the URI and pass --backend-password-file FILE (or use PGPASSFILE / ~/.pgpass)"
      exit 2
    fi
    ARTIFACTS=${ARTIFACTS:-$STATE/artifacts}
    mkdir -p "$ARTIFACTS"
    ARTIFACTS=$(cd "$ARTIFACTS" && pwd)
    PY=$(mlflow_python)
    case "$BACKEND" in
      postgresql*) "$PY" -c 'import psycopg2' 2>/dev/null || python3 -c 'import psycopg2' 2>/dev/null \
                     || { log "a PostgreSQL backend needs psycopg2: pip install psycopg2-binary"; exit 2; } ;;
      sqlite:///*) mkdir -p "$(dirname "${BACKEND#sqlite:///}")" ;;
    esac
    if [ -n "$PWFILE" ]; then
      [ -r "$PWFILE" ] || { log "cannot read --backend-password-file $PWFILE"; exit 2; }
      python3 "$HERE/mlflow_auth.py" pgpass "$STATE" "$PWFILE"
      export PGPASSFILE=$STATE/pgpass  # libpq (psycopg2) reads the password from here
    fi
    if ((AUTH)); then
      "$PY" -c 'import flask_wtf' 2>/dev/null \
        || { log "the login (basic-auth app) needs mlflow's auth extra: pip install 'mlflow[auth]'"; exit 2; }
      # the default SQLite store and the user database are readable files: keep them the owner's
      chmod 700 "$STATE"
      python3 "$HERE/mlflow_auth.py" init "$STATE"
      export MLFLOW_AUTH_CONFIG_PATH=$STATE/auth/basic_auth.ini
    fi
    log "initialising/upgrading the store $BACKEND"
    "$MLFLOW" db upgrade "$BACKEND" >>"$LOG" 2>&1 || { log "mlflow db upgrade failed; see $LOG"; tail -5 "$LOG" >&2; exit 4; }
    # Host headers the server accepts: localhost, private IPs (MLflow's default) and this host's names.
    ALLOWED="localhost,127.0.0.1,$(hostname -s),$(hostname -f),$(hostname -s):$PORT,$(hostname -f):$PORT,localhost:$PORT,127.0.0.1:$PORT,10.*,192.168.*,172.*"
    ARGS=(--backend-store-uri "$BACKEND" --artifacts-destination "$ARTIFACTS" --host "$HOST" --port "$PORT"
          --workers "$WORKERS" --allowed-hosts "${ICML25_MLFLOW_ALLOWED_HOSTS:-$ALLOWED}")
    ((AUTH)) && ARGS+=(--app-name basic-auth)
    [ -n "$CERT" ] && ARGS+=(--uvicorn-opts "--ssl-certfile $CERT --ssl-keyfile $KEY")
    log "starting on $(scheme)://$HOST:$PORT (backend $BACKEND, artifacts $ARTIFACTS, $WORKERS workers," \
        "login $( ((AUTH)) && echo on || echo off)); log: $LOG"
    # Own session, so `stop` ends the server and all its workers together. The CSRF key of the login
    # app reaches the server through its environment (MLflow reads it only from there), never argv.
    if ((AUTH)); then
      MLFLOW_FLASK_SERVER_SECRET_KEY=$(<"$STATE/auth/flask_secret_key") \
        setsid "$MLFLOW" server "${ARGS[@]}" >>"$LOG" 2>&1 < /dev/null &
    else
      setsid "$MLFLOW" server "${ARGS[@]}" >>"$LOG" 2>&1 < /dev/null &
    fi
    echo $! >"$PIDFILE"
    url >"$STATE/url"
    base="$(scheme)://127.0.0.1:$PORT"; [ "$HOST" = 0.0.0.0 ] || base="$(scheme)://$HOST:$PORT"
    # /health needs no login; TLS is not verified here: it is our own server on this host
    probe='import ssl,sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2, context=ssl._create_unverified_context())'
    for _ in $(seq "$WAIT"); do
      if python3 -c "$probe" "$base/health" 2>/dev/null; then
        if ((AUTH)); then
          python3 "$HERE/mlflow_auth.py" users "$STATE" "$base" || { log "could not set up the logins; see $LOG"; exit 4; }
          log "logins (admin, pipeline, reader): $STATE/credentials  (mode 600; set tracking_credentials to it)"
        fi
        log "up: $(cat "$STATE/url")  (set tracking_uri to this)"; cat "$STATE/url"; exit 0
      fi
      running || { log "server exited; see $LOG"; tail -20 "$LOG" >&2; exit 4; }
      sleep 1
    done
    log "no answer from $base/health after ${WAIT}s; see $LOG"; exit 4 ;;
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
  *) sed -n '2,34p' "$0"; exit 2 ;;
esac
