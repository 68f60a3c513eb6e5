"""Issue 30's A/B: the same suite one job at a time (off) and with benchmark.overlap (on), per model.

    python benchmarks/gpu/suite30_table.py <sweep dir, overlap off> <sweep dir, overlap on> [<label> <label>]

The labels name the two sweeps in the table (default `off` and `on`; `off off2` for the off arm repeated).

Prints a markdown table (model, step p50 off/on and their ratio, paired speedup off/on, compile time
off/on, noisy flags, how far the host's own CPU speed moved in each job) and each sweep's wall time
(first worker start to last worker end). The 1% criterion is counted twice: over every model, and over
the models neither of whose jobs was noisy: a launch-bound model's step follows the host's speed, which
on the lent VMs switches between two speeds 2x apart (benchmarks/RESULTS.md, issue 26), so its A/B
says nothing about overlap there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def jobs(sweep_dir: Path) -> dict[str, dict]:
    """Each finished-or-not job of a sweep folder by model id: its metrics and info."""
    found = {}
    for path in sorted(sweep_dir.glob("*/result.json")):
        config = json.loads((path.parent / "job_config.json").read_text())
        found[config["model"]["id"]] = json.loads(path.read_text())
    return found


def wall_s(results: dict[str, dict]) -> float:
    starts = [
        r["info"]["worker_started_at"] for r in results.values() if "worker_started_at" in r.get("info", {})
    ]
    ends = [r["info"]["worker_ended_at"] for r in results.values() if "worker_ended_at" in r.get("info", {})]
    return max(ends) - min(starts) if starts and ends else float("nan")


def cell(metrics: dict, key: str, fmt: str = "{:.2f}") -> str:
    return fmt.format(metrics[key]) if key in metrics else "–"


def main() -> None:
    off, on = (jobs(Path(d)) for d in sys.argv[1:3])
    x, y = sys.argv[3:5] if len(sys.argv) >= 5 else ("off", "on")
    print(
        f"| model | {x} p50 ms | {y} p50 ms | {y} / {x} | {x} speedup | {y} speedup | {x} compile s | {y} compile s "
        f"| noisy {x}/{y} | host moved {x}/{y} % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios, steady = [], []
    for model in sorted(set(off) | set(on)):
        a, b = (off.get(model, {}).get("metrics", {}), on.get(model, {}).get("metrics", {}))
        ratio = b["step/p50_ms"] / a["step/p50_ms"] if "step/p50_ms" in a and "step/p50_ms" in b else None
        if ratio is not None:
            ratios.append(ratio)
            if not a.get("step/noisy") and not b.get("step/noisy"):
                steady.append(ratio)
        noisy = "/".join("yes" if m.get("step/noisy") else "no" for m in (a, b))
        host = "/".join(cell(m, "host/reference_spread_pct", "{:.0f}") for m in (a, b))
        print(
            f"| {model} | {cell(a, 'step/p50_ms')} | {cell(b, 'step/p50_ms')} | "
            f"{'–' if ratio is None else f'{ratio:.3f}'} | {cell(a, 'speedup/vs_eager')} | {cell(b, 'speedup/vs_eager')} | "
            f"{cell(a, 'compile/total_s', '{:.1f}')} | {cell(b, 'compile/total_s', '{:.1f}')} | {noisy} | {host} |"
        )
    within = sum(abs(r - 1) <= 0.01 for r in ratios)
    within_steady = sum(abs(r - 1) <= 0.01 for r in steady)
    print(
        f"\nwall time: {x} {wall_s(off):.0f} s for {len(off)} jobs ({wall_s(off) / max(len(off), 1):.0f} s a job), "
        f"{y} {wall_s(on):.0f} s for {len(on)} jobs ({wall_s(on) / max(len(on), 1):.0f} s a job); "
        f"{within} of {len(ratios)} models within 1% ({y} / {x} step p50); "
        f"{within_steady} of the {len(steady)} whose jobs were both steady (not noisy)"
    )


if __name__ == "__main__":
    main()
