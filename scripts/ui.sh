#!/usr/bin/env bash
# `make ui`: the MLflow UI over a store, quiet, up in seconds, and stopped by one Ctrl-C.
#
#   scripts/ui.sh            (UI_PORT, UI_STORE, UI_ARTIFACTS, VENV from the environment; the Makefile sets them)
#
# What it leaves out of `mlflow server`'s defaults, and why:
# - the job runner (MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false): GenAI evaluation jobs and trace
#   maintenance, 8 more processes and tens of seconds of start-up for features this project does not use;
# - uvicorn's access log (one line a request: the UI polls, ~1000 lines in 15 minutes) and its INFO
#   lines (`--no-access-log --log-level warning`), MLflow's own INFO lines (the database set-up):
#   warnings and errors still show;
# - Starlette's deprecation warning about the WSGI middleware MLflow imports (MLflow's to fix, not ours);
# - the CancelledError traceback on Ctrl-C: a terminal's Ctrl-C reaches every process of its foreground
#   group, and `mlflow server` forwards it to uvicorn too; uvicorn takes a second SIGINT as "stop now"
#   and cancels its lifespan task mid-shutdown. So the server runs in a session of its own and this
#   script, alone in the terminal's group, asks it once (SIGTERM) to shut down.
#
# And how it stops: on Ctrl-C, SIGINT or SIGTERM to it, or when whoever started it (`make ui`) is gone. A
# shell that starts a command in the background without job control (`make ui &` in a script) starts it
# with SIGINT ignored, and bash can neither trap nor reset a signal ignored at its start: the script
# starts itself again with SIGINT and SIGTERM at their defaults first. `kill -INT` to make stops make
# alone (make passes on SIGTERM only): the script then sees its parent gone and stops the server too.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-$VENV/bin/python}
if [ -z "${UI_SIGNALS_RESET:-}" ] && [ -x "$PY" ]; then
  export UI_SIGNALS_RESET=1 UI_PARENT=$PPID
  exec "$PY" -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(s, signal.SIG_DFL)
os.execv("/bin/bash", ["bash", *sys.argv[1:]])' "${BASH_SOURCE[0]}" "$@"
fi
PARENT=${UI_PARENT:-$PPID}
PORT=${UI_PORT:-5000}
STORE=${UI_STORE:-sqlite:///$ROOT/outputs/mlflow.db}
ARTIFACTS=${UI_ARTIFACTS:-$ROOT/outputs/mlartifacts}
URL="http://127.0.0.1:$PORT"

[ -x "$PY" ] || { echo "ui: $PY not found: run \`make install\`" >&2; exit 1; }
case "$STORE" in
  sqlite:///*) mkdir -p "$(dirname "${STORE#sqlite:///}")" ;;
esac

export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}
export MLFLOW_DISABLE_TELEMETRY=${MLFLOW_DISABLE_TELEMETRY:-true}
export DO_NOT_TRACK=${DO_NOT_TRACK:-true}
export MLFLOW_LOGGING_LEVEL=${MLFLOW_LOGGING_LEVEL:-WARNING} # not the database set-up's INFO lines
export PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:starlette.middleware.wsgi is deprecated"

# setsid: a session of its own, out of reach of the terminal's Ctrl-C (see above). Without job control
# `&` makes no group leader, so setsid execs in place and $! is the server's pid.
setsid "$PY" -m mlflow server --workers 1 \
  --backend-store-uri "$STORE" --registry-store-uri "$STORE" --artifacts-destination "$ARTIFACTS" \
  --host 127.0.0.1 --port "$PORT" --uvicorn-opts "--no-access-log --log-level warning" </dev/null &
server=$!

stopping=
stop() {
  trap '' INT TERM
  [ -n "$stopping" ] && return
  stopping=1
  echo "ui: stopping" >&2
  kill -TERM "$server" 2>/dev/null || true
}
trap stop INT TERM HUP

# One line when it answers: where to browse.
for _ in $(seq 1 240); do
  kill -0 "$server" 2>/dev/null || break
  if "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)" "$URL/health" 2>/dev/null; then
    shown=$("$PY" -c 'import re, sys; print(re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", sys.argv[1]))' "$STORE")
    echo "ui: $URL (store $shown); Ctrl-C stops it"
    break
  fi
  sleep 0.25
done

# Until the server exits: a trapped signal stops it (`sleep` in the foreground would hold the trap
# until it ends: it runs in the background and `wait` returns at once on a signal); so does the end
# of whoever started this script.
status=0
while kill -0 "$server" 2>/dev/null; do
  if ! kill -0 "$PARENT" 2>/dev/null; then
    stop
  fi
  sleep 1 &
  wait $! 2>/dev/null || true
done
wait "$server" 2>/dev/null && status=0 || status=$?
case $status in 0 | 130 | 143) exit 0 ;; *) exit "$status" ;; esac
