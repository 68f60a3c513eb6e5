#!/usr/bin/env bash
# One GPU: does a launch-bound unit's figure depend on how many units a timed round holds? ResNet-50
# inference, batch sizes 32, 64, 128 cycled, amp, default mode, dynamic=false:
# 1. benchmarks/rounds_loop.py: the unit synchronized, and back to back in rounds of 1 and 9 units after a
#    lead-in with 0 or 3 ms of host work before the start event, interleaved round by round;
# 2. the pipeline's job at benchmark.round_s 0.02 (the default: one unit a round), 0.2, 0.02 again: its
#    back-to-back and synchronized medians, compiled and its paired eager copy;
# 3. how long the host work the Timer did between lead-in and start event took, in a process like a job's.
# ROUNDS_SMOKE=1: the same on a CPU with a tiny model (a check of this script, no figures).
# Usage on the GPU host: bash benchmarks/gpu/rounds.sh <out dir>
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); mkdir -p "$out"
if [ "${ROUNDS_SMOKE:-0}" = 1 ]; then  # this checkout's .venv
  export PATH=$PWD/.venv/bin:$PATH PYTHONPATH=$PWD
  M=(model=timm/resnet18 device=cpu model.input.height=32 model.input.width=32 "scenario.batch_sizes=[1,4]")
  S=(benchmark.budget_s=0 trainer.steps=6 trainer.warmup_steps=2)
  L=(--device cpu --model resnet18 --image-size 32 --batch-sizes 1,4 --rounds 4 --warmup 2); device=cpu
else
  source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
  head -4 "$out/host.txt"
  M=(model=timm/resnet50 "scenario.batch_sizes=[32,64,128]"); S=(benchmark.budget_s=20)
  L=(--model resnet50 --batch-sizes 32,64,128 --rounds 40); device=cuda
fi
export TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache
python3 benchmarks/rounds_loop.py "${L[@]}" --dynamic false --units 1,9 --gaps-ms 0,3 > "$out/loop.log" 2>&1
echo "loop exit=$? $(grep '^{' "$out/loop.log" | tail -1 | cut -c1-400)"
i=0
for rs in 0.02 0.2 0.02; do
  i=$((i + 1)); d=$out/job$i-$rs
  python3 -m pipeline.run "${M[@]}" scenario=inference precision=amp compile.mode=default compile.dynamic=false \
    benchmark.round_s=$rs "${S[@]}" "mlflow.tracking_uri=sqlite:///$out/mlflow.db" "hydra.run.dir=$d" > $d.log 2>&1
  echo "job$i exit=$? $(tail -n 1 $d.log | cut -c1-200)"
done
python3 - "$device" <<'PY' > "$out/gap.log" 2>&1
# The host work the Timer did between a round's lead-in and its start event (its CPU counters), in a
# process like a job's worker: CUDA up, a model compiled (inductor's compile workers are its descendants).
import statistics, sys, time, torch
from pipeline.measure.clocks import OthersCpu, cpu_ticks, thread_cpu_and_wait_ns
device = torch.device(sys.argv[1])
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).to(device))
model(torch.randn(8, 64, device=device))
others, ms = OthersCpu(), []
for _ in range(50):
    start = time.perf_counter()
    ticks = cpu_ticks(); others.start(ticks); thread_cpu_and_wait_ns()
    ms.append((time.perf_counter() - start) * 1000)
print(f"counter reads: p50 {statistics.median(ms):.2f} ms, max {max(ms):.2f} ms over 50")
PY
echo "gap exit=$? $(cat "$out/gap.log" | tail -1)"
python3 - "$out" <<'PY' | tee "$out/table.md"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
loop = json.loads([l for l in (out / "loop.log").read_text().splitlines() if l.startswith("{")][-1])
print("loop (ms per unit, median of", loop["rounds"], "interleaved rounds):", json.dumps(loop["p50_ms"]))
print()
print("| job | benchmark.round_s | units a round | compiled back to back (step/p50_ms) | compiled synchronized (latency/p50_ms) | eager back to back | eager synchronized | host/reference_spread_pct |")
print("|---|---|---|---|---|---|---|---|")
for d in sorted(p for p in out.glob("job*") if p.is_dir()):
    r = json.loads((d / "result.json").read_text()); m = r["metrics"]
    print(f"| {d.name} | {d.name.split('-')[1]} | {r['info'].get('round_units')} | {m['step/p50_ms']:.2f} | {m['latency/p50_ms']:.2f} "
          f"| {m.get('eager/p50_ms', float('nan')):.2f} | {m.get('eager/latency_p50_ms', float('nan')):.2f} | {m.get('host/reference_spread_pct', float('nan')):.0f} |")
PY
echo "rounds done"
