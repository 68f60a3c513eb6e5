#!/usr/bin/env bash
# Issue 26's diagnosis on one GPU: where does a compiled step of a launch-bound model lose time against
# a plain loop, and the DataLoader path against seed 000's loop? Measures before anything is edited:
#   bare     benchmarks/bare_loop.py (wall-clock mean and per-step events, host time per step, a profile)
#   pipe     the pipeline's job as a user runs it (one run, spawned worker, cold cache, profile=true),
#            with the host's processes sampled every 2 s while it runs
#   probe    benchmarks/truth_probe.py: the pipeline's step and the bare step in one process, alternating
#   toggles  the pipeline job without the paired eager copy, and without the diagnostics around it
#   loader   seed 000's own DataLoader loop against data.loader=true (ViT-B/16 amp eager)
#   harness  PyTorch's dynamo harness (.dynamobench, carried) on the same models, when it is there
# Usage on the GPU host: bash benchmarks/gpu/truth26.sh <out dir> [parts...]
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); shift; mkdir -p "$out"
parts=${*:-"rn50 mnv3 loader harness"}
source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
cat "$out/host.txt"
M="mlflow.tracking_uri=sqlite:///$out/mlflow.db"
py() { python3 "$@"; }

sample() {  # what else runs on the host while a job measures: every 2 s, the busiest processes
  while true; do
    { date +%T; ps -eo pid,ppid,pcpu,nlwp,rss,comm --sort=-pcpu | head -12; } >> "$1"
    sleep 2
  done
}

bare() {  # <name> <timm name> <batch> <mode> [extra]
  local name=$1 model=$2 bs=$3 mode=$4; shift 4
  TORCHINDUCTOR_CACHE_DIR=$out/cache-$name py benchmarks/bare_loop.py --model "$model" --batch-size "$bs" \
    --compile "$mode" --profile-dir "$out/$name-profile" "$@" > "$out/$name.log" 2>&1
  echo "$name exit=$? $(grep '^{' "$out/$name.log" | tail -1 | cut -c1-400)"
  py benchmarks/trace_summary.py "$out/$name-profile" | cut -c1-600
}

pipe() {  # <name> <overrides...>
  local name=$1; shift
  sample "$out/$name.ps" & local sampler=$!
  py -m pipeline.run "$@" "$M" "hydra.run.dir=$out/$name" > "$out/$name.log" 2>&1
  local rc=$?
  kill "$sampler" 2>/dev/null
  echo "$name exit=$rc $(tail -n 1 "$out/$name.log" | cut -c1-300)"
  py - "$out/$name/result.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); m = r["metrics"]
keys = ["step/p50_ms", "step/mean_ms", "step/spread_pct", "step/noisy", "eager/p50_ms", "speedup/vs_eager",
        "speedup/round_min", "speedup/round_max", "compile/total_s", "step/cpu_steal_pct"]
print({k: round(m[k], 3) for k in keys if k in m}, "timeline", r["info"].get("timeline"))
print("round p50s:", r["info"].get("round_p50_ms"), "| rounds", r["info"].get("rounds"))
EOF
  [ -d "$out/$name/profile" ] && py benchmarks/trace_summary.py "$out/$name/profile" | cut -c1-600
}

C=diagnose.cold_cache=true
# TRUTH_SMOKE=1: the same parts on a CPU with tiny models and few steps (a check of this script, no figures).
if [ "${TRUTH_SMOKE:-0}" = 1 ]; then
  S=(device=cpu trainer.steps=8 trainer.warmup_steps=2 diagnose.flops=false)
  BARE=(--device cpu --image-size 32 --steps 8 --warmup 2); PROBE=(--device cpu --image-size 32 --rounds 2 --steps 2 --warmup 1)
  RN=(resnet18 2 timm/resnet18 "model.input.height=32 model.input.width=32"); MN=(resnet18 2 timm/resnet18); MODE=eager
else
  S=(); BARE=(); PROBE=(); RN=(resnet50 64 timm/resnet50 ""); MN=(mobilenetv3_large_100 256 timm/mobilenetv3_large_100); MODE=default
fi
for part in $parts; do
  case $part in
    rn50)
      R=(model=${RN[2]} trainer.batch_size=${RN[1]} precision=amp compile.mode=$MODE ${RN[3]} "${S[@]}")
      bare rn50-bare "${RN[0]}" "${RN[1]}" $MODE "${BARE[@]}"
      pipe rn50-pipe "${R[@]}" profile=true $C
      TORCHINDUCTOR_CACHE_DIR=$out/cache-rn50-bare py benchmarks/truth_probe.py --model "${RN[2]}" \
        --timm-name "${RN[0]}" --batch-size "${RN[1]}" --mode $MODE "${PROBE[@]}" --extra ${RN[3]} > "$out/rn50-probe.log" 2>&1
      echo "rn50-probe exit=$? $(grep '^{' "$out/rn50-probe.log" | cut -c1-900)"
      pipe rn50-unpaired "${R[@]}" benchmark.paired_eager=false "diagnose.cache_dir=$out/rn50-pipe/inductor_cache"
      pipe rn50-nodiag "${R[@]}" benchmark.paired_eager=false diagnose.sync_check=false diagnose.flops=false \
        "diagnose.cache_dir=$out/rn50-pipe/inductor_cache"
      bare rn50-bare-eager "${RN[0]}" "${RN[1]}" eager "${BARE[@]}"
      ;;
    mnv3)
      bare mnv3-bare "${MN[0]}" "${MN[1]}" $MODE "${BARE[@]}"
      pipe mnv3-pipe model=${MN[2]} trainer.batch_size=${MN[1]} precision=amp compile.mode=$MODE profile=true $C "${S[@]}"
      ;;
    loader)
      if [ "${TRUTH_SMOKE:-0}" = 1 ]; then echo "seed-loop: CUDA only"; else
        py benchmarks/seed_loop.py --amp --steps 100 --warmup 10 > "$out/seed-loop.log" 2>&1
        echo "seed-loop exit=$? $(grep '^{' "$out/seed-loop.log" | tail -1)"
      fi
      V=(model=vit_b16 precision=amp compile.mode=eager data.loader=true); [ "${TRUTH_SMOKE:-0}" = 1 ] && V=(model=vit_tiny compile.mode=eager data.loader=true data.num_workers=1 "${S[@]}")
      pipe loader-pipe "${V[@]}"
      pipe loader-pipe-w8 "${V[@]}" data.num_workers=$([ "${TRUTH_SMOKE:-0}" = 1 ] && echo 2 || echo 8)
      ;;
    harness)
      if [ -f .dynamobench/run_harness.sh ]; then
        bash .dynamobench/run_harness.sh "$out/harness" > "$out/harness.log" 2>&1
        echo "harness exit=$?"; tail -n 20 "$out/harness.log" | cut -c1-300
      else
        echo "harness: .dynamobench not carried"
      fi
      ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
echo "truth26 done"
