#!/usr/bin/env bash
# A real MLflow tracking server for the project: REST API + UI + proxied artifacts, one URL for every
# job (`mlflow.tracking_uri=http://HOST:PORT`), so many jobs (a sweep on SLURM, 8 local jobs at once)
# log to one store without sharing a sqlite file over the filesystem.
#
#   scripts/mlflow-server.sh [start] [--background] [options] [-- extra `mlflow server` options]
#   scripts/mlflow-server.sh stop   [--port P]
#   scripts/mlflow-server.sh status [--port P]
#
# Options (each also read from the environment; flags win):
#   --host H                   HOST, default 127.0.0.1 (loopback only). 0.0.0.0 serves other machines.
#   --port P                   PORT, default 5000.
#   --backend-store-uri URI    MLFLOW_BACKEND_STORE_URI, default sqlite:///<repo>/outputs/mlflow-server.db.
#                              A postgresql:// URI uses PostgreSQL; its driver must be installed in
#                              the venv (SQLAlchemy 2.1: psycopg 3 for postgresql://, psycopg2 for
#                              postgresql+psycopg2://); the script names the missing one.
#   --artifacts-destination D  MLFLOW_ARTIFACTS_DESTINATION, default <repo>/outputs/mlartifacts-server.
#                              Artifacts are proxied (`--serve-artifacts`): experiments created through
#                              the server get `mlflow-artifacts:/...` locations and clients upload and
#                              download over HTTP, never needing this path.
#   --workers N                MLFLOW_SERVER_WORKERS, default 1 for sqlite, 4 otherwise (see below).
#   --background               start detached; pid file and log in MLFLOW_SERVER_STATE_DIR (default
#                              <repo>/outputs) as mlflow-server-<port>.pid/.log; wait until GET /health
#                              answers (MLFLOW_SERVER_START_TIMEOUT seconds, default 120), else print the
#                              log's tail and exit 1.
#
# Concurrency. mlflow 3.17's `mlflow server` runs uvicorn (gunicorn and waitress only on request, and
# deprecated) with `--workers` processes (mlflow's default: 4). Each worker serves the Flask tracking
# API through a thread pool (anyio, 40 threads), so even ONE worker process serves many clients at
# once; the store, not the HTTP layer, limits concurrent logging.
#   sqlite: one file lock serializes every write, whatever the number of server processes; more
#     processes only add writers queueing for that lock (each with its own connection pool), and
#     "database is locked" is what a writer gets once its wait passes the busy timeout (mlflow sets
#     `PRAGMA busy_timeout = 20000` per session). So ONE worker by default, and the file is put in
#     WAL journal mode (persistent; set here before the server opens it): readers (the UI's
#     searches, every job's lookups) and the writer no longer block each other. WAL needs the file on
#     a local disk (not NFS/Lustre): keep the server's sqlite file on the machine that runs it. The
#     schema is created/migrated once, by the `mlflow server` parent before it spawns workers, so
#     there is no migration race between workers either.
#     Measured on 2 cores (scripts/mlflow-load-check.py, 8 processes x 2000 metric points and 200
#     params each, 100 single-point requests each, searches alongside): no failed request in any
#     setting; 1 worker + WAL 57 s, 4 workers + WAL 61 s, plain `mlflow server` (4 workers, rollback
#     journal) 84 s.
#   postgresql: row-level locking, no single writer: 4 worker processes by default (or --workers).
# The job runner that mlflow 3 starts beside the server (MLFLOW_SERVER_ENABLE_JOB_EXECUTION: GenAI
# evaluation jobs, periodic trace maintenance) is off: 8 more processes, tens of seconds more
# start-up, and on sqlite more writers to the same file, for features this project does not use.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-$VENV/bin/python}
PROG=mlflow-server

die() {
  echo "$PROG: $*" >&2
  exit 1
}

usage() { sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

CMD=start
case "${1:-}" in
  start | stop | status)
    CMD=$1
    shift
    ;;
esac

