#!/usr/bin/env bash
# Issue 26's next call, decided on the host itself: are this GPU host's CPUs steady enough for the
# host-bound rows of the must-show (launch-bound steps within 2% of the bare loop)? On the H100 VMs of
# stop 36 a vCPU ran the same Python work at full or half speed, switching every 50-100 ms
# (benchmarks/RESULTS.md, "Issue 26, the cause"); no figure of a launch-bound compiled step can hold 2%
# there. So: one minute of benchmarks/host_probe.py's torch-free part first, and truth26.sh's parts only
# where the CPUs ran the work at one speed (its half-second medians, and each CPU pinned in turn, within
# GATE_SPREAD_PCT, 10% unless set; the back-to-back p10-p90 is shown, not gated: one hiccup moves it);
# otherwise it stops, saying which reading moved (exit 3).
# Usage on the GPU host: bash benchmarks/gpu/gate26.sh <out dir> [truth26 parts...]
# TRUTH_SMOKE=1 GATE_SPREAD_PCT=1000 on a CPU: a check of this script (no figures).
set -uo pipefail
out=$(realpath -m "${1:?out dir}"); shift; mkdir -p "$out"
device=cuda; [ "${TRUTH_SMOKE:-0}" = 1 ] && device=cpu
python3 benchmarks/host_probe.py --out "$out/probe" --device $device --models --python-seconds "${GATE_PYTHON_S:-8}" \
  > "$out/probe.log" 2>&1 || { tail -n 20 "$out/probe.log"; exit 1; }
python3 - "$out/probe/host_probe.json" "${GATE_SPREAD_PCT:-10}" <<'EOF' || exit 3
import json, sys
report, limit = json.load(open(sys.argv[1])), float(sys.argv[2])
moved = []
for phase in ("python_before", "python_after"):
    p = report[phase]
    readings = {
        "back to back (p10-p90)": p["unpinned"]["spread_pct"],
        "half-second medians": p["half_second_spread_pct"],
        "per-CPU medians": p["per_cpu_spread_pct"],
    }
    print(f"{phase}: " + ", ".join(f"{k} {v:.1f}%" for k, v in readings.items()) + f" (limit {limit:g}%)")
    moved += [f"{phase} {k} {v:.1f}%" for k, v in readings.items() if v > limit and not k.startswith("back")]
print(f"host: {report['host'].get('model')}, {report['host'].get('cpus')} CPUs")
if moved:
    print("host unsteady, truth26 not run: " + "; ".join(moved))
    sys.exit(1)
print("host steady: running truth26")
EOF
bash benchmarks/gpu/truth26.sh "$out/t26" "$@"
