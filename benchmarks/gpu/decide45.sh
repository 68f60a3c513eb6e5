#!/usr/bin/env bash
# Issue 45 on one GPU, one queue (amp, default mode, measuring until decided at the defaults):
#   twice    TWICE_MODELS (model:batch), each measured twice (benchmark.repeat=0,1: two jobs, one at a time, 50 steps):
#            every paired speedup's interval, whether the two runs overlap, how long each measured and why it stopped
#   long     LONG_MODELS (model:batch), one job each with benchmark.budget_s=LONG_BUDGET (default 90): how far a longer
#            budget narrows an interval that the default budget left wide
#   bare     the independent loop (benchmarks/bare_loop.py) for BARE_MODELS, eager and compiled: its speedup
#            (eager mean / compiled mean over synchronized wall clocks) beside the pipeline's paired one
#   harness  PyTorch's dynamo harness (pytorch/benchmark userbenchmark/dynamo/dynamobench at 33c7503f, carried in
#            .harness/, never committed) for HARNESS_MODELS with --disable-cudagraphs (the default mode's counterpart)
#   pin      PIN_MODEL (model:batch) compiled, on one VM: one bare-loop process (its own 90 steps on all vCPUs), then
#            PIN_ROUNDS pairs of 10-step rounds on all vCPUs and pinned to the first third (as benchmark.overlap_jobs=3
#            pins a slot), alternated: whether the CPUs a compiled step is launched from change it
#   pin-plain  one pipeline job of PIN_MODEL with benchmark.overlap=false: its figure beside the bare loop's on that VM
#   suite    SUITE_MODELS (default: the 42 of sweep=timm_suite) with benchmark.overlap=true hydra/launcher=local_gpus,
#            every compile cold; SUITE_DEADLINE (epoch s) cuts its cap to end by then; SUITE_EXTRA: more overrides
#            (e.g. benchmark.overlap_jobs=3)
# benchmarks/gpu/decide45_table.py turns the folder into the tables. DECIDE_SMOKE=1: the same on a CPU with tiny
# models (a check of this script). Usage on the GPU host: bash benchmarks/gpu/decide45.sh <out dir> [parts...]
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); shift; mkdir -p "$out"
parts=${*:-"twice bare harness suite"}
source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
head -4 "$out/host.txt"
M="mlflow.tracking_uri=sqlite:///$out/mlflow.db"
source benchmarks/gpu/capped_sweep.sh  # capped_sweep <name> <cap s> <overrides...>
cap() {  # cap <s>: the part's cap, or less where SUITE_DEADLINE comes first
  local left=$(( ${SUITE_DEADLINE:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
if [ "${DECIDE_SMOKE:-0}" = 1 ]; then
  TWICE_MODELS=${TWICE_MODELS:-vit_tiny:2,resnet_tiny:2}
  BASE=(device=cpu compile.backend=aot_eager trainer.steps=4 trainer.warmup_steps=1 benchmark.budget_s=3)
  SUITE=(sweep=tiny_suite device=cpu compile.fullgraph=false trainer.steps=6 trainer.warmup_steps=2 benchmark.budget_s=3
         "gpu_pool=[0]")
  SUITE_MODELS=${SUITE_MODELS:-vit_tiny,resnet_tiny}; BARE_ARGS=(--device cpu --steps 6 --warmup 2 --round-steps 2); HARNESS_MODELS=
  BARE_MODELS=$TWICE_MODELS; PIN_MODEL=${PIN_MODEL:-vit_tiny:2}; LONG_MODELS=${LONG_MODELS:-vit_tiny:2}; LONG_BUDGET=${LONG_BUDGET:-6}
  PIN_ROUNDS=${PIN_ROUNDS:-3}
else
  TWICE_MODELS=${TWICE_MODELS:-timm/resnet50:64,timm/resnet18:256,timm/mobilenetv3_large_100:256,timm/efficientnet_b0:128,timm/convnext_tiny:128,vit_b16:64}
  BASE=(precision=amp compile.mode=default trainer.steps=50 trainer.warmup_steps=10)
  SUITE=(sweep=timm_suite precision=amp diagnose.cold_cache=true)
  SUITE_MODELS=${SUITE_MODELS:-$(python3 -c "import yaml; print(yaml.safe_load(open('conf/sweep/timm_suite.yaml'))['hydra']['sweeper']['params']['model'])")}
  BARE_MODELS=${BARE_MODELS:-timm/resnet50:64,timm/mobilenetv3_large_100:256,vit_b16:64}
  LONG_MODELS=${LONG_MODELS:-timm/mobilenetv3_large_100:256}; PIN_MODEL=${PIN_MODEL:-timm/resnet101:128}
  BARE_ARGS=(); HARNESS_MODELS=${HARNESS_MODELS:-resnet50:64,convnext_tiny:128}
fi

timm_name() {  # the timm name of a pipeline model (bare_loop.py and the harness take timm's names)
  local name; name=$(basename "$1"); [ "$name" = vit_b16 ] && name=vit_base_patch16_224
  [ "$name" = vit_tiny ] && name=vit_tiny_patch16_224; [ "$name" = resnet_tiny ] && name=resnet18; echo "$name"
}
bare_run() {  # bare_run <out stem> <pipeline model> <batch> <mode> [more bare_loop.py args...]: one bare-loop process
  local stem=$1 model=$2 batch=$3 mode=$4; shift 4
  timeout "$(cap 300)" python3 benchmarks/bare_loop.py --model "$(timm_name "$model")" --batch-size "$batch" \
    --precision amp --compile "$mode" "${BARE_ARGS[@]}" "$@" > "$stem.json" 2> "$stem.log"
  echo "bare $(basename "$stem") exit=$?: $(cut -c1-200 "$stem.json")"
}
for part in $parts; do
  case $part in
    twice)
      for mb in ${TWICE_MODELS//,/ }; do
        model=${mb%%:*}; batch=${mb##*:}; tag=$(basename "$model")
        capped_sweep "twice-$tag" "$(cap 900)" "${BASE[@]}" "model=$model" "trainer.batch_size=$batch" benchmark.repeat=0,1
      done ;;
    long)
      for mb in ${LONG_MODELS//,/ }; do
        model=${mb%%:*}; batch=${mb##*:}; tag=$(basename "$model")
        capped_sweep "long-$tag" "$(cap 600)" "${BASE[@]}" "model=$model" "trainer.batch_size=$batch" \
          "benchmark.budget_s=${LONG_BUDGET:-90}"
      done ;;
    pin)
      mkdir -p "$out/pin"; model=${PIN_MODEL%%:*}; batch=${PIN_MODEL##*:}
      third=$(( $(nproc) / 3 )); pinned="0-$(( third > 1 ? third - 1 : 0 ))"
      bare_run "$out/pin/bare-alternate" "$model" "$batch" default --alternate-cpus "$pinned" --rounds "${PIN_ROUNDS:-40}" ;;
    pin-plain)
      capped_sweep pin-plain "$(cap 400)" "${BASE[@]}" "model=${PIN_MODEL%%:*}" "trainer.batch_size=${PIN_MODEL##*:}" \
        benchmark.overlap=false ;;
    bare)
      mkdir -p "$out/bare"
      for mb in ${BARE_MODELS//,/ }; do
        model=${mb%%:*}; batch=${mb##*:}
        for mode in eager default; do bare_run "$out/bare/$(basename "$model")-$mode" "$model" "$batch" "$mode"; done
      done ;;
    harness)
      [ -d .harness/userbenchmark/dynamo/dynamobench ] || { echo "harness: .harness/ not carried"; continue; }
      # a copy made to run offline: random weights (the host has no network for timm's pretrained ones) and
      # the skip list that the benchmark repo's sync lacks (the harness reads only its `skip` keys)
      rm -rf /tmp/dynamobench && cp -r .harness/userbenchmark/dynamo/dynamobench /tmp/dynamobench
      sed -i 's/^\( *\)pretrained=True,$/\1pretrained=False,/' /tmp/dynamobench/timm_models.py
      [ -f /tmp/dynamobench/timm_models.yaml ] || printf 'skip:\n  all: [~]\n  device:\n    cpu: [~]\n    cpu_aarch64: [~]\n' \
        > /tmp/dynamobench/timm_models.yaml
      for mb in ${HARNESS_MODELS//,/ }; do
        model=${mb%%:*}; batch=${mb##*:}
        (cd /tmp/dynamobench && HF_HUB_OFFLINE=1 timeout "$(cap 400)" python3 timm_models.py --performance --training \
          --amp --amp-dtype bfloat16 --backend inductor --disable-cudagraphs --only "$model" --batch-size "$batch" \
          --output "$out/harness.csv" > "$out/harness-$model.log" 2>&1)
        echo "harness $model exit=$?: $(tail -n 1 "$out/harness.csv" 2>/dev/null | cut -c1-200)"
      done ;;
    suite)
      capped_sweep suite "$(cap 3000)" "${SUITE[@]}" "model=$SUITE_MODELS" benchmark.overlap=true hydra/launcher=local_gpus \
        ${SUITE_EXTRA:-} ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
python3 benchmarks/gpu/decide45_table.py "$out" | tee "$out/tables.md"
echo "decide45 done"
