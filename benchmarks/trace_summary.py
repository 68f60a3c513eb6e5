"""What a step costs the host and the device, read from a torch.profiler trace (Chrome JSON, as
`profile=true` and `benchmarks/bare_loop.py --profile-dir` write them): per profiled step, the host's
span, the kernels launched and the CUDA runtime calls by name, the device's busy time, and the Python
ops that took the most host time. Two traces of the same model side by side show where one process
spends host time the other does not.

A trace without step markers (a distributed job's `comm/trace.rank<r>.json.gz`, torchrun_loop.py's
`--profile-dir` traces: 3 steps each) is summarized whole and divided by `--steps`: per step, the host's
span, kernels and their busy time, CUDA runtime calls, compiled regions entered (graphs run), collectives'
time and exposed communication (read as pipeline.diagnose.comm reads it), the top host ops.

    python benchmarks/trace_summary.py [--steps N] <trace dir or .json> [...]   # one JSON line per trace
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


def summarize_whole(trace: dict[str, Any], steps: int) -> dict[str, Any]:
    """A trace without ProfilerStep markers, its totals per step (it traced `steps` steps)."""
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # once, however many traces are read
        sys.path.insert(0, root)
    from pipeline.diagnose.comm import read_trace

    raw = trace.get("traceEvents", [])
    events = [e for e in raw if e.get("ph") == "X"]
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation", "python_function")]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    runtime = collections.Counter(e["name"] for e in events if e.get("cat") == "cuda_runtime")
    cpu_ops: collections.Counter = collections.Counter()
    for e in host:
        cpu_ops[e["name"]] += e["dur"]
    regions = sum(1 for e in host if e["name"].startswith("Torch-Compiled Region"))  # graphs entered
    span = (max(e["ts"] + e["dur"] for e in host) - min(e["ts"] for e in host)) / 1000 if host else 0.0
    comm = read_trace(raw, world=2)  # the world size only scales bus bandwidth, which is not read here
    return {
        "steps": steps,
        "host_span_ms_per_step": span / steps,
        "kernels_per_step": len(kernels) / steps,
        "kernel_busy_ms_per_step": sum(k["dur"] for k in kernels) / 1000 / steps,
        "runtime_calls_per_step": sum(runtime.values()) / steps,
        "compiled_regions_per_step": regions / steps,
        "collective_ms_per_step": comm.collective_us / 1000 / steps,
        "exposed_comm_ms_per_step": comm.exposed_us / 1000 / steps,
        "top_cpu_ops_ms_per_step": {k: round(v / 1000 / steps, 3) for k, v in cpu_ops.most_common(8)},
    }


def main(argv: list[str]) -> int:
    steps = 3
    if argv[:1] == ["--steps"]:
        steps, argv = int(argv[1]), argv[2:]
    for arg in argv:
        path = Path(arg)
        try:
            trace = load(path)
            summary = summarize(trace)
            if not summary["steps"]:
                summary = summarize_whole(trace, steps)
            print(json.dumps({"trace": str(path), **summary}), flush=True)
        except (OSError, ValueError, IndexError) as exc:
            print(json.dumps({"trace": str(path), "error": f"{type(exc).__name__}: {exc}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
