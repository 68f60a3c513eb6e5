"""What a step costs the host and the device, read from a torch.profiler trace (Chrome JSON, as
`profile=true` and `benchmarks/bare_loop.py --profile-dir` write them): per profiled step, the host's
span, the kernels launched and the CUDA runtime calls by name, the device's busy time, and the Python
ops that took the most host time. Two traces of the same model side by side show where one process
spends host time the other does not.

    python benchmarks/trace_summary.py <trace dir or .json> [...]   # one JSON line per trace
"""

from __future__ import annotations

import collections
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, Any]:
    if path.is_dir():
        path = sorted(path.rglob("*.json*"), key=lambda p: p.stat().st_mtime)[-1]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def summarize(trace: dict[str, Any]) -> dict[str, Any]:
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    steps = sorted(
        (e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"]
    )
    per_step = []
    for step in steps:
        lo, hi = step["ts"], step["ts"] + step["dur"]
        inside = [e for e in events if lo <= e["ts"] < hi and e is not step]
        runtime = collections.Counter(e["name"] for e in inside if e.get("cat") == "cuda_runtime")
        kernels = [e for e in inside if e.get("cat") == "kernel"]
        cpu_ops = collections.Counter()
        for e in inside:
            if e.get("cat") in ("cpu_op", "python_function", "user_annotation"):
                cpu_ops[e["name"]] += e["dur"]
        per_step.append(
            {
                "host_span_ms": step["dur"] / 1000,
                "kernels": len(kernels),
                "kernel_busy_ms": sum(k["dur"] for k in kernels) / 1000,
                "runtime_calls": sum(runtime.values()),
                "runtime_by_name": dict(runtime.most_common(8)),
                "top_cpu_ops_ms": {k: v / 1000 for k, v in cpu_ops.most_common(6)},
            }
        )
    if not per_step:
        return {"steps": 0}
    return {
        "steps": len(per_step),
        "host_span_ms_median": statistics.median(s["host_span_ms"] for s in per_step),
        "kernels_per_step": statistics.median(s["kernels"] for s in per_step),
        "kernel_busy_ms_median": statistics.median(s["kernel_busy_ms"] for s in per_step),
        "runtime_calls_per_step": statistics.median(s["runtime_calls"] for s in per_step),
        "runtime_by_name_last_step": per_step[-1]["runtime_by_name"],
        "top_cpu_ops_ms_last_step": per_step[-1]["top_cpu_ops_ms"],
    }


def main(argv: list[str]) -> int:
    for arg in argv:
        path = Path(arg)
        try:
            print(json.dumps({"trace": str(path), **summarize(load(path))}), flush=True)
        except (OSError, ValueError, IndexError) as exc:
            print(json.dumps({"trace": str(path), "error": f"{type(exc).__name__}: {exc}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
