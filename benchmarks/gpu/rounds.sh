#!/usr/bin/env bash
# One GPU: does a launch-bound unit's figure depend on how many units a timed round holds? The same job
# (ResNet-50 inference, batch sizes 32, 64, 128 cycled, amp, default mode, dynamic=false) three times:
# benchmark.round_s 0.02 (the default: one cycle a round), 0.2, 0.02 again; each job's back-to-back and
# synchronized medians, compiled and its paired eager copy. Usage on the GPU host: bash benchmarks/gpu/rounds.sh
set -uo pipefail
source benchmarks/gpu/setup.sh > /tmp/host.txt 2>&1 || { cat /tmp/host.txt; exit 1; }
export TORCHINDUCTOR_CACHE_DIR=/tmp/ic
for rs in 0.02 0.2 0.02; do
  d=/tmp/rp-$rs-$RANDOM
  python3 -m pipeline.run model=timm/resnet50 scenario=inference "scenario.batch_sizes=[32,64,128]" precision=amp \
    compile.mode=default compile.dynamic=false benchmark.budget_s=20 benchmark.round_s=$rs \
    "mlflow.tracking_uri=sqlite:////tmp/rp.db" "hydra.run.dir=$d" > $d.log 2>&1
  python3 - "$d" "$rs" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/result.json")); m = r["metrics"]
print(f"round_s={sys.argv[2]} round_units={r['info'].get('round_units')} step_p50={m['step/p50_ms']:.2f} latency_p50={m['latency/p50_ms']:.2f} eager_step={m['eager/p50_ms']:.2f} eager_lat={m['eager/latency_p50_ms']:.2f} host_spread={m.get('host/reference_spread_pct', 0):.0f} spread={m['step/spread_pct']:.0f}")
PY
done
