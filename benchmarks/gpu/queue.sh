#!/usr/bin/env bash
# Run a list of parts (as benchmarks/gpu/call.sh takes them) in the background on the GPU host, so that
# one queue can outlast the 10-minute limit of a device call without a job being cut at a call's end.
#   bash benchmarks/gpu/queue.sh start <name> <part>...   start the queue (once), then watch it as below
#   bash benchmarks/gpu/queue.sh watch <name> <seconds>    show its progress until it ends or <seconds>
#                                                          pass, then pack what it has so far into $OUT
# Each watch packs a consistent snapshot: results.tgz (results, summaries, plots, logs), mlflow.tgz
# (copies of the sqlite stores taken with sqlite's backup API) and artifacts.tgz (the MLflow artifacts).
set -uo pipefail
cmd=${1:?start|watch}; name=${2:?name}; shift 2
dir=/tmp/gpu/$name; OUT=${OUT:-/tmp/gpu/out}; mkdir -p "$dir" "$OUT"
if [ "$cmd" = start ]; then
  if [ -f "$dir/queue.pid" ] && kill -0 "$(cat "$dir/queue.pid")" 2>/dev/null; then
    echo "queue $name already running"
  else
    OUT=$dir/final setsid nohup bash benchmarks/gpu/call.sh "$name" 86400 "$@" > "$dir/queue.log" 2>&1 < /dev/null &
    echo $! > "$dir/queue.pid"; echo "queue $name started: $*"
  fi
  exit 0
fi
secs=${1:?seconds}; started=$(date +%s)
alive() { [ -f "$dir/queue.pid" ] && kill -0 "$(cat "$dir/queue.pid")" 2>/dev/null; }
shown=0
while alive && [ $(( $(date +%s) - started )) -lt $(( secs - 30 )) ]; do
  sleep 10
  lines=$(grep -c . "$dir/queue.log" 2>/dev/null); lines=${lines:-0}
  if [ "$lines" -gt "$shown" ]; then sed -n "$(( shown + 1 )),${lines}p" "$dir/queue.log" | cut -c1-300; shown=$lines; fi
done
sed -n "$(( shown + 1 )),\$p" "$dir/queue.log" | cut -c1-300
alive && echo "queue $name still running after $(( $(date +%s) - started )) s" || echo "queue $name has ended"
for log in "$dir"/sweeps/*.log; do [ -f "$log" ] && echo "== $log" && grep -v "^ *$" "$log" | tail -n 3 | cut -c1-250; done
snap=/tmp/gpu/snap-$name; rm -rf "$snap"; mkdir -p "$snap"
find "$dir" -maxdepth 3 -name '*.db' | while read -r db; do
  mkdir -p "$snap/$(dirname "${db#/tmp/gpu/}")"
  python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" "$db" "$snap/${db#/tmp/gpu/}"
done
cd /tmp/gpu && tar czf "$OUT/results.tgz" --exclude='*inductor_cache*' --exclude='mlartifacts' --exclude='*.db' --exclude=final "$name"
(cd "$snap" && tar czf "$OUT/mlflow.tgz" .)
tar czf "$OUT/artifacts.tgz" $(find "$name" -maxdepth 3 -name mlartifacts) 2>/dev/null
ls -la "$OUT"