HOST=${HOST:-127.0.0.1}
PORT=${PORT:-5000}
BACKEND_STORE_URI=${MLFLOW_BACKEND_STORE_URI:-sqlite:///$ROOT/outputs/mlflow-server.db}
ARTIFACTS_DESTINATION=${MLFLOW_ARTIFACTS_DESTINATION:-$ROOT/outputs/mlartifacts-server}
WORKERS=${MLFLOW_SERVER_WORKERS:-}
STATE_DIR=${MLFLOW_SERVER_STATE_DIR:-$ROOT/outputs}
START_TIMEOUT=${MLFLOW_SERVER_START_TIMEOUT:-120}
BACKGROUND=0
EXTRA=()

while [ $# -gt 0 ]; do
  case "$1" in
    --background) BACKGROUND=1 ;;
    --host) HOST=${2:?--host needs a value}; shift ;;
    --host=*) HOST=${1#*=} ;;
    --port) PORT=${2:?--port needs a value}; shift ;;
    --port=*) PORT=${1#*=} ;;
    --backend-store-uri) BACKEND_STORE_URI=${2:?--backend-store-uri needs a value}; shift ;;
    --backend-store-uri=*) BACKEND_STORE_URI=${1#*=} ;;
    --artifacts-destination) ARTIFACTS_DESTINATION=${2:?--artifacts-destination needs a value}; shift ;;
    --artifacts-destination=*) ARTIFACTS_DESTINATION=${1#*=} ;;
    --workers) WORKERS=${2:?--workers needs a value}; shift ;;
    --workers=*) WORKERS=${1#*=} ;;
    -h | --help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown argument '$1' (options of \`mlflow server\` itself go after --; see --help)" ;;
  esac
  shift
done

[[ $PORT =~ ^[0-9]+$ ]] || die "PORT/--port must be a number, got '$PORT'"
PID_FILE=$STATE_DIR/$PROG-$PORT.pid
LOG_FILE=$STATE_DIR/$PROG-$PORT.log
# Where this machine reaches the server (a wildcard bind is reached over loopback).
case "$HOST" in
  0.0.0.0 | '') CHECK_HOST=127.0.0.1 ;;
  :: | '[::]') CHECK_HOST='[::1]' ;;
  *:*) CHECK_HOST="[${HOST#[}"; CHECK_HOST="${CHECK_HOST%]}]" ;;
  *) CHECK_HOST=$HOST ;;
esac
URL="http://$CHECK_HOST:$PORT"

healthy() { # GET /health answers 200 within 2 s
  "$PY" - "$URL/health" <<'EOF' 2>/dev/null
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

running_pid() { # the pid from our pid file, if that process is alive; a stale file is removed
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid=$(cat "$PID_FILE" 2>/dev/null || true)
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    echo "$pid"
    return 0
  fi
  rm -f "$PID_FILE"
  return 1
}

log_tail() {
  [ -f "$LOG_FILE" ] || return 0
  echo "---- last 40 lines of $LOG_FILE ----" >&2
  tail -n 40 "$LOG_FILE" >&2
  echo "----" >&2
}

stop_server() {
  local pid
  if ! pid=$(running_pid); then
    echo "$PROG: no server of ours on port $PORT (no live pid in $PID_FILE)"
    return 0
  fi
  # The server runs in its own session and process group (setsid): `mlflow server`, uvicorn, its
  # workers. TERM the group, give it 20 s to shut down, then KILL what is left.
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$PROG: pid $pid did not stop within 20 s, killing its process group" >&2
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE"
  echo "$PROG: stopped (pid $pid, port $PORT)"
}

if [ "$CMD" = stop ]; then
  stop_server
  exit 0
fi
if [ "$CMD" = status ]; then
  if pid=$(running_pid); then
    if healthy; then
      echo "$PROG: running, pid $pid, $URL (log $LOG_FILE)"
      exit 0
    fi
    echo "$PROG: pid $pid is alive but $URL/health does not answer (log $LOG_FILE)"
    exit 1
  fi
  echo "$PROG: not running on port $PORT"
  exit 3
fi

# ------------------------------------------------------------------------------------------- start
[ -x "$PY" ] || die "$PY not found: run \`make install\` (or set VENV/PYTHON)"
if pid=$(running_pid); then
  die "already running on port $PORT (pid $pid, log $LOG_FILE); stop it with \`$0 stop --port $PORT\`"
fi
if healthy; then
  die "something already answers on $URL/health (not started by this script): pick another PORT"
fi

# The backend store.
STORE_KIND=other
case "$BACKEND_STORE_URI" in
  sqlite:///*)
    STORE_KIND=sqlite
    db=${BACKEND_STORE_URI#sqlite:///}
    db=${db%%\?*}
    [ "$db" = ":memory:" ] && die "an in-memory sqlite store cannot be shared by a server; give a file"
    if [[ $db != /* ]]; then # relative to where the script was called, made absolute
      db=$PWD/$db
    fi
    mkdir -p "$(dirname "$db")"
    BACKEND_STORE_URI=sqlite:///$db
    # WAL: readers and the writer do not block each other (see the header). Persistent in the file.
    mode=$("$PY" - "$db" <<'EOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], timeout=30)
print(con.execute("PRAGMA journal_mode=WAL").fetchone()[0])
con.close()
EOF
    ) || die "cannot open or create the sqlite store $db"
    [ "$mode" = wal ] || echo "$PROG: warning: $db stays in journal_mode=$mode (WAL refused: a network filesystem?)" >&2
    ;;
  postgresql*://* | postgres://*) STORE_KIND=postgresql ;;
esac
case "$BACKEND_STORE_URI" in
  sqlite:* | file:* | /*) ;;
  *://*)
    # The database driver must be importable by the server: ask SQLAlchemy which one the URI needs
    # (SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3, no longer to psycopg2).
    missing=$("$PY" - "$BACKEND_STORE_URI" 2>/dev/null <<'PYEOF'
import sys
from sqlalchemy.engine import make_url
url = make_url(sys.argv[1])
try:
    url.get_dialect().import_dbapi()
except ImportError as exc:
    pip = {"psycopg": "'psycopg[binary]'", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient", "pymysql": "PyMySQL"}
    print(f"{url.drivername}:// needs the {exc.name} module: {sys.executable} -m pip install {pip.get(exc.name, exc.name)}")
PYEOF
    ) || die "cannot read the backend store URI as a SQLAlchemy URL (e.g. postgresql://user:password@host:5432/db)"
    [ -z "$missing" ] || die "$missing"
    ;;
esac

if [ -z "$WORKERS" ]; then
  if [ "$STORE_KIND" = sqlite ]; then WORKERS=1; else WORKERS=4; fi
fi
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "MLFLOW_SERVER_WORKERS/--workers must be a positive number, got '$WORKERS'"
if [ "$STORE_KIND" = sqlite ] && [ "$WORKERS" -gt 1 ]; then
  echo "$PROG: warning: $WORKERS worker processes on a sqlite store only add writers contending for one file lock" >&2
fi

case "$ARTIFACTS_DESTINATION" in
  *://*) ;; # s3://, gs://, file://...: as given
  *)
    [[ $ARTIFACTS_DESTINATION == /* ]] || ARTIFACTS_DESTINATION=$PWD/$ARTIFACTS_DESTINATION
    mkdir -p "$ARTIFACTS_DESTINATION"
    ;;
esac

ARGS=(
  --backend-store-uri "$BACKEND_STORE_URI"
  --serve-artifacts
  --artifacts-destination "$ARTIFACTS_DESTINATION"
  --host "$HOST"
  --port "$PORT"
  --workers "$WORKERS"
)
# mlflow's security middleware accepts only localhost and private-IP Host headers, and blocks
# state-changing requests from non-localhost origins (the UI's run search is a POST). Served beyond
# loopback, users reach it by this machine's name: allow that name too, unless the caller chose.
case "$HOST" in
  127.0.0.1 | localhost | ::1 | '[::1]') ;;
  *)
    if [ -z "${MLFLOW_SERVER_ALLOWED_HOSTS:-}" ] && [[ " ${EXTRA[*]} " != *" --allowed-hosts"* ]]; then
      names=$( (hostname; hostname -f) 2>/dev/null | sort -u | tr '\n' ' ')
      hosts="localhost:*,127.0.0.1:*,[[]::1]:*,10.*,192.168.*"
      origins=""
      for i in $(seq 16 31); do hosts+=",172.$i.*"; done
      for name in $names; do
        hosts+=",$name,$name:*"
        origins+="${origins:+,}http://$name:$PORT"
      done
      ARGS+=(--allowed-hosts "$hosts")
      if [ -n "$origins" ] && [ -z "${MLFLOW_SERVER_CORS_ALLOWED_ORIGINS:-}" ] \
        && [[ " ${EXTRA[*]} " != *" --cors-allowed-origins"* ]]; then
        ARGS+=(--cors-allowed-origins "$origins")
      fi
    fi
    ;;
esac
ARGS+=("${EXTRA[@]}")

redacted=$("$PY" -c 'import re, sys; print(re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", sys.argv[1]))' "$BACKEND_STORE_URI")
echo "$PROG: store $redacted, artifacts $ARTIFACTS_DESTINATION, $WORKERS worker(s), $URL"
case "$HOST" in
  0.0.0.0 | :: | '[::]') echo "$PROG: jobs log here with mlflow.tracking_uri=http://$(hostname -f 2>/dev/null || hostname):$PORT ($URL on this machine)" ;;
  *) echo "$PROG: jobs log here with mlflow.tracking_uri=$URL" ;;
esac

# Telemetry off: this server often runs where nothing outside is reachable.
export MLFLOW_DISABLE_TELEMETRY=${MLFLOW_DISABLE_TELEMETRY:-true}
export DO_NOT_TRACK=${DO_NOT_TRACK:-true}
# No job runner (see the header); MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true brings it back.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}

if [ "$BACKGROUND" = 0 ]; then
  exec "$PY" -m mlflow server "${ARGS[@]}"
fi

mkdir -p "$STATE_DIR"
: >"$LOG_FILE"
# setsid: a session and process group of its own (so `stop` ends uvicorn and its workers with it, and
# the terminal's Ctrl-C does not). Without job control, `&` does not make a group leader, so setsid
# execs in place and $! is the server's pid.
setsid "$PY" -m mlflow server "${ARGS[@]}" >>"$LOG_FILE" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$PID_FILE"

deadline=$((SECONDS + START_TIMEOUT))
until healthy; do
  if ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$PID_FILE"
    log_tail
    die "the server exited during start-up (pid $pid); its log is above"
  fi
  if [ $SECONDS -ge $deadline ]; then
    log_tail
    stop_server >/dev/null
    die "$URL/health did not answer within ${START_TIMEOUT}s (MLFLOW_SERVER_START_TIMEOUT); server stopped, its log is above"
  fi
  sleep 0.5
done
echo "$PROG: up, pid $pid, log $LOG_FILE; stop with \`$0 stop --port $PORT\`"
