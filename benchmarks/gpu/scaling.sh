#!/usr/bin/env bash
# Issue 5 on a host with 2 GPUs: the same 4-job sweep (ViT-B/16 fp32 eager, seeds 0-3) on one GPU
# (gpu_pool=[0]) and on two ([0,1]) through hydra/launcher=local_gpus: trainer.steps=200 first (two GPUs,
# then one), then, while time is left, the default 100 steps (one GPU, then two), so drift hits both
# sides alike. The MLflow store is created first, so every sweep finds it in the same state.
# Usage on the GPU host: bash benchmarks/gpu/scaling.sh <out dir> [seconds until everything must end]
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); deadline=$(( $(date +%s) + ${2:-540} )); mkdir -p "$out"
source benchmarks/gpu/setup.sh || exit 1
db="sqlite:///$out/mlflow.db"
python3 -c "from pipeline.tracking import Tracker; Tracker('$db', 'compile-sweeps').experiment_id" 2>/dev/null
python3 benchmarks/gpu/warm_checks.py model=vit_b16 precision=fp32 compile.mode=eager
left() { local s=$(( deadline - $(date +%s) )); echo $(( s > 1 ? s : 1 )); }
now() { python3 -c 'import time; print(f"{time.time():.2f}")'; }
sweep() {
  local steps=$1 pool=$2 name="s$1-gpus$(echo "$2" | tr -dc 0-9)" start end
  start=$(now)
  timeout "$(left)" python3 -m pipeline.run -m model=vit_b16 precision=fp32 compile.mode=eager \
    trainer.seed=0,1,2,3 "trainer.steps=$steps" hydra/launcher=local_gpus "gpu_pool=$pool" \
    "hydra.sweep.dir=$out/$name" "mlflow.tracking_uri=$db" > "$out/$name.log" 2>&1
  local rc=$?; end=$(now)
  echo "$name steps=$steps gpu_pool=$pool exit=$rc start=$start end=$end wall_s=$(python3 -c "print(round($end - $start, 1))")" | tee -a "$out/scaling.txt"
}
sweep 200 "[0,1]"; sweep 200 "[0]"; [ "$(left)" -gt 120 ] && sweep 100 "[0]"; [ "$(left)" -gt 70 ] && sweep 100 "[0,1]"
python3 benchmarks/gpu/collect.py "$out/jobs.json" "$out"/s*-gpus* | cut -c1-220
