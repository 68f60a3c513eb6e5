"""Issue 30's per-model table of one suite sweep, and its pace with overlap against one job at a time.

    python -m pipeline.report --results <sweep dir> --out <dir>     # summary.csv with each model's outcome
    python benchmarks/gpu/suite30_models.py <sweep dir> <dir>/summary.csv

Prints a markdown table (model, outcome, paired speedup [95%], compiled and eager step p50, the steps'
p10-p90 spread, compile time, peak memory compiled / eager), then the sweep's pace: jobs ended and the
time from its first worker's start to its last result. With overlap (benchmark.overlap) it also adds up
what the same jobs' workers would take one after another: each worker's life (from its start on a GPU
slot to its exit; not the job's wait for the slot), less the time it was paused while the GPU's other
job measured. An estimate, not a measured run without overlap (which also pays each job's start and
MLflow logging, a few seconds a job).

    python benchmarks/gpu/suite30_models.py --combine <summary.csv> [<summary.csv> ...]

The suite's answer (counts, pass rate, geometric mean with its bootstrap over models, compile time,
memory) over the models of several suite sweeps' summaries, each model from the first file that has it
(the same rules as a sweep's own answer: pipeline.sweep.suite and summary.bootstrap_geomean).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from pipeline.measure.stats import undetermined
from pipeline.sweep import suite
from pipeline.sweep.summary import bootstrap_geomean


def paused_s(results: list[dict]) -> dict[int, float]:
    """Seconds each worker (by pid) spent paused by the other job's holds of the measure lock."""
    paused: dict[int, float] = {}
    for result in results:
        for span in result.get("info", {}).get("measure_gate", {}).get("spans", []):
            for pid in span.get("paused", [])[:1]:  # the other job's worker (then its descendants)
                paused[pid] = paused.get(pid, 0.0) + span["held_to"] - span["held_from"]
    return paused


def combine(summaries: list[Path]) -> list[str]:
    """The suite's answer over the models of several summary.csv files, each model from the first."""
    rows: dict[str, dict] = {}
    for path in summaries:
        for row in csv.DictReader(path.open()):
            rows.setdefault(row["model"], row)

    def number(row: dict, key: str) -> float | None:
        return float(row[key]) if row.get(key) not in (None, "") else None

    outcomes = [
        suite.ModelOutcome(
            model=model,
            run_name=row["run_name"],
            outcome=row["outcome"],
            speedup=number(row, "speedup/vs_eager"),
            low=number(row, "speedup/ci95_low"),
            high=number(row, "speedup/ci95_high"),
            failure=row.get("error", ""),
            compile_s=number(row, "compile/total_s"),
            memory_ratio=number(row, "memory/ratio_vs_eager"),
        )
        for model, row in rows.items()
    ]
    return suite.answer(outcomes, bootstrap=bootstrap_geomean).lines()


def main() -> None:
    if sys.argv[1] == "--combine":
        print("\n".join(combine([Path(a) for a in sys.argv[2:]])))
        return
    sweep_dir, summary_csv = Path(sys.argv[1]), Path(sys.argv[2])
    rows = {r["model"]: r for r in csv.DictReader(summary_csv.open())}
    results = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/result.json"))]
    # a job cut at the sweep's end has no pace
    results = [r for r in results if r.get("status") == "FINISHED"]
    print(
        "| model | outcome | speedup vs paired eager [95%] | compiled p50 ms | eager p50 ms "
        "| p10-p90 spread % | compile s | memory compiled/eager |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for model, r in sorted(rows.items(), key=lambda kv: (suite.OUTCOMES.index(kv[1]["outcome"]), kv[0])):
        if not r.get("speedup/ci95_low"):  # a failed or cut job: no figures
            print(f"| {model} | {r['outcome']} | – | – | – | – | – | – |")
            continue
        low, high = float(r["speedup/ci95_low"]), float(r["speedup/ci95_high"])
        wide = " undetermined" if undetermined(low, high) else ""
        noisy = " (noisy)" if r["step/noisy"] in ("1.0", "True", "1") else ""
        print(
            f"| {model} | {r['outcome']} | {float(r['speedup/vs_eager']):.2f}x [{low:.2f}, {high:.2f}]{wide} "
            f"| {float(r['step/p50_ms']):.2f} | {float(r['eager/p50_ms']):.2f} "
            f"| {float(r['step/spread_pct']):.1f}{noisy} | {float(r['compile/total_s']):.1f} "
            f"| {float(r.get('memory/ratio_vs_eager') or 'nan'):.2f} |"  # none on a CPU
        )
    infos = [r["info"] for r in results if "worker_started_at" in r.get("info", {})]
    started = min(i["worker_started_at"] for i in infos)
    ended = max(i.get("worker_ended_at", 0.0) for i in infos)  # a resumed sweep's pace spans its pause
    pace = ended - started
    print(f"\npace: {len(results)} jobs ended in {pace:.0f} s ({pace / len(results):.0f} s a job)", end="")
    pauses = paused_s(results)
    if pauses:
        own = sum(
            r["metrics"]["job/worker_wall_s"] - pauses.get(r["info"]["worker_pid"], 0.0)
            for r in results
            if "job/worker_wall_s" in r["metrics"]
        )
        print(
            f"; their own time, less the pauses, adds up to {own:.0f} s ({own / len(results):.0f} s a job): "
            f"one at a time they would take about {own / pace:.2f}x as long"
        )
    else:
        print()


if __name__ == "__main__":
    main()
