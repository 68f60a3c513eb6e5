"""The summary as text: a table per configuration and the aggregates, for the terminal, `summary.md`
and `summary.csv`. Torch-free."""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path

from pipeline.identity import TABLE_KEYS
from pipeline.sweep.summary import Summary

COLUMNS = [
    *TABLE_KEYS,
    "step p50 ms",
    "p10-p90 ms",
    "speedup",
    "compile s",
    "peak GiB",
    "graph breaks",
    "parity",
    "status",
]


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def table_rows(summary: Summary) -> list[list[str]]:
    out = []
    for r in summary.rows:
        m = r.metrics
        spread = f"{_fmt(m.get('step/p10_ms'))}–{_fmt(m.get('step/p90_ms'))}" if "step/p10_ms" in m else "–"
        parity = "–" if r.parity is None else ("ok" if r.parity else "DIVERGED")
        status = r.status if not r.error else f"{r.status} ({r.error.split(':')[0]})"
        if m.get("step/noisy"):
            status += ", noisy"
        breaks = m.get("diagnose/graph_breaks")
        config = [r.config.get(k, "?" if k == "model" and not r.config else "–") for k in TABLE_KEYS]
        if not r.config:
            config[0] = r.name
        out.append(
            [
                *config,
                _fmt(m.get("step/p50_ms")),
                spread,
                _fmt(r.speedup),
                _fmt(m.get("compile/total_s"), 1),
                _fmt(r.peak_gib),
                "–" if breaks is None else str(int(breaks)),
                parity,
                status,
            ]
        )
    return out


def aggregate_lines(summary: Summary) -> list[str]:
    a = summary.aggregates
    lines = [f"jobs: {int(a['jobs'])}, failed: {int(a['jobs_failed'])}"]
    if "sweep/wall_s" in a:
        lines[0] += f", sweep wall time {a['sweep/wall_s']:.1f} s"
    if "sweep/pass_rate" in a:
        lines.append(f"pass rate (finished, loss parity within tolerance): {a['sweep/pass_rate']:.0%}")
    if "sweep/geomean_speedup" in a:
        lines.append(
            f"geometric-mean speedup vs eager over passing compiled jobs: {a['sweep/geomean_speedup']:.3f}x"
        )
    if "sweep/weighted_speedup" in a:
        lines.append(
            f"weighted speedup 0.75·AMP + 0.25·FP32 (PyTorch 2.0 launch): {a['sweep/weighted_speedup']:.3f}x"
        )
    if summary.fastest is not None:
        f = summary.fastest
        lines.append(f"fastest: {f.name} at {f.metrics['step/p50_ms']:.2f} ms/step (p50)")
    lines.extend(f"note: {n}" for n in summary.notes)
    for r in summary.failures:
        lines.append(f"failed: {r.name}: {r.status}: {r.error or 'no error recorded'}")
    return lines


def to_markdown(summary: Summary) -> str:
    rows = table_rows(summary)
    out = io.StringIO()
    out.write(f"# Sweep {summary.sweep_id}\n\n")
    out.write("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n")
    for row in rows:
        out.write("| " + " | ".join(row) + " |\n")
    out.write("\n" + "\n".join(f"- {line}" for line in aggregate_lines(summary)) + "\n")
    out.write(
        "\nStep times are medians over the measured steps; speedup = paired eager median / compiled median; peak = reserved GiB over the measured steps.\n"
    )
    return out.getvalue()


def write_csv(summary: Summary, path: Path) -> None:
    metric_names = sorted({k for r in summary.rows for k in r.metrics})
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run_name", *TABLE_KEYS, "status", "error", *metric_names])
        for r in summary.rows:
            writer.writerow(
                [
                    r.name,
                    *(r.config.get(k, "") for k in TABLE_KEYS),
                    r.status,
                    r.error,
                    *(r.metrics.get(k, "") for k in metric_names),
                ]
            )


def print_table(summary: Summary) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 220)
    table = Table(title=f"sweep {summary.sweep_id}", show_lines=False)
    for col in COLUMNS:
        table.add_column(col, justify="right" if col[0].isdigit() or " " in col else "left", overflow="fold")
    for row in table_rows(summary):
        table.add_row(*row)
    console.print(table)
    for line in aggregate_lines(summary):
        console.print(line, markup=False, highlight=False)
