#!/usr/bin/env bash
# One GPU: why the pipeline's back-to-back figure of a cycling inference unit (ResNet-50, batch sizes 32,
# 64, 128, amp, default mode, dynamic=false) reads above a plain loop's (benchmarks/gpu/rounds.sh). With
# the GPU's SM clock, power and throttle reasons sampled every 100 ms throughout (nvidia-smi):
# 1. benchmarks/rounds_loop.py (rounds of 1 and 9 units, the 9 also on rotated batches; the host CPU per unit);
# 2. the pipeline's job as a user runs it (paired eager copy, default round_s), then the same without the
#    host check's CPU burst before each round (benchmark.host_check_s=0), then without the eager copy's
#    rounds between the compiled ones (benchmark.paired_eager=false); one inductor cache for all;
# 3. the loop again (the host's drift over the call).
# B2B_JOBS="name:override,override:K=V,K=V name2:..." replaces the three jobs with these, each with its
# overrides and environment (CACHE=<name>: an inductor cache of its own; e.g. the host check on and off in
# turn: B2B_JOBS="hc: nohc:benchmark.host_check_s=0 hc2: nohc2:benchmark.host_check_s=0"); B2B_LOOPS=0 skips
# the loops; B2B_LOOP_RUNS="name:option,option:K=V,K=V ..." adds loops before the jobs, each with its
# rounds_loop.py options and environment (CACHE as for a job).
# B2B_SMOKE=1: the same on a CPU with a tiny model and no sampler (a check of this script, no figures).
# Usage on the GPU host: bash benchmarks/gpu/b2b_gap.sh <out dir>
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); mkdir -p "$out"
if [ "${B2B_SMOKE:-0}" = 1 ]; then  # this checkout's .venv
  export PATH=$PWD/.venv/bin:$PATH PYTHONPATH=$PWD
  M=(model=timm/resnet18 device=cpu model.input.height=32 model.input.width=32 "scenario.batch_sizes=[1,4]")
  S=(benchmark.budget_s=0 trainer.steps=6 trainer.warmup_steps=2)
  L=(--device cpu --model resnet18 --image-size 32 --batch-sizes 1,4 --rounds 4 --warmup 2 --rotate 2)
else
  source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
  head -4 "$out/host.txt"
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 100 > "$out/smi.csv" 2>/dev/null &
  sampler=$!
  M=(model=timm/resnet50 "scenario.batch_sizes=[32,64,128]"); S=(benchmark.budget_s=20)
  L=(--model resnet50 --batch-sizes 32,64,128 --rounds 30)
