"""Issue 45's tables from a benchmarks/gpu/decide45.sh folder.

    python benchmarks/gpu/decide45_table.py <out dir>

1. Each model measured twice (twice-<model>/; long-<model>/: once, with a longer budget): both runs'
   paired speedups with their intervals, the interval's half-width (the worse side, %), whether the two
   runs' intervals overlap, how long each measured and why it stopped; the criteria of the issue (every
   half-width under 5%, the runs overlapping, none undetermined) checked per model.
2. The independent loop (bare/): its eager and compiled step times and their ratio, beside the pipeline's.
3. PyTorch's dynamo harness (harness.csv): its speedup beside the pipeline's.
4. The suite (suite/): its outcomes, as its summary says them, and the time it took.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

from pipeline.measure.stats import undetermined


def results(sweep: Path) -> list[dict]:
    """The sweep's finished jobs' result files, in job order."""
    found = []
    for path in sorted(sweep.glob("*/result.json"), key=lambda p: int(p.parent.name)):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("status") == "FINISHED":
            found.append(data)
    return found


def half_pct(m: dict) -> float:
    s, low, high = m["speedup/vs_eager"], m["speedup/ci95_low"], m["speedup/ci95_high"]
    return 100 * (math.exp(max(math.log(high / s), math.log(s / low))) - 1) if low > 0 else math.inf


def twice(out: Path) -> dict[str, dict]:
    print(
        "| model | run | speedup [interval] | half-width % | measured s | looks | stopped | step p50 ms | eager p50 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    pipeline: dict[str, dict] = {}
    verdicts = []
    for sweep in sorted(out.glob("twice-*")) + sorted(out.glob("long-*")):
        if not sweep.is_dir():
            continue
        model = sweep.name.removeprefix("twice-").replace("long-", "longer budget: ")
        runs = results(sweep)
        for i, r in enumerate(runs):
            m = r["metrics"]
            print(
                f"| {model} | {i + 1} | {m['speedup/vs_eager']:.3f}x [{m['speedup/ci95_low']:.3f}, {m['speedup/ci95_high']:.3f}] | "
                f"{half_pct(m):.2f} | {m.get('measure/seconds', float('nan')):.1f} | {m.get('measure/looks', 0):.0f} | "
                f"{r['info'].get('measure_brief') or r['info'].get('measure_stop', '')} | {m['step/p50_ms']:.2f} | "
                f"{m.get('eager/p50_ms', float('nan')):.2f} |"
            )
        if runs and sweep.name.startswith("twice-"):
            pipeline[model] = runs[0]["metrics"]
        ms = [r["metrics"] for r in runs]
        narrow = all(half_pct(m) < 5 for m in ms)
        overlap = len(ms) == 2 and max(m["speedup/ci95_low"] for m in ms) <= min(
            m["speedup/ci95_high"] for m in ms
        )
        determined = not any(undetermined(m["speedup/ci95_low"], m["speedup/ci95_high"]) for m in ms)
        verdicts.append((model, len(ms), narrow, overlap, determined))
    print()
    print("| model | runs | every interval under +-5% | the two runs overlap | none undetermined |")
    print("|---|---|---|---|---|")
    for model, n, narrow, overlap, determined in verdicts:
        print(
            f"| {model} | {n} | {'yes' if narrow else 'NO'} | {'yes' if overlap else 'NO'} | {'yes' if determined else 'NO'} |"
        )
    return pipeline


def bare(out: Path, pipeline: dict[str, dict]) -> None:
    rows = []
    for eager_file in sorted((out / "bare").glob("*-eager.json")):
        model = eager_file.name.removesuffix("-eager.json")
        compiled_file = eager_file.with_name(f"{model}-default.json")
        try:
            e = json.loads(eager_file.read_text().strip().splitlines()[-1])
            c = json.loads(compiled_file.read_text().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            rows.append(f"| {model} | no result | | | | | |")
            continue
        p = pipeline.get(model, {})
        ratio = e["step_time_ms_mean"] / c["step_time_ms_mean"]
        pipe = p.get("speedup/vs_eager")
        rows.append(
            f"| {model} | {e['step_time_ms_p50']:.2f} | {c['step_time_ms_p50']:.2f} | {ratio:.3f}x | "
            f"{p.get('eager/p50_ms', float('nan')):.2f} | {p.get('step/p50_ms', float('nan')):.2f} | "
            + (
                f"{pipe:.3f}x [{p['speedup/ci95_low']:.3f}, {p['speedup/ci95_high']:.3f}] |"
                if pipe
                else "- |"
            )
        )
    if rows:
        print()
        print(
            "| model | bare eager p50 ms | bare compiled p50 ms | bare speedup (means) | pipeline eager p50 ms | pipeline compiled p50 ms | pipeline paired speedup |"
        )
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows))


def harness(out: Path, pipeline: dict[str, dict]) -> None:
    path = out / "harness.csv"
    if not path.exists():
        return
    print()
    print(
        "| model (bs) | harness speedup, --disable-cudagraphs | harness compiled ms | pipeline paired speedup |"
    )
    print("|---|---|---|---|")
    for row in csv.DictReader(path.open()):
        if row.get("dev") == "dev":
            continue
        p = next((m for k, m in pipeline.items() if row["name"] in k or k in row["name"]), {})
        pipe = (
            f"{p['speedup/vs_eager']:.3f}x [{p['speedup/ci95_low']:.3f}, {p['speedup/ci95_high']:.3f}]"
            if p
            else "-"
        )
        print(
            f"| {row['name']} ({row['batch_size']}) | {float(row['speedup']):.3f}x | {float(row['abs_latency']):.2f} | {pipe} |"
        )


def suite(out: Path) -> None:
    summary = out / "suite" / "summary.md"
    if summary.exists():
        print()
        print(f"suite: {summary}")
        for line in summary.read_text().splitlines():
            if line.startswith(("- ", "verdict", "**")) or "inconclusive" in line[:80]:
                print(line[:300])


def main() -> None:
    out = Path(sys.argv[1])
    pipeline = twice(out)
    bare(out, pipeline)
    harness(out, pipeline)
    suite(out)


if __name__ == "__main__":
    main()
