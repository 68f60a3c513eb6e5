#!/usr/bin/env bash
# Issue 42 (redesign step 3, behaviour unchanged) on one GPU: the same jobs run by the code before the
# step (an export of c78b9c6, given as <old tree>) and by this tree, old and new alternating job by job,
# then every figure side by side (smoke42_table.py); the single-rank comm probe in both; and this tree
# against the bare loop (bench.py overhead, one repeat).
# Usage on the GPU host: bash benchmarks/gpu/smoke42.sh <out dir> <old tree>
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); old=$(realpath "${2:?old tree}"); new=$PWD; mkdir -p "$out/new" "$out/old"
source benchmarks/gpu/setup.sh || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
jobs=(
  "train_amp model=vit_b16 precision=amp compile.mode=default"
  "train_ro model=vit_b16 precision=amp compile.mode=reduce-overhead"
  "train_step_bf16 model=vit_b16 precision=bf16 compile.scope=step"
  "infer model=resnet50 scenario=inference precision=bf16 compile.mode=default"
  "generate model=llama_tiny scenario=generate precision=bf16 compile.mode=reduce-overhead"
)
[ -n "${SMOKE_JOBS:-}" ] && mapfile -t jobs <<< "$SMOKE_JOBS"  # a CPU try of this script: tiny jobs
for job in "${jobs[@]}"; do
  name=${job%% *}; args=${job#* }
  for tree in new old; do
    src=$new; [ "$tree" = old ] && src=$old
    started=$(date +%s)
    # shellcheck disable=SC2086 # args is a list of overrides
    (cd "$src" && PYTHONPATH=/tmp/site:$src timeout 300 python3 -m pipeline.run $args benchmark.budget_s=10 diagnose.cold_cache=true \
      "hydra.run.dir=$out/$tree/$name" "mlflow.tracking_uri=sqlite:///$out/$tree/mlflow.db") \
      > "$out/$tree-$name.log" 2>&1
    echo "$tree $name exit=$? in $(( $(date +%s) - started )) s: $(grep -v '^ *$' "$out/$tree-$name.log" | tail -n 1 | cut -c1-220)"
  done
done
for tree in new old; do
  src=$new; [ "$tree" = old ] && src=$old
  (cd "$src" && PYTHONPATH=/tmp/site:$src timeout 120 torchrun --standalone --nproc-per-node=1 \
    benchmarks/comm_probe.py --out "$out/$tree/probe.json") > "$out/$tree-probe.log" 2>&1
  echo "$tree comm probe exit=$?: $(tail -n 3 "$out/$tree-probe.log" | cut -c1-200 | tr '\n' ' ')"
done
python3 benchmarks/gpu/smoke42_table.py "$out" | tee "$out/table.txt"
timeout 300 python3 benchmarks/bench.py --sections overhead --reps amp:1 --out "$out/bench" > "$out/bench-overhead.log" 2>&1
echo "bench overhead exit=$?"; grep -iE "overhead|bare|instrument|ratio|within" "$out/bench-overhead.log" | tail -n 15 | cut -c1-250
