#!/usr/bin/env bash
# One device call: run the given parts one after another until a deadline, then pack what came out
# into $OUT (results.tgz: result files, summaries, plots, logs, RESULTS.md; mlflow.tgz: the MLflow
# stores; never the compile caches) and print a short table of every job.
# A part is bench:<section>[,<section>...] (benchmarks/bench.py), script:<name>[:<args>] (benchmarks/gpu/<name>.sh
# into <dir>/<name>, its lines shown as they come; args comma-separated) or a sweep of benchmarks/gpu/sweeps.sh.
# BENCH_TRIALS and SEARCH_ARGS set the search section's --trials and --search-args.
# Usage on the GPU host: bash benchmarks/gpu/call.sh <name> <seconds> <part>...
set -uo pipefail
name=${1:?name}; deadline=$(( $(date +%s) + ${2:?seconds} )); shift 2
dir=/tmp/gpu/$name; mkdir -p "$dir"; OUT=${OUT:-/tmp/gpu/out}; mkdir -p "$OUT"
source benchmarks/gpu/setup.sh > "$dir/host.txt" || exit 1
cat "$dir/host.txt"; hostname | tee -a "$dir/host.txt"
left() { local s=$(( deadline - $(date +%s) - 20 )); echo $(( s > 1 ? s : 1 )); }  # 20 s kept for packing
for part in "$@"; do
  started=$(date +%s)
  case $part in
    bench:*) timeout "$(left)" python3 benchmarks/bench.py --sections "${part#bench:}" --out "$dir/bench" \
               --trials "${BENCH_TRIALS:-8}" --search-args "${SEARCH_ARGS:-}" \
               > "$dir/bench-${part#bench:}.log" 2>&1
             echo "$part exit=$? in $(( $(date +%s) - started )) s"; grep -E "^  [a-z-]+[0-9-]*: \[" "$dir/bench-${part#bench:}.log" | cut -c1-200 ;;
    script:*) spec=${part#script:}; script=${spec%%:*}; args=; [ "$spec" != "$script" ] && args=${spec#*:}
             timeout "$(left)" bash "benchmarks/gpu/$script.sh" "$dir/$script" ${args//,/ } 2>&1 | tee "$dir/$script.log"
             echo "$part exit=${PIPESTATUS[0]} in $(( $(date +%s) - started )) s" ;;
    *) SWEEPS_PRINT_JOBS=0 bash benchmarks/gpu/sweeps.sh "$dir/sweeps" "$(left)" "$part"; echo "$part done in $(( $(date +%s) - started )) s" ;;
  esac
done
if [ -d "$dir/bench" ]; then
  python3 benchmarks/bench.py --report "$dir/bench" > /dev/null && cp benchmarks/RESULTS.md "$dir/RESULTS.md"
  python3 benchmarks/gpu/collect.py "$dir/bench/jobs.json" "$dir/bench" > "$dir/bench/jobs.txt"
fi
cat "$dir"/*/jobs.txt 2>/dev/null | cut -c1-300
cd /tmp/gpu && tar czf "$OUT/results.tgz" --exclude='*inductor_cache*' --exclude='mlartifacts' --exclude='*.db' \
  --exclude="$name/final" "$name" \
  && tar czf "$OUT/mlflow.tgz" $(find "$name" -maxdepth 3 \( -name '*.db' -o -name mlartifacts \) ) 2>/dev/null
ls -la "$OUT"
