#!/usr/bin/env bash
# A host with several GPUs; every job one per GPU through hydra/launcher=local_gpus (issue 5's launcher).
#   issue 5: the same 4-job sweep on one GPU (gpu_pool=[0]) and on two (gpu_pool=[0,1]), alone on the host
#   then, concurrently, sharing the machine-wide GPU pool:
#   issue 3: resnet50/gpt2/bert_base/llama_1b x modes; ViT-B/16 amp scopes x {cross-entropy, distillation}
#   issue 4: vit_b16 mode x precision summary (paired eager); paired eager-vs-default at amp, 3 repeats
#   issue 6: ViT-B/16 amp default diagnostics; the profiling article's loss, syncs before/after the fix
# Usage on the GPU host: bash benchmarks/gpu/multi.sh <out dir> [seconds for the concurrent part]
set -uo pipefail
out=${1:?out dir}; budget=${2:-330}; mkdir -p "$out"
source benchmarks/gpu/setup.sh || exit 1
export TORCHINDUCTOR_COMPILE_THREADS=16  # several jobs compile at once on one host
M="mlflow.tracking_uri=sqlite:///$PWD/$out/mlflow.db"
L="hydra/launcher=local_gpus"
four="model=vit_b16 precision=fp32 compile.mode=eager trainer.seed=0,1,2,3"
for pool in 0 01; do
  spec=$([ $pool = 0 ] && echo "[0]" || echo "[0,1]")
  start=$(python3 -c "import time; print(time.time())")
  timeout 200 python3 -m pipeline.run -m $four $L "gpu_pool=$spec" "hydra.sweep.dir=$out/issue5-gpus$pool" "$M" > "$out/issue5-gpus$pool.log" 2>&1
  echo "issue5 gpu_pool=$spec exit=$? wall_s=$(python3 -c "import time; print(round(time.time() - $start, 1))")" | tee -a "$out/issue5.txt"
done
S="benchmark.paired_eager=false trainer.steps=40 trainer.warmup_steps=10"
run() { name=$1; shift; timeout $budget python3 -m pipeline.run -m "$@" $L "hydra.sweep.dir=$out/$name" "$M" > "$out/$name.log" 2>&1; echo "$name exit=$?"; }
run zoo model=resnet50,gpt2,bert_base,llama_1b $S compile.mode=max-autotune-no-cudagraphs,default,eager &
sleep 20; run modes model=vit_b16 compile.mode=default,reduce-overhead,max-autotune-no-cudagraphs precision=amp,fp32 &
sleep 20; run scopes model=vit_b16 precision=amp $S compile.scope=model,loss,model_and_loss,regional,step loss=cross_entropy,distillation &
sleep 10; run paired model=vit_b16 precision=amp compile.mode=default trainer.seed=0,1,2 &
sleep 10; run diag model=vit_b16 precision=amp compile.mode=default benchmark.paired_eager=false diagnose.explain=true &
run syncs model=convnet trainer.batch_size=256 compile.mode=eager loss=profiling_ce,cross_entropy &
wait
python3 benchmarks/gpu/collect.py "$out/all.json" "$out" | cut -c1-300
