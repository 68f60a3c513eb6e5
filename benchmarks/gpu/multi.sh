#!/usr/bin/env bash
# A host with 4 GPUs; every job gets one GPU through the machine-wide GPU pool (hydra/launcher=local_gpus).
# Phase 1, GPUs 0-1: issue 5, the same 4-job sweep on one GPU (gpu_pool=[0]) then on two ([0,1]).
#          GPU 2: issue 9, the bare loop vs the pipeline on the same GPU, interleaved, 3 repeats.
# Phase 2, all GPUs: issue 4 (mode x precision summary; paired eager-vs-default, 3 repeats),
#          issue 6 (ViT-B/16 diagnostics; the profiling article's loss, syncs before/after the fix),
#          issue 3 (ViT-B/16 scopes x {cross-entropy, distillation}).
# Usage on the GPU host: bash benchmarks/gpu/multi.sh <out dir> <seconds until everything must end>
set -uo pipefail
out=${1:?out dir}; deadline=$(( $(date +%s) + ${2:-520} )); mkdir -p "$out"
source benchmarks/gpu/setup.sh || exit 1
export TORCHINDUCTOR_COMPILE_THREADS=16  # several jobs compile at once on one host
M="mlflow.tracking_uri=sqlite:///$PWD/$out/mlflow.db"
L="hydra/launcher=local_gpus"
left() { local s=$(( deadline - $(date +%s) )); echo $(( s > 1 ? s : 1 )); }
run() { name=$1; shift; timeout $(left) python3 -m pipeline.run -m "$@" $L "hydra.sweep.dir=$out/$name" "$M" > "$out/$name.log" 2>&1; echo "$name exit=$? at $(date +%T)"; }
issue5() {
  for pool in 0 01; do
    spec=$([ $pool = 0 ] && echo "[0]" || echo "[0,1]")
    start=$(python3 -c "import time; print(time.time())")
    run issue5-gpus$pool model=vit_b16 precision=fp32 compile.mode=eager trainer.seed=0,1,2,3 "gpu_pool=$spec"
    echo "issue5 gpu_pool=$spec wall_s=$(python3 -c "import time; print(round(time.time() - $start, 1))")" | tee -a "$out/issue5.txt"
  done
}
issue5 & phase1=$!
timeout $(left) python3 benchmarks/bench.py --sections overhead --reps amp:3 --gpu-pool "[2]" --out "$out/bench" > "$out/bench.log" 2>&1 &
wait $phase1
S="benchmark.paired_eager=false trainer.steps=40 trainer.warmup_steps=10"
run modes model=vit_b16 compile.mode=default,reduce-overhead,max-autotune-no-cudagraphs precision=amp,fp32 &
run paired model=vit_b16 precision=amp compile.mode=default trainer.seed=0,1,2 &
run diag model=vit_b16 precision=amp compile.mode=default benchmark.paired_eager=false diagnose.explain=true &
run syncs model=convnet trainer.batch_size=256 compile.mode=eager loss=profiling_ce,cross_entropy &
run scopes model=vit_b16 precision=amp $S compile.scope=model,loss,model_and_loss,regional,step loss=cross_entropy,distillation &
wait
python3 benchmarks/bench.py --report "$out/bench" > /dev/null 2>&1; cp benchmarks/RESULTS.md "$out/RESULTS.md" 2>/dev/null
python3 benchmarks/gpu/collect.py "$out/all.json" "$out" | cut -c1-240
cat "$out/issue5.txt"
