#!/usr/bin/env bash
# One GPU, sweeps for the issues' GPU figures, each into its own dir under <out dir>:
#   loader  issue 2: ViT-B/16 {amp, fp32} x {eager, default} through the DataLoader path (data.loader=true)
#   syncs   issue 6: the profiling article's CNN with its sync-heavy loss, then with torch's cross-entropy
#   paired  issue 4: ViT-B/16 amp default, paired eager baseline, 3 repeats (seeds 0-2)
#   modes   issue 4: ViT-B/16 x {default, reduce-overhead, max-autotune-no-cudagraphs} x {amp, fp32}
#   scopes  issue 3: ViT-B/16 amp, every compile scope x {cross-entropy, distillation}
#   zoo     issue 3: resnet50, gpt2, bert_base, llama_1b x {default, max-autotune-no-cudagraphs}, amp;
#           each compiled job's paired eager copy gives the eager figures of the same model.
#   zoo_default, zoo_mac: the two halves of zoo.
#   seed004_cnn, seed004_vit  issue 20: inference at batch 1, ResNet-152 / ViT-B/16, default and
#           reduce-overhead against the paired eager copy (seed 004's table)
#   seed004_llama  issue 20: generation with the Llama-2-7B-shaped LM, bf16, reduce-overhead decode
#   seed004_mat  issue 20: max-autotune inference for both (long compiles)
#   modes17  issue 17: ViT-B/16 training, eager/default/reduce-overhead x amp/fp32, for the verdicts
#   dist21   issue 21 (2 GPUs of one host): ViT-B/16 and llama_1b x parallel={none,ddp,fsdp} x {eager, default},
#           amp, regional compile (per sharded block under FSDP2): step time, speedup, per-rank memory, scaling
#   dist21_ddp  issue 21: ViT-B/16 DDP, compiled step, optimize_ddp={on, off, compiled_autograd}
# Every compiled job but the loader's compiles cold (diagnose.cold_cache=true): compile times are never
# warm-cache times. SWEEP_STEPS (e.g. "trainer.steps=40") shortens the scopes and zoo jobs.
# Usage on the GPU host: bash benchmarks/gpu/sweeps.sh <out dir> <seconds> <sweep>...
# SWEEP_ARGS is added to every sweep, e.g. SWEEP_ARGS='hydra/launcher=local_gpus gpu_pool=[0,1]' on 2 GPUs.
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); deadline=$(( $(date +%s) + ${2:?seconds} )); shift 2; mkdir -p "$out"
source benchmarks/gpu/setup.sh > /dev/null || exit 1
M="mlflow.tracking_uri=sqlite:///$out/mlflow.db"
C=diagnose.cold_cache=true
left() { local s=$(( deadline - $(date +%s) )); echo $(( s > 1 ? s : 1 )); }
run() {
  local name=$1; shift
  timeout "$(left)" python3 -m pipeline.run -m "$@" ${SWEEP_ARGS:-} "hydra.sweep.dir=$out/$name" "$M" > "$out/$name.log" 2>&1
  echo "$name exit=$? at $(date +%T)"
  sed -n '/^| /p' "$out/$name/summary.md" 2>/dev/null | cut -c1-400
  grep -E "^- (geometric|weighted|fastest|pass rate|jobs:)" "$out/$name/summary.md" 2>/dev/null
  ls "$out/$name/plots" 2>/dev/null | tr '\n' ' '; echo
}
for sweep in "$@"; do
  case $sweep in
    loader) run loader model=vit_b16 precision=amp,fp32 compile.mode=eager,default data.loader=true benchmark.paired_eager=false ;;
    syncs) run syncs model=convnet compile.mode=eager loss=profiling_ce,cross_entropy trainer.steps=30 $C ;;
    paired) run paired model=vit_b16 precision=amp compile.mode=default trainer.seed=0,1,2 $C ;;
    modes) run modes model=vit_b16 compile.mode=default,reduce-overhead,max-autotune-no-cudagraphs precision=amp,fp32 $C ;;
    scopes) run scopes model=vit_b16 precision=amp benchmark.paired_eager=false ${SWEEP_STEPS:-} \
      compile.scope=model,loss,model_and_loss,regional,step loss=cross_entropy,distillation $C ;;
    zoo) run zoo compile.mode=default,max-autotune-no-cudagraphs model=resnet50,gpt2,bert_base,llama_1b precision=amp ${SWEEP_STEPS:-} $C ;;
    zoo_default) run zoo_default compile.mode=default model=resnet50,gpt2,bert_base,llama_1b precision=amp ${SWEEP_STEPS:-} $C ;;
    zoo_mac) run zoo_mac compile.mode=max-autotune-no-cudagraphs model=resnet50,gpt2,bert_base,llama_1b precision=amp ${SWEEP_STEPS:-} $C ;;
    seed004_cnn) run seed004_cnn scenario=inference model=resnet152 scenario.batch_size=1 compile.mode=default,reduce-overhead trainer.steps=60 $C ;;
    seed004_vit) run seed004_vit scenario=inference model=vit_b16 scenario.batch_size=1 compile.mode=default,reduce-overhead trainer.steps=60 $C ;;
    seed004_llama) run seed004_llama scenario=generate model=llama_7b compile.mode=reduce-overhead trainer.steps=5 trainer.warmup_steps=2 $C ;;
    seed004_mat) run seed004_mat scenario=inference scenario.batch_size=1 model=resnet152,vit_b16 compile.mode=max-autotune trainer.steps=60 $C ;;
    modes17) run modes17 model=vit_b16 compile.mode=eager,default,reduce-overhead precision=amp,fp32 trainer.steps=40 $C ;;
    dist21) run dist21 model=vit_b16,llama_1b precision=amp parallel=none,ddp,fsdp compile.mode=eager,default compile.scope=regional trainer.steps=40 $C ;;
    dist21_ddp) run dist21_ddp model=vit_b16 precision=amp parallel=ddp compile.mode=default compile.scope=step parallel.optimize_ddp=on,off,compiled_autograd trainer.steps=40 $C ;;
    *) echo "unknown sweep $sweep"; exit 2 ;;
  esac
done
python3 benchmarks/gpu/collect.py "$out/jobs.json" "$out" > "$out/jobs.txt"
[ "${SWEEPS_PRINT_JOBS:-1}" = 0 ] || cut -c1-330 "$out/jobs.txt"
