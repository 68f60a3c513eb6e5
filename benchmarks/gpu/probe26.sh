#!/usr/bin/env bash
# Issue 26, second call: in ONE process, the bare loop's compiled step, the pipeline's compiled step and
# the pipeline's paired eager copy, interleaved in rounds (benchmarks/truth_probe.py), for the models
# whose pipeline and bare figures parted in truth26's table; each unpinned and pinned to 4 cores
# (taskset), and the bare loop alone the same two ways. Same host state for every variant of a run.
# Usage on the GPU host: bash benchmarks/gpu/probe26.sh <out dir>
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); mkdir -p "$out"
source benchmarks/gpu/setup.sh > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 1; }
export TORCHINDUCTOR_CACHE_DIR=$out/inductor_cache
probe() {  # <name> <pin or ""> <model cfg> <timm name> <batch>
  local name=$1 pin=$2; shift 2
  ${pin:+taskset -c $pin} python3 benchmarks/truth_probe.py --model "$1" --timm-name "$2" --batch-size "$3" \
    --rounds 6 --steps 20 > "$out/$name.log" 2>&1
  echo "$name exit=$?"
  grep '^{' "$out/$name.log" | python3 -c "import json,sys; r=json.load(sys.stdin)['report']; print(json.dumps({k: (v if not isinstance(v, dict) else {x: (round(y, 2) if isinstance(y, float) else y) for x, y in v.items() if x != 'event_mean_ms'}) for k, v in r.items()}))"
}
bare() {  # <name> <pin or ""> <timm name> <batch>
  local name=$1 pin=$2; shift 2
  ${pin:+taskset -c $pin} python3 benchmarks/bare_loop.py --model "$1" --batch-size "$2" --compile default > "$out/$name.log" 2>&1
  echo "$name exit=$? $(grep '^{' "$out/$name.log" | python3 -c "import json,sys; r=json.load(sys.stdin); print({k: round(r[k], 2) for k in ('step_time_ms_p10', 'step_time_ms_p50', 'step_time_ms_p90', 'step_time_ms_mean', 'host_ms_p50')})")"
}
nproc
probe mnv3 "" timm/mobilenetv3_large_100 mobilenetv3_large_100 256
probe mnv3-pinned 0-3 timm/mobilenetv3_large_100 mobilenetv3_large_100 256
bare bare-mnv3 "" mobilenetv3_large_100 256
bare bare-mnv3-pinned 0-3 mobilenetv3_large_100 256
probe rn50 "" timm/resnet50 resnet50 64
probe rn50-pinned 0-3 timm/resnet50 resnet50 64
bare bare-rn50 "" resnet50 64
bare bare-rn50-pinned 0-3 resnet50 64
