#!/usr/bin/env bash
# Issue 44 on one machine with two GPUs: every table of its must-show, in one queue, in priority order,
# each part capped, the results written as they come (run it through queue.sh, as below):
#   probe     the machine first: nvidia-smi topo -m, and the collective probe (benchmarks/comm_probe.py:
#             all-reduce/all-gather/reduce-scatter over sizes, nccl-tests' busbw) with NCCL_DEBUG=INFO's
#             transport lines; the jobs then read it from the machine's cache (PIPELINE_CACHE_DIR)
#   vit       ViT-B/16 amp: parallel=none,ddp,fsdp x compile.mode=eager,default (one sweep), FSDP2 with
#             compile.scope=regional, then the plain torchrun loop (benchmarks/torchrun_loop.py) of every
#             cell in the same call, each variant with a profiler trace of 3 more steps per rank
#   vit_attr  ViT-B/16 DDP and FSDP2 compiled without the paired eager copy (benchmark.paired_eager=false:
#             what the copy beside the compiled model costs; DDP also with OMP_NUM_THREADS=1 per rank, as
#             torchrun alone sets it), and what DDP's settings change:
#             parallel.optimize_ddp=off, then compile.scope=step with optimize_ddp=on and compiled_autograd,
#             each with its plain loop
#   llama     llama_1b amp: as vit (no attr part)
#   traces    (asked for by name, after the parts whose traces it reads) every job's and plain loop's profiler
#             traces summarized per step into traces.jsonl: kernels, compiled regions, collectives, exposed comm
#   suite     the timm suite as issue 45's one-H200 run measured it (benchmarks/results/h200-2026-11-28-s45:
#             its 42 models in order, cold compiles, measured until decided), hydra/launcher=local_gpus with
#             one job per GPU on both GPUs, until its cap: its pace against that run's
# Knobs for a call that fills in what an earlier one left: DIST_VIT_BATCH (ViT-B/16's samples per rank, default
# the model's 64), DIST_PARALLEL / DIST_LLAMA_PARALLEL (the parallel values of vit's / llama's sweep and loops,
# default none,ddp,fsdp; FSDP2's regional cell runs where fsdp is one), DIST_ATTR (vit_attr's items, default
# 'unpaired omp1 ddp_off step').
# Then benchmarks/gpu/dist44_table.py turns the folder into the tables (tables.md), after every part.
# Compile caches: the pipeline's jobs (diagnose.cache_dir) and the plain loops share one inductor cache
# (compile times of vit/llama are not cold; the suite's are). NVLink multicast is off in every process.
# Caps (s): DIST_CAPS='probe vit vit_attr llama suite' (default '60 540 270 480 150', 25 minutes);
# DIST_DEADLINE (epoch s) cuts every cap to end by then. DIST_SMOKE=1: the same on a CPU with tiny models
# (gloo, 2 ranks, aot_eager, 6 steps; the suite with a pretend pool of 2 GPUs): a check of this script.
# Usage on the GPU host: bash benchmarks/gpu/dist44.sh <out dir> [parts...]
#   OUT=$OUT bash benchmarks/gpu/queue.sh start d44 script:dist44; bash benchmarks/gpu/queue.sh watch d44 560
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); shift; mkdir -p "$out/loops"
parts=${*:-"probe vit vit_attr llama suite"}
if [ "${DIST_SMOKE:-0}" = 1 ]; then  # this checkout's own environment (python3 on PATH: its venv's)
  export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
  python3 -c "import torch, sys; print('python', sys.version.split()[0], '| torch', torch.__version__)" > "$out/host.txt"
else
  source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
fi
head -4 "$out/host.txt"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PIPELINE_CACHE_DIR=$out/cache  # the machine's probe and config checks, archived with the results
CACHE=$out/inductor_cache
export TORCHINDUCTOR_CACHE_DIR=$CACHE TRITON_CACHE_DIR=$CACHE/triton  # the plain loops' (the jobs': diagnose.cache_dir)
M="mlflow.tracking_uri=sqlite:///$out/mlflow.db"
read -r -a CAPS <<< "${DIST_CAPS:-60 540 270 480 150}"
if [ "${DIST_SMOKE:-0}" = 1 ]; then
  NPROC=2
  COMMON=(device=cpu compile.backend=aot_eager trainer.steps=6 trainer.warmup_steps=2 benchmark.host_check_s=0.02
    benchmark.budget_s=0 "diagnose.cache_dir=$CACHE")
  VIT=(model=vit_tiny "${COMMON[@]}"); LLAMA=(model=llama_tiny "${COMMON[@]}")
  LOOP=(--device cpu --backend aot_eager --steps 6 --warmup 2); LOOP_VIT=(--model vit_tiny); LOOP_LLAMA=(--model llama_tiny)
  SUITE=(sweep=tiny_suite device=cpu compile.fullgraph=false trainer.steps=6 trainer.warmup_steps=2 benchmark.budget_s=3
    "gpu_pool=[0,1]")
  [ -n "${DIST_CAPS:-}" ] || CAPS=(60 420 420 420 200)
  export PIPELINE_GPU_LOCK_DIR=$out/gpu-locks  # the pretend pool's locks, this run's own
