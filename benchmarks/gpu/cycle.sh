#!/usr/bin/env bash
# Inference with cycling batch sizes (scenario.batch_sizes: a unit is one call of each size) on one GPU:
# for compile.dynamic=true and false, the pipeline's job as a user runs it, then a plain loop timing the
# same cycle synchronized (benchmarks/latency_loop.py --batch-sizes); a table of both.
# CYCLE_SMOKE=1: the same on a CPU with a tiny model (a check of this script, no figures).
# CYCLE_MODEL (timm name, resnet50) and CYCLE_SIZES (1,8,32) pick the job.
# Usage on the GPU host: bash benchmarks/gpu/cycle.sh <out dir>
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); mkdir -p "$out"
if [ "${CYCLE_SMOKE:-0}" = 1 ]; then  # this checkout's .venv
  export PATH=$PWD/.venv/bin:$PATH PYTHONPATH=$PWD
  m=resnet18; S=(device=cpu model.input.height=32 model.input.width=32 benchmark.budget_s=0 trainer.steps=6 trainer.warmup_steps=2)
  L=(--device cpu --image-size 32 --calls 6 --warmup 2); sizes=1,4
else
  source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
  head -4 "$out/host.txt"
  m=${CYCLE_MODEL:-resnet50}; S=(benchmark.budget_s=30); L=(--calls 200 --warmup 10); sizes=${CYCLE_SIZES:-1,8,32}
fi
for dynamic in true false; do
  name=pipe-$dynamic
  python3 -m pipeline.run model="timm/$m" scenario=inference "scenario.batch_sizes=[$sizes]" precision=amp \
    compile.mode=default compile.dynamic=$dynamic "mlflow.tracking_uri=sqlite:///$out/mlflow.db" \
    "hydra.run.dir=$out/$name" "${S[@]}" > "$out/$name.log" 2>&1
  echo "$name exit=$? $(tail -n 1 "$out/$name.log" | cut -c1-240)"
  TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache-loop-$dynamic python3 benchmarks/latency_loop.py --model $m \
    --batch-sizes $sizes --compile default --dynamic $dynamic "${L[@]}" > "$out/loop-$dynamic.log" 2>&1
  echo "loop-$dynamic exit=$? $(grep '^{' "$out/loop-$dynamic.log" | tail -1 | cut -c1-300)"
done
python3 - "$out" <<'PY' | tee "$out/table.md"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| compile.dynamic | pipeline latency/p50_ms (cycle) | loop p50 | pipeline/loop | pipeline samples/s (back to back) | loop samples/s (synchronized) | unit |")
print("|---|---|---|---|---|---|---|")
for d in ("true", "false"):
    r = json.loads((out / f"pipe-{d}" / "result.json").read_text())
    m = r["metrics"]
    loop = json.loads([l for l in (out / f"loop-{d}.log").read_text().splitlines() if l.startswith("{")][-1])
    print(f"| {d} | {m['latency/p50_ms']:.3f} | {loop['latency_ms_p50']:.3f} | {m['latency/p50_ms'] / loop['latency_ms_p50']:.3f} "
          f"| {m['throughput/samples_per_s']:.0f} | {loop['samples_per_s_at_p50']:.0f} | {r['work']['unit']}, {r['work']['samples']:g} samples |")
PY
echo "cycle done"