fi
export TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache
phase() { echo "$1 $(date +%s.%N)" >> "$out/phases.txt"; }
loop() {  # loop <name> [<environment: K=V,K=V> <rounds_loop.py options...>]; CACHE as for a job
  [ "${B2B_LOOPS:-1}" = 1 ] || return 0
  local name=$1 CACHE=inductor_cache; local -a envs; IFS=, read -ra envs <<< "${2:-}"; shift $(($# > 1 ? 2 : 1))
  [ ${#envs[@]} -gt 0 ] && local "${envs[@]}"
  phase "$name-start"
  TORCHINDUCTOR_CACHE_DIR=$out/$CACHE env "${envs[@]}" python3 benchmarks/rounds_loop.py "${L[@]}" \
    --dynamic false --units 1,9 --gaps-ms 0 "$@" > "$out/$name.log" 2>&1
  echo "$name exit=$? $(grep '^{' "$out/$name.log" | tail -1 | cut -c1-300)"
  phase "$name-end"
}
loop loop1
loops=${B2B_LOOP_RUNS:-}  # more loops before the jobs: name:option,option:K=V,K=V
for spec in $loops; do
  IFS=: read -r name options envs <<< "$spec"
  loop "$name" "$envs" ${options//,/ }
done
job() {  # job <name> <environment: K=V,K=V> <overrides...>; CACHE=<dir name>: an inductor cache of its own
  local name=$1 CACHE=inductor_cache; local -a envs; IFS=, read -ra envs <<< "$2"; shift 2
  [ ${#envs[@]} -gt 0 ] && local "${envs[@]}"
  phase "$name-start"
  env "${envs[@]}" python3 -m pipeline.run "${M[@]}" scenario=inference precision=amp compile.mode=default compile.dynamic=false \
    "${S[@]}" "mlflow.tracking_uri=sqlite:///$out/mlflow.db" "hydra.run.dir=$out/$name" \
    "diagnose.cache_dir=$out/$CACHE" "$@" > "$out/$name.log" 2>&1
  echo "$name exit=$? $(tail -n 1 "$out/$name.log" | cut -c1-200)"
  phase "$name-end"
}
# the job as a user runs it; no torch-free CPU burst before each round; no eager rounds between the compiled ones
jobs=${B2B_JOBS:-"job: job-nohostcheck:benchmark.host_check_s=0 job-unpaired:benchmark.paired_eager=false"}
for spec in $jobs; do  # name:override,override:K=V,K=V
  IFS=: read -r name overrides envs <<< "$spec"
  job "$name" "$envs" ${overrides//,/ }
done
loop loop2
[ -n "${sampler:-}" ] && kill "$sampler"
for spec in $jobs; do cp "$out/${spec%%:*}/result.json" "$out/${spec%%:*}-result.json" 2>/dev/null; done
python3 - "$out" $jobs <<'PY' | tee "$out/table.md"
import datetime, json, os, statistics, sys
from pathlib import Path
out, jobs = Path(sys.argv[1]), [spec.split(":")[0] for spec in sys.argv[2:]]
loops = [spec.split(":")[0] for spec in os.environ.get("B2B_LOOP_RUNS", "").split()]
for name in ("loop1", *loops, "loop2"):
    if not (out / f"{name}.log").exists():
        continue
    loop = json.loads([l for l in (out / f"{name}.log").read_text().splitlines() if l.startswith("{")][-1])
    print(name, "ms per unit:", json.dumps(loop["p50_ms"]), "host CPU per unit:", loop["host_cpu_ms"], "ms",
          "gc [passes, ms]:", loop.get("gc"), "allocator:", loop.get("allocator"))
for name in jobs:
    if not (out / name / "result.json").exists():
        continue
    r = json.loads((out / name / "result.json").read_text()); m = r["metrics"]
    print(f"{name}: step/p10_ms {m['step/p10_ms']:.2f}, step/p50_ms {m['step/p50_ms']:.2f}, latency/p50_ms {m['latency/p50_ms']:.2f}, eager/p50_ms {m.get('eager/p50_ms', float('nan')):.2f}, "
          f"round_units {r['info'].get('round_units')}, inductor cache {r['info'].get('inductor_cache')}, host/reference_spread_pct {m.get('host/reference_spread_pct', float('nan')):.0f}")
smi = out / "smi.csv"
if smi.exists():
    marks = dict(l.split() for l in (out / "phases.txt").read_text().splitlines())
    rows = []
    for line in smi.read_text().splitlines():
        f = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
            rows.append((t, float(f[1].split()[0]), float(f[3].split()[0]), float(f[4].split()[0]), f[6]))
        except (ValueError, IndexError):
            continue
    for name in ("loop1", *loops, *jobs, "loop2"):
        if f"{name}-start" not in marks:
            continue
        busy = [r for r in rows if float(marks[f"{name}-start"]) <= r[0] <= float(marks[f"{name}-end"]) and r[3] >= 50]
        if busy:
            print(f"{name}: {len(busy)} samples at >=50% utilization: SM clock p50 {statistics.median(r[1] for r in busy):.0f} MHz "
                  f"(min {min(r[1] for r in busy):.0f}), power p50 {statistics.median(r[2] for r in busy):.0f} W, "
                  f"throttle reasons {sorted(set(r[4] for r in busy))}")
PY
echo "b2b_gap done"
