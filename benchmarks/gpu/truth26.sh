#!/usr/bin/env bash
# Issue 26 on one GPU, one run per table (same machine, back to back, every compile cold):
#   table    the launch-bound set and ViT-B/16, amp, compile.mode=default: the project's bare loop
#            (benchmarks/bare_loop.py: per-step events and a wall-clock mean) then the pipeline's job as
#            a user runs it (one run, spawned worker, paired eager); the host's processes sampled
#   probe    benchmarks/truth_probe.py: the pipeline's step and the bare step in one process (resnet50)
#   loader   seed 000's own DataLoader loop, then data.loader=true (ViT-B/16 amp eager)
#   latency  ResNet-152 and ViT-B/16 at batch 1, eager/default/reduce-overhead: the pipeline's latency/*
#            then a plain per-call synchronized loop (benchmarks/latency_loop.py)
# Then benchmarks/gpu/truth26_table.py prints the tables. TRUTH_SMOKE=1: the same on a CPU with tiny
# models and few steps (a check of this script, no figures).
# Usage on the GPU host: bash benchmarks/gpu/truth26.sh <out dir> [parts...]
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); shift; mkdir -p "$out"
parts=${*:-"table probe loader latency"}
source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
head -4 "$out/host.txt"
M="mlflow.tracking_uri=sqlite:///$out/mlflow.db"
py() { python3 "$@"; }
if [ "${TRUTH_SMOKE:-0}" = 1 ]; then
  S=(device=cpu trainer.steps=8 trainer.warmup_steps=2 diagnose.flops=false model.input.height=32 model.input.width=32)
  BARE=(--device cpu --image-size 32 --steps 8 --warmup 2); PROBE=(--device cpu --image-size 32 --rounds 2 --steps 2 --warmup 1)
  LAT=(--device cpu --image-size 32 --calls 3 --warmup 1)
  MODELS="resnet18:2"; MODE=eager; LMODELS="resnet18"; LMODES="eager"; V=(model=vit_tiny)
else
  S=(); BARE=(); PROBE=(); LAT=()
  MODELS="resnet50:64 resnet18:256 mobilenetv3_large_100:256 efficientnet_b0:128 convnext_tiny:128 vit_base_patch16_224:64"
  MODE=default; LMODELS="resnet152 vit_base_patch16_224"; LMODES="eager default reduce-overhead"; V=(model=vit_b16)
fi
model_cfg() { [ "$1" = vit_base_patch16_224 ] && echo vit_b16 || { [ "$1" = resnet152 ] && echo resnet152 || echo "timm/$1"; }; }

sample() {  # what else runs on the host while a job measures: every 2 s, the busiest processes and threads
  while true; do { date +%T; ps -eLo pid,tid,pcpu,comm --sort=-pcpu | head -14; } >> "$1"; sleep 2; done
}

pipe() {  # <name> <overrides...>: one job as a user runs it
  local name=$1; shift
  sample "$out/$name.ps" & local sampler=$!
  py -m pipeline.run "$@" "$M" "hydra.run.dir=$out/$name" > "$out/$name.log" 2>&1
  local rc=$?; kill "$sampler" 2>/dev/null
  echo "$name exit=$rc $(tail -n 1 "$out/$name.log" | cut -c1-240)"
}

for part in $parts; do
  case $part in
    table)
      for spec in $MODELS; do
        m=${spec%%:*}; bs=${spec##*:}
        TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache-bare-$m py benchmarks/bare_loop.py --model "$m" --batch-size "$bs" \
          --compile $MODE "${BARE[@]}" > "$out/bare-$m.log" 2>&1
        echo "bare-$m exit=$? $(grep '^{' "$out/bare-$m.log" | tail -1 | cut -c1-300)"
        pipe "pipe-$m" model="$(model_cfg "$m")" trainer.batch_size="$bs" precision=amp compile.mode=$MODE \
          diagnose.cold_cache=true "${S[@]}"
      done ;;
    probe)
      m=${MODELS%%:*}; m=${m%% *}; bs=${MODELS#*:}; bs=${bs%% *}
      TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache-bare-$m py benchmarks/truth_probe.py --model "$(model_cfg "$m")" \
        --timm-name "$m" --batch-size "$bs" --mode $MODE "${PROBE[@]}" > "$out/probe-$m.log" 2>&1
      echo "probe-$m exit=$? $(grep '^{' "$out/probe-$m.log" | cut -c1-400)" ;;
    loader)
      if [ "${TRUTH_SMOKE:-0}" = 1 ]; then echo "seed-loop: CUDA only"; else
        py benchmarks/seed_loop.py --amp --steps 100 --warmup 10 > "$out/seed-loop.log" 2>&1
        echo "seed-loop exit=$? $(grep '^{' "$out/seed-loop.log" | tail -1)"
      fi
      pipe loader-pipe "${V[@]}" precision=amp compile.mode=eager data.loader=true "${S[@]}" ;;
    latency)
      for m in $LMODELS; do
        for mode in $LMODES; do
          pipe "lat-$m-$mode" model="$(model_cfg "$m")" scenario=inference scenario.batch_size=1 precision=amp \
            compile.mode="$mode" diagnose.cold_cache=true trainer.steps=60 "${S[@]}"
          TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache-loop-$m-$mode py benchmarks/latency_loop.py --model "$m" --batch-size 1 \
            --compile "$mode" "${LAT[@]}" > "$out/loop-$m-$mode.log" 2>&1
          echo "loop-$m-$mode exit=$? $(grep '^{' "$out/loop-$m-$mode.log" | tail -1 | cut -c1-200)"
        done
      done ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
py benchmarks/gpu/truth26_table.py "$out" | tee "$out/tables.md"
echo "truth26 done"