else
  NPROC=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); [ "$NPROC" -ge 2 ] || { echo "dist44: $NPROC GPU(s): two wanted"; exit 1; }
  # at least 40 steps a variant, then rounds until the job's question is decided or 10 s of them are spent
  COMMON=(precision=amp trainer.steps=40 benchmark.budget_s=10 "diagnose.cache_dir=$CACHE")
  VIT=(model=vit_b16 "${COMMON[@]}"); LLAMA=(model=llama_1b "${COMMON[@]}")
  LOOP=(--precision amp --warmup 10); LOOP_VIT=(--model vit_b16 --steps 100); LOOP_LLAMA=(--model llama_1b --steps 60)
  # issue 45's one-H200 suite run's overrides (decide45.sh's suite part) without its overlap: every model, in order
  SUITE=(sweep=timm_suite precision=amp diagnose.cold_cache=true)
fi
if [ -n "${DIST_VIT_BATCH:-}" ]; then VIT+=("trainer.batch_size=$DIST_VIT_BATCH"); LOOP_VIT+=(--batch-size "$DIST_VIT_BATCH"); fi
read -r -a ATTR <<< "${DIST_ATTR:-unpaired omp1 ddp_off step}"
has() { local x; for x in "${@:2}"; do [ "$x" = "$1" ] && return 0; done; return 1; }  # has <word> <list...>
echo "dist44: parts '$parts', caps ${CAPS[*]} s, $NPROC ranks, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE" | tee "$out/campaign.txt"

