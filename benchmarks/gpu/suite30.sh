#!/usr/bin/env bash
# Issue 30 on one GPU, one queue, every compile cold (diagnose.cold_cache=true), amp, default mode:
#   ab     the A/B: the same AB_MODELS as sweep=timm_suite one job at a time (Hydra's basic launcher), then
#          with benchmark.overlap=true hydra/launcher=local_gpus (two jobs on the GPU, one compiling while
#          the other measures); benchmarks/gpu/suite30_table.py compares them per model (step p50,
#          speedup, compile time) and the two sweeps' wall times
#   off    the A/B's off arm alone (AB_MODELS one job at a time); a later suite part, which holds the
#          same models, is then its on arm (the table matches jobs by model): one GPU call fits both
#   again  the off arm once more, into ab-off2 (after ab or off): off against off, the A/B's noise floor
#   suite  SUITE_MODELS (20 of the 42) as sweep=timm_suite, with overlap when SUITE_OVERLAP=1
# AB_PIN=1: the off arm's workers pinned to the cores the on arm's first slot gets (PIPELINE_CPUS: the first
# half of this machine's cores, torch's and OpenMP's threads and inductor's compile workers as many), so that
# the arms differ in overlap alone (with overlap each worker is pinned to its half; alone it is not).
# Each part has its own cap; SUITE_DEADLINE (epoch seconds) cuts every cap to end by then, so that a
# part left last fills what a machine's hold has left. SUITE_SMOKE=1: the same on a CPU with tiny models (a check of this script).
# Usage on the GPU host: bash benchmarks/gpu/suite30.sh <out dir> [parts...]
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); shift; mkdir -p "$out"
parts=${*:-"ab suite"}
source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
head -4 "$out/host.txt"
M="mlflow.tracking_uri=sqlite:///$out/mlflow.db"
C=diagnose.cold_cache=true
OVERLAP=(benchmark.overlap=true hydra/launcher=local_gpus)
if [ "${SUITE_SMOKE:-0}" = 1 ]; then
  BASE=(sweep=tiny_suite device=cpu compile.fullgraph=false trainer.steps=6 trainer.warmup_steps=2)
  OVERLAP+=("gpu_pool=[0]")
  AB_MODELS=vit_tiny,resnet_tiny,gpt2_tiny; SUITE_MODELS=vit_tiny,resnet_tiny,gpt2_tiny,llama_tiny; CAP=(300 300 300)
else
  BASE=(sweep=timm_suite precision=amp)
  AB_MODELS=${AB_MODELS:-timm/resnet50,timm/convnext_tiny,timm/vit_base_patch16_224,timm/swin_tiny_patch4_window7_224,timm/resnet18,timm/mobilenetv3_large_100}
  SUITE_MODELS=${SUITE_MODELS:-timm/resnet18,timm/resnet50,timm/resnet101,timm/resnext50_32x4d,timm/densenet121,timm/efficientnet_b0,timm/mobilenetv2_100,timm/mobilenetv3_large_100,timm/regnety_016,timm/convnext_tiny,timm/convnext_small,timm/vit_small_patch16_224,timm/vit_base_patch16_224,timm/deit_small_patch16_224,timm/swin_tiny_patch4_window7_224,timm/mixer_b16_224,timm/poolformer_s12,timm/ghostnet_100,timm/dla34,timm/inception_v3}
  CAP=(${SUITE_CAPS:-720 720 1500})
fi

source benchmarks/gpu/capped_sweep.sh  # capped_sweep <name> <cap s> <overrides...>
off_sweep() {  # the off arm: capped_sweep, its workers pinned as the on arm's first slot when AB_PIN=1
  if [ "${AB_PIN:-0}" = 1 ]; then
    local n; n=$(nproc)
    (export PIPELINE_CPUS; PIPELINE_CPUS=$(seq -s, 0 $(( n > 1 ? n / 2 - 1 : 0 ))); capped_sweep "$@")
  else
    capped_sweep "$@"
  fi
}
cap() {  # cap <s>: the part's cap, or less where SUITE_DEADLINE comes first
  local left=$(( ${SUITE_DEADLINE:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}

for part in $parts; do
  case $part in
    ab)
      off_sweep ab-off "$(cap "${CAP[0]}")" "${BASE[@]}" "model=$AB_MODELS" $C
      capped_sweep ab-on "$(cap "${CAP[1]}")" "${BASE[@]}" "model=$AB_MODELS" "${OVERLAP[@]}" $C
      python3 benchmarks/gpu/suite30_table.py "$out/ab-off" "$out/ab-on" | tee "$out/ab.md" ;;
    off)  # after a suite part its on arm is the suite (the table matches jobs by model)
      off_sweep ab-off "$(cap "${CAP[0]}")" "${BASE[@]}" "model=$AB_MODELS" $C
      [ -d "$out/suite" ] && python3 benchmarks/gpu/suite30_table.py "$out/ab-off" "$out/suite" | tee "$out/ab.md" ;;
    again)  # the off arm once more (ab-off2), after the A/B: off against off is the noise floor the
            # A/B's on / off ratios are read against (the same models, machine and settings, minutes apart)
      off_sweep ab-off2 "$(cap "${CAP[0]}")" "${BASE[@]}" "model=$AB_MODELS" $C
      python3 benchmarks/gpu/suite30_table.py "$out/ab-off" "$out/ab-off2" off off2 | tee "$out/again.md" ;;
    suite)
      extra=(); [ "${SUITE_OVERLAP:-1}" = 1 ] && extra=("${OVERLAP[@]}")
      capped_sweep suite "$(cap "${CAP[2]}")" "${BASE[@]}" "model=$SUITE_MODELS" "${extra[@]}" $C
      [ -d "$out/ab-off" ] && [ ! -d "$out/ab-on" ] && python3 benchmarks/gpu/suite30_table.py "$out/ab-off" "$out/suite" | tee "$out/ab.md" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
echo "suite30 done"
