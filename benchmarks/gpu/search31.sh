#!/usr/bin/env bash
# Issue 31 on one GPU, one queue, every compile cold (diagnose.cold_cache=true), parts in this order:
#   vit     sweep=throughput_search model=vit_b16, a narrowed space (below) and SEARCH_VIT_TRIALS trials
#   best    the best ViT trial again: at its own precision with a profiler trace (where the time goes),
#           then at precision=fp8 (torchao float8 linears), 100 steps each, loss curves in the runs
#   llama   sweep=throughput_search model=llama_1b, its own batch sizes, SEARCH_LLAMA_TRIALS trials
#   modes   the ViT-B/16 modes sweep's max-autotune-no-cudagraphs cells beside default, amp and fp32,
#           each compiled job against its paired eager copy
# Each part has its own time cap, so that a slow one cannot starve the rest. The space is narrowed from
# conf/sweep/throughput_search.yaml to what fits the GPU time (the search's full space is its default):
# modes default / reduce-overhead / max-autotune-no-cudagraphs (max-autotune is the last with CUDA graphs,
# whose compile costs the same), fp8 measured apart (best). The caps fit one 30-minute machine only
# for parts of it: the first run (2026-11-25, benchmarks/RESULTS.md) finished the searches' first trials
# and the best trial at bf16; `SEARCH_BEST='<overrides>' bash ... best modes` runs the rest.
# SEARCH_SMOKE=1: the same on a CPU with vit_tiny and two trials (a check of this script, no figures).
# Usage on the GPU host: bash benchmarks/gpu/search31.sh <out dir> [parts...]
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); shift; mkdir -p "$out"
parts=${*:-"vit best llama modes"}
source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
head -4 "$out/host.txt"
python3 -c "import torchao; print('torchao', torchao.__version__)" 2>&1 | tail -1 | tee -a "$out/host.txt"
M="mlflow.tracking_uri=sqlite:///$out/mlflow.db"
C=diagnose.cold_cache=true
if [ "${SEARCH_SMOKE:-0}" = 1 ]; then
  VIT=(model=vit_tiny device=cpu compile.backend=aot_eager)
  LLAMA=(model=llama_tiny device=cpu compile.backend=aot_eager)
  S=(trainer.steps=4 trainer.warmup_steps=2); LONG=(trainer.steps=6 trainer.warmup_steps=2)
  VT=2; LT=2; CAP=(300 300 300 300)
  VSPACE=('compile.mode=choice(default)' 'compile.scope=choice(model)' 'trainer.batch_size=choice(2,4)'
    'precision=choice(amp,fp32)' 'trainer.optimizer.fused=choice(false)' 'inductor=choice(none)')
  LSPACE=('compile.mode=choice(default)' 'compile.scope=choice(model)' 'trainer.batch_size=choice(1,2)'
    'precision=choice(amp)' 'trainer.optimizer.fused=choice(false)' 'inductor=choice(none)')
  MODES="default"
else
  VIT=(model=vit_b16); LLAMA=(model=llama_1b)
  S=(trainer.steps=30 trainer.warmup_steps=5); LONG=(trainer.steps=100 trainer.warmup_steps=10)
  VT=${SEARCH_VIT_TRIALS:-6}; LT=${SEARCH_LLAMA_TRIALS:-3}; CAP=(${SEARCH_CAPS:-420 300 330 480})
  VSPACE=('compile.mode=choice(default,reduce-overhead,max-autotune-no-cudagraphs)' 'compile.scope=choice(model,regional)'
    'trainer.batch_size=choice(128,256)' 'precision=choice(amp,bf16)' 'trainer.optimizer.fused=choice(false,true)'
    'inductor=choice(none,coordinate_descent)')
  LSPACE=('compile.mode=choice(default,reduce-overhead)' 'compile.scope=choice(model,regional)'
    'trainer.batch_size=choice(2,4,8)' 'precision=choice(amp,bf16)' 'trainer.optimizer.fused=choice(true)'
    'inductor=choice(none)')
  MODES="default,max-autotune-no-cudagraphs"
fi

source benchmarks/gpu/capped_sweep.sh  # capped_sweep <name> <cap s> <overrides...>

for part in $parts; do
  case $part in
    vit) capped_sweep vit "${CAP[0]}" sweep=throughput_search "${VIT[@]}" "hydra.sweeper.n_trials=$VT" "${VSPACE[@]}" "${S[@]}" $C ;;
    llama) capped_sweep llama "${CAP[2]}" sweep=throughput_search "${LLAMA[@]}" "hydra.sweeper.n_trials=$LT" "${LSPACE[@]}" "${S[@]}" $C ;;
    best)
      # SEARCH_BEST: the best trial's overrides from an earlier search (its cache is then cold)
      best=${SEARCH_BEST:-$(python3 benchmarks/gpu/best_trial.py "$out/vit")} || { echo "best: no finished ViT trial"; continue; }
      echo "best ViT trial: $best"
      precision=$(tr ' ' '\n' <<< "$best" | sed -n 's/^precision=//p')
      others=$(tr ' ' '\n' <<< "$best" | grep -v '^precision=' | tr '\n' ' ')
      # its own precision with a profiler trace (taken after the measured steps), then fp8; the trial's
      # inductor cache is reused (these jobs are for throughput and loss curves: their compile times are warm)
      trial=$(python3 benchmarks/gpu/best_trial.py "$out/vit" --dir 2>/dev/null) && cache="diagnose.cache_dir=$trial/inductor_cache" || cache=$C
      # shellcheck disable=SC2086 # $others is a list of overrides
      capped_sweep best "${CAP[1]}" "${VIT[@]}" $others "precision=$precision,fp8" profile=true \
        benchmark.paired_eager=false "sweep.objective=throughput/samples_per_s" "${LONG[@]}" "$cache"
      find "$out/best" -name '*.json' -size +4M -path '*profile*' -delete 2>/dev/null  # keep the kernel tables, not the traces
      find "$out/best" -path '*profile*' -name '*.txt' -exec sh -c 'echo "== $1"; head -n 30 "$1" | cut -c1-200' _ {} \; ;;
    modes) capped_sweep modes "${CAP[3]}" "${VIT[@]}" "compile.mode=$MODES" precision=amp,fp32 "${LONG[@]/trainer.steps=100/trainer.steps=40}" $C ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
python3 benchmarks/gpu/collect.py "$out/jobs.json" "$out" > "$out/jobs.txt" 2>&1; cut -c1-330 "$out/jobs.txt"
echo "search31 done"