source benchmarks/gpu/capped_sweep.sh  # capped_sweep <name> <cap s> <overrides...>
part_end=9999999999
cap() {  # cap <s>: a command's cap, cut to its part's end and to DIST_DEADLINE
  local now; now=$(date +%s)
  local left=$(( ${DIST_DEADLINE:-9999999999} < part_end ? ${DIST_DEADLINE:-9999999999} - now : part_end - now ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
loop() {  # loop <name> <cap s> <torchrun_loop.py args...>: its JSON lines into loops/<name>.jsonl
  local name=$1 limit=$2; shift 2
  local started; started=$(date +%s)
  local launch=(python3 -m torch.distributed.run --standalone "--nproc-per-node=$NPROC")
  [[ " $* " == *" --parallel none "* ]] && launch=(python3)
  timeout --kill-after=15 "$limit" "${launch[@]}" benchmarks/torchrun_loop.py "$@" --out "$out/loops/$name.jsonl" \
    --profile-dir "$out/loops/$name" > "$out/loops/$name.log" 2>&1
  echo "loop $name exit=$? in $(( $(date +%s) - started )) s"
  python3 -c "import json,sys
for l in open(sys.argv[1]): r=json.loads(l); print(f\"  {r['model']} {r['parallel']}x{r['world_size']} {r['compile']} {r['scope'] or ''} {r['optimize_ddp'] or ''}: {r['samples_per_s_mean']:.1f} samples/s (mean), {r['samples_per_s_p50']:.1f} (p50)\")" \
    "$out/loops/$name.jsonl" 2>/dev/null
}
table() { python3 benchmarks/gpu/dist44_table.py "$out" > "$out/tables.md" 2> "$out/tables.err" || tail -3 "$out/tables.err"; }

for part in $parts; do
  case $part in probe) c=${CAPS[0]} ;; vit) c=${CAPS[1]} ;; vit_attr) c=${CAPS[2]} ;; llama) c=${CAPS[3]} ;; suite) c=${CAPS[4]} ;;
    traces) c=300 ;;
    *) echo "unknown part $part"; exit 2 ;; esac
  part_end=$(( $(date +%s) + c )); started=$(date +%s)
  echo "== $part (cap $c s) at $(date +%T)"
  case $part in
    probe)
      nvidia-smi topo -m > "$out/topo.txt" 2>&1 && cat "$out/topo.txt"
      if [ "${DIST_SMOKE:-0}" = 1 ]; then pargs=(--device cpu); else pargs=(); fi
      NCCL_DEBUG=INFO timeout --kill-after=10 "$(cap 120)" python3 -m torch.distributed.run --standalone \
        "--nproc-per-node=$NPROC" benchmarks/comm_probe.py "${pargs[@]}" --out "$out/probe.json" > "$out/probe.log" 2>&1
      echo "probe exit=$?"
      grep -E "^(comm probe:|collective |all_reduce|all_gather|reduce_scatter|peak busbw)" "$out/probe.log"
      grep -oE "via [^ ]+" "$out/probe.log" | sort | uniq -c ;;  # NCCL's transports between the ranks
    vit|llama)
      if [ "$part" = vit ]; then P=("${VIT[@]}"); L=("${LOOP[@]}" "${LOOP_VIT[@]}"); par=${DIST_PARALLEL:-none,ddp,fsdp}
      else P=("${LLAMA[@]}"); L=("${LOOP[@]}" "${LOOP_LLAMA[@]}"); par=${DIST_LLAMA_PARALLEL:-none,ddp,fsdp}; fi
      IFS=, read -r -a pars <<< "$par"
      # every cell of the sweep with its plain loop before FSDP2's regional one, so that a cut part keeps pairs
      capped_sweep "$part" "$(cap 420)" "${P[@]}" "parallel=$par" compile.mode=eager,default
      for p in ddp fsdp none; do
        has "$p" "${pars[@]}" && loop "${part}_$p" "$(cap 150)" "${L[@]}" --parallel "$p" --compile eager,default
      done
      if has fsdp "${pars[@]}"; then
        capped_sweep "${part}_fsdp_regional" "$(cap 150)" "${P[@]}" parallel=fsdp compile.mode=default compile.scope=regional
        loop "${part}_fsdp_regional" "$(cap 120)" "${L[@]}" --parallel fsdp --compile default --scope regional
      fi ;;
    vit_attr)
      L=("${LOOP[@]}" "${LOOP_VIT[@]}")
      if has step "${ATTR[@]}"; then
        capped_sweep vit_ddp_step "$(cap 240)" "${VIT[@]}" parallel=ddp compile.mode=default compile.scope=step \
          parallel.optimize_ddp=on,compiled_autograd
        loop vit_ddp_step_on "$(cap 90)" "${L[@]}" --parallel ddp --compile default --scope step --optimize-ddp on
        loop vit_ddp_step_ca "$(cap 120)" "${L[@]}" --parallel ddp --compile default --scope step --optimize-ddp compiled_autograd
      fi
      has unpaired "${ATTR[@]}" && capped_sweep vit_unpaired "$(cap 150)" "${VIT[@]}" parallel=ddp,fsdp compile.mode=default \
        benchmark.paired_eager=false
      # the ranks' intra-op threads as torchrun alone sets them (the pipeline's launcher gives each cores / ranks)
      has omp1 "${ATTR[@]}" && OMP_NUM_THREADS=1 capped_sweep vit_unpaired_omp1 "$(cap 90)" "${VIT[@]}" parallel=ddp \
        compile.mode=default benchmark.paired_eager=false
      if has ddp_off "${ATTR[@]}"; then
        capped_sweep vit_ddp_off "$(cap 120)" "${VIT[@]}" parallel=ddp compile.mode=default parallel.optimize_ddp=off
        loop vit_ddp_off "$(cap 90)" "${L[@]}" --parallel ddp --compile default --optimize-ddp off
      fi ;;
    traces)  # every profiled job's and loop's traces, per step side by side (benchmarks/trace_summary.py)
      find "$out" -name 'trace.rank*.json.gz' -not -path '*/suite/*' | sort \
        | xargs -r timeout "$(cap 300)" python3 benchmarks/trace_summary.py --steps 3 > "$out/traces.jsonl" 2>&1
      echo "traces: $(grep -c . "$out/traces.jsonl") summarized into traces.jsonl" ;;
    suite)
      echo "suite started_at=$(date +%s)" >> "$out/campaign.txt"
      capped_sweep suite "$(cap 100000)" "${SUITE[@]}" hydra/launcher=local_gpus
      echo "suite ended_at=$(date +%s)" >> "$out/campaign.txt" ;;
  esac
  echo "== $part done in $(( $(date +%s) - started )) s"
  table
done
cat "$out/tables.md" 2>/dev/null | cut -c1-400
echo "dist44 done"
