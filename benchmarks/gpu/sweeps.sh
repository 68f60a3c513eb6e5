#!/usr/bin/env bash
# One GPU, the sweep figures of issues 3 and 4, each sweep into its own dir under <out dir>:
#   paired  issue 4: ViT-B/16 amp default, paired eager baseline, 3 repeats (seeds 0-2)
#   modes   issue 4: ViT-B/16 x {default, reduce-overhead, max-autotune-no-cudagraphs} x {amp, fp32}
#   zoo     issue 3: resnet50, gpt2, bert_base, llama_1b x {default, max-autotune-no-cudagraphs}, amp;
#           each compiled job's paired eager copy gives the eager figures of the same model.
# Every job compiles cold (diagnose.cold_cache=true): compile times are never warm-cache times.
# Usage on the GPU host: bash benchmarks/gpu/sweeps.sh <out dir> <seconds> <sweep>...
# SWEEP_ARGS is added to every sweep, e.g. SWEEP_ARGS='hydra/launcher=local_gpus gpu_pool=[0,1]' on 2 GPUs.
set -uo pipefail
out=${1:?out dir}; deadline=$(( $(date +%s) + ${2:?seconds} )); shift 2; mkdir -p "$out"
source benchmarks/gpu/setup.sh || exit 1
M="mlflow.tracking_uri=sqlite:///$PWD/$out/mlflow.db"
left() { local s=$(( deadline - $(date +%s) )); echo $(( s > 1 ? s : 1 )); }
run() {
  local name=$1; shift
  timeout "$(left)" python3 -m pipeline.run -m "$@" ${SWEEP_ARGS:-} diagnose.cold_cache=true "hydra.sweep.dir=$out/$name" "$M" > "$out/$name.log" 2>&1
  echo "$name exit=$? at $(date +%T)"
  sed -n '/^| /p' "$out/$name/summary.md" 2>/dev/null | cut -c1-400
  grep -E "^(geometric|weighted|fastest|pass rate|jobs:)" "$out/$name/summary.md" 2>/dev/null
  ls "$out/$name/plots" 2>/dev/null | tr '\n' ' '; echo
}
for sweep in "$@"; do
  case $sweep in
    paired) run paired model=vit_b16 precision=amp compile.mode=default trainer.seed=0,1,2 ;;
    modes) run modes model=vit_b16 compile.mode=default,reduce-overhead,max-autotune-no-cudagraphs precision=amp,fp32 ;;
    zoo) run zoo compile.mode=max-autotune-no-cudagraphs,default model=llama_1b,gpt2,bert_base,resnet50 precision=amp ;;
  esac
done
python3 benchmarks/gpu/collect.py "$out/jobs.json" "$out" > "$out/jobs.txt"; cut -c1-330 "$out/jobs.txt"
