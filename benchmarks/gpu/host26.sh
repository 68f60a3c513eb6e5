#!/usr/bin/env bash
# Issue 26 on one GPU, after benchmarks/host_probe.py found the host's vCPUs running at full or half
# speed: the host check (benchmark.host_check_s) in pipeline jobs of a launch-bound model, and whether
# CUDA graphs take the host out of its step.
#   1. mobilenetv3_large_100 bs256 amp, compile.mode=default: a pipeline job (cold inductor cache)
#   2. the same with compile.mode=reduce-overhead (the cache of 1: the same graphs, CUDA graphs on top)
#   3. the project's bare loop (benchmarks/bare_loop.py), reduce-overhead, the same cache
# Then one table: step p50, spread, noisy, the host check's median and spread, the note's host clause.
# HOST_SMOKE=1: the same on a CPU with a tiny model and few steps (a check of this script, no figures).
# Usage on the GPU host: bash benchmarks/gpu/host26.sh <out dir>
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); mkdir -p "$out"
source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
head -4 "$out/host.txt"
export TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache
if [ "${HOST_SMOKE:-0}" = 1 ]; then
  M=(model=timm/resnet18 trainer.batch_size=2 device=cpu trainer.steps=8 trainer.warmup_steps=2 diagnose.flops=false model.input.height=32 model.input.width=32)
  BARE=(--model resnet18 --batch-size 2 --device cpu --image-size 32 --steps 8 --warmup 2); RO=default
else
  M=(model=timm/mobilenetv3_large_100 trainer.batch_size=256); BARE=(--model mobilenetv3_large_100 --batch-size 256); RO=reduce-overhead
fi
pipe() {  # <name> <overrides...>
  local name=$1; shift
  python3 -m pipeline.run "${M[@]}" precision=amp diagnose.cache_dir="$TORCHINDUCTOR_CACHE_DIR" "$@" \
    "mlflow.tracking_uri=sqlite:///$out/mlflow.db" "hydra.run.dir=$out/$name" > "$out/$name.log" 2>&1
  echo "$name exit=$? $(tail -n 1 "$out/$name.log" | cut -c1-200)"
}
pipe pipe-default compile.mode=default
pipe pipe-ro compile.mode=$RO
python3 benchmarks/bare_loop.py "${BARE[@]}" --compile $RO > "$out/bare-ro.log" 2>&1
echo "bare-ro exit=$? $(grep '^{' "$out/bare-ro.log" | tail -1 | cut -c1-300)"
python3 - "$out" <<'PY' | tee "$out/host26.md"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| job | step p50 ms | p10-p90 spread % | noisy | host reference p50 ms | host reference spread % | note's host clause |")
print("|---|---|---|---|---|---|---|")
for name in ("pipe-default", "pipe-ro"):
    f = out / name / "result.json"
    if not f.exists():
        print(f"| {name} | failed | | | | | |"); continue
    r = json.loads(f.read_text()); m = r["metrics"]; note = r["info"].get("measurement_note") or ""
    clause = next((c.strip() for c in note.split(";") if "host's own CPU speed" in c), "-")
    print(f"| {name} | {m['step/p50_ms']:.2f} | {m['step/spread_pct']:.1f} | {bool(m['step/noisy'])} | "
          f"{m.get('host/reference_p50_ms', float('nan')):.3f} | {m.get('host/reference_spread_pct', float('nan')):.0f} | {clause[:90]} |")
lines = [l for l in (out / "bare-ro.log").read_text().splitlines() if l.startswith("{")]
if lines:
    b = json.loads(lines[-1])
    spread = 100 * (b["step_time_ms_p90"] - b["step_time_ms_p10"]) / b["step_time_ms_p50"]
    print(f"| bare loop ({b['config']}) | {b['step_time_ms_p50']:.2f} | {spread:.1f} | - | - | - | - |")
PY
echo "host26 done"
