"""The summary as text: the terminal (details first, the ranked table and the verdict last, within its
width), the parent run's description and `summary.md` (verdict first), and `summary.csv` (every metric
unrounded); figures rounded to what their intervals support. Torch-free."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from pipeline.display import (
    DASH,
    figure,
    in_unit_words,
    rounded,
    terminal_width,
    unit_word,
    with_interval,
    wrapped,
)
from pipeline.identity import TABLE_KEYS, short_labels
from pipeline.measure.objective import GEOMEAN_SPEEDUP as GEOMEAN
from pipeline.measure.objective import SPEEDUP
from pipeline.measure.registry import estimate
from pipeline.measure.stats import undetermined
from pipeline.status import FINISHED
from pipeline.sweep.pareto import front_lines
from pipeline.sweep.suite import failures_line
from pipeline.sweep.summary import Row, Scaling, Summary

UNDETERMINED = "undetermined"  # an interval too wide to say anything (pipeline/measure/stats.py undetermined)
MEASURE_COLUMNS = ("figure [95% CI]", "speedup", "compile s", "peak GiB", "graph breaks", "status")


def identity_columns(summary: Summary, *, compact: bool) -> list[str]:
    """The identity keys shown as columns: all of them, or (compact) those that vary among configured jobs."""
    keys = [*TABLE_KEYS, *summary.varied]
    if not compact:
        return keys
    rows = [r for r in summary.rows if r.config] or summary.rows
    varying = [k for k in keys if len({r.config.get(k, DASH) for r in rows}) > 1]
    return varying or ["model"]


def column_labels(keys: list[str]) -> list[str]:
    """A swept key's column by its last part (`trainer.batch_size` -> `batch_size`) unless two end alike."""
    short = short_labels([k for k in keys if k not in TABLE_KEYS])
    return [short.get(k, k) for k in keys]


def joined_identity(keys: list[str], values: list[str | None]) -> str:
    """Identity values as a run name joins them (`amp·max-autotune`, `batch_size=32`: a swept key's value
    with its column label), missing ones left out."""
    labels = dict(zip(keys, column_labels(keys), strict=True))
    return "·".join(
        value if key in TABLE_KEYS else f"{labels[key]}={value}"
        for key, value in zip(keys, values, strict=True)
        if value not in (None, DASH, "-")
    )


def constant_line(summary: Summary) -> str:
    """The identity values and measure columns every job shares (`model=vit_tiny, loss=ce, ...`), swept
    keys whole (`trainer.optimizer.fused=true`)."""
    shown = identity_columns(summary, compact=True)
    configured = [r for r in summary.rows if r.config] or summary.rows
    same = [
        f"{k}={configured[0].config.get(k, DASH)}"
        for k in [*TABLE_KEYS, *summary.varied]
        if k not in shown and configured
    ]
    header, rows = table(summary, compact=False)
    same += [f"{header[i]}={value}" for i, value in _shared_measures(header, rows).items()]
    return "every job: " + ", ".join(same) if same else ""


# Measure columns the compact table leaves out (to the line above it) when every job has the same value.
CONSTANT_WHEN_EQUAL = ("speedup", "compile s", "peak GiB", "graph breaks", "status")


def _shared_measures(header: list[str], rows: list[list[str]]) -> dict[int, str]:
    """The CONSTANT_WHEN_EQUAL columns (by index) with one value in every row, when there are two or more."""
    first = len(header) - len(MEASURE_COLUMNS)
    return {
        i: rows[0][i]
        for i in range(first, len(header))
        if len(rows) > 1 and header[i] in CONSTANT_WHEN_EQUAL and len({row[i] for row in rows}) == 1
    }


def sorted_rows(summary: Summary) -> list[Row]:
    """Passing jobs by the objective (best first), then the rest; a suite's by outcome, then model."""
    if summary.suite is not None:
        order = {o.run_name: i for i, o in enumerate(summary.suite.outcomes)}
        return sorted(summary.rows, key=lambda r: (order.get(r.name, len(order)), r.name))
    objective = summary.objective
    passing = [r for r in summary.rows if r.passing and objective.metric in r.metrics]
    passing.sort(key=lambda r: r.metrics[objective.metric], reverse=objective.higher_is_better)
    return passing + [r for r in summary.rows if r not in passing]


def _mark(summary: Summary, row: Row) -> str:
    verdict = summary.verdict
    if verdict is None:
        return ""
    name = next((c.name for c in summary.configurations if row in c.rows), row.name)
    if verdict.fastest == name:
        return "★ "
    return "= " if name in verdict.tied and verdict.kind == "tie" else ""


def figure_text(value: float, low: float, high: float) -> str:
    """`184 [101, 259]`, or `508 [undetermined]`; rounded to what the interval supports."""
    return with_interval(value, low, high, undetermined=undetermined(low, high))


def _figure(summary: Summary, row: Row) -> str:
    """The job's figure with its interval; a job without one says why in its place (`FAILED`)."""
    if not row.passing or summary.objective.metric not in row.metrics:
        return row.status if row.status != FINISHED else DASH
    return figure_text(*summary.objective.estimate(row.metrics))


def _speedup(row: Row) -> str:
    if row.speedup is None:
        return DASH
    _, low, high = estimate(row.metrics, SPEEDUP)
    if low is not None and high is not None:
        value, *interval = figure_text(row.speedup, low, high).split(" ", 1)
        return f"{value}x {interval[0]}"
    return f"{figure(row.speedup)}x"


def _status(row: Row) -> str:
    status = row.status if not row.error else f"{row.status} ({row.error_type or row.error.split(':')[0]})"
    if row.parity == 0.0:
        status += ", DIVERGED"
    if row.noisy:
        status += ", noisy"
    if row.metrics.get("step/above_latency"):  # its queue ran at the host's pace
        status += ", held back"
    return status


def table(summary: Summary, *, compact: bool) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the configuration table; compact: the measure columns every job shares left
    out (they are on the line above the table)."""
    keys = identity_columns(summary, compact=compact)
    outcomes = {o.run_name: o.outcome for o in summary.suite.outcomes} if summary.suite else None
    labels = column_labels(keys) if compact else keys
    header = [*labels, *(["outcome"] if outcomes is not None else []), *MEASURE_COLUMNS]
    out = []
    for row in sorted_rows(summary):
        m = row.metrics
        cells = [row.config.get(k, DASH) for k in keys]
        if not row.config:
            cells[0] = row.name
        cells[0] = _mark(summary, row) + cells[0]
        breaks = m.get("diagnose/graph_breaks")
        out.append(
            [
                *cells,
                *([outcomes.get(row.name, DASH)] if outcomes is not None else []),
                _figure(summary, row),
                _speedup(row),
                figure(m.get("compile/total_s")),
                figure(row.peak_gib),
                DASH if breaks is None else str(int(breaks)),
                _status(row),
            ]
        )
    if not compact:
        return header, out
    shared = _shared_measures(header, out)
    keep = [i for i in range(len(header)) if i not in shared]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in out]


def verdict_lines(summary: Summary) -> list[str]:
    if summary.suite is not None:
        return summary.suite.lines()  # its failures by class included
    return ([summary.verdict.line()] if summary.verdict else []) + failure_class_lines(summary)


def failure_class_lines(summary: Summary) -> list[str]:
    if not summary.failure_classes or summary.suite is not None:
        return []
    return [failures_line(summary.failure_classes)]


def aggregate_lines(summary: Summary) -> list[str]:
    a = summary.aggregates
    lines = [f"jobs: {int(a['jobs'])}, failed: {int(a['jobs_failed'])}"]
    if "sweep/wall_s" in a:
        lines[0] += f", sweep wall time {a['sweep/wall_s']:.1f} s"
    if "sweep/pass_rate" in a and summary.suite is None:  # a suite says it per model, above
        lines.append(f"pass rate (finished, loss parity within tolerance): {a['sweep/pass_rate']:.0%}")
    if GEOMEAN in a and summary.suite is None:
        geomean, low, high = estimate(a, GEOMEAN)
        shown = figure(geomean)
        if low is None or high is None:
            interval = f" [no interval: {summary.geomean_jobs} job(s)]"
        elif undetermined(low, high):
            interval = f" [95% bootstrap {UNDETERMINED}]"
        else:
            shown, low_shown, high_shown = rounded(geomean, low, high)
            interval = f" [95% bootstrap {low_shown}, {high_shown}]"
        lines.append(f"geometric-mean speedup vs eager over passing compiled jobs: {shown}x{interval}")
    if "sweep/weighted_speedup" in a:
        lines.append(
            f"weighted speedup 0.75·AMP + 0.25·FP32 (PyTorch 2.0 launch): {figure(a['sweep/weighted_speedup'])}x"
        )
    if a.get("sweep/jobs_with_graph_breaks"):
        lines.append(f"passing compiled jobs with graph breaks: {int(a['sweep/jobs_with_graph_breaks'])}")
    lines += map(scaling_line, summary.scaling)
    lines.extend(f"note: {n}" for n in summary.notes)
    if summary.pareto is not None:
        head, *points = front_lines(summary.pareto)
        lines += [head, *(f"  on the front: {line}" for line in points)]
    for r in summary.failures:
        if r.status == FINISHED and r.parity == 0.0:
            lines.append(
                f"failed: {r.name}: {FINISHED}, DIVERGED: loss or output parity beyond benchmark.loss_rtol"
            )
        else:
            lines.append(f"failed: {r.name}: {r.status}: {r.error or 'no error recorded'}")
    return lines


def scaling_line(sc: Scaling) -> str:
    """A distributed job: its scaling efficiency, communication loss and largest rank's memory."""
    if sc.baseline is not None and sc.efficiency is not None:
        head = (
            f"scaling efficiency of {sc.name} on {sc.world_size} processes vs {sc.baseline}: {sc.efficiency:.0%} "
            f"(throughput / ({sc.world_size} x the one-process throughput))"
        )
    else:
        head = f"{sc.name} on {sc.world_size} processes (no one-process twin in the sweep for a scaling efficiency)"
    said = [sc.communication] if sc.communication else []
    if sc.largest_rank_gib is not None:
        said.append(f"the largest rank {sc.largest_rank_gib:.2f} GiB allocated")
    return "; ".join([head, *said])


HOW = (
    "Figures: {objective}, with its 95% interval (honest for autocorrelated steps, stalls and steps from "
    "several host regimes; repeats pooled; `undetermined` where it spans more than a factor of 3, wider "
    "than the figure). Speedup: paired eager median / compiled median in the same worker, with its "
    "interval. Peak: reserved GiB over the measured steps (CPU: the worker's peak RSS). "
    "★ fastest, = tied. The rule: docs/verdicts.md."
)


def to_markdown(summary: Summary, *, compact: bool = False) -> str:
    """summary.md (full table) or the parent run's description (compact: verdict first, varying columns)."""
    out = io.StringIO()
    if not compact:  # the run's page names the sweep already: its description starts with the answer
        out.write(f"# Sweep {summary.sweep_id}\n\n")
    for line in map(lambda text: in_words(summary, text), verdict_lines(summary)):
        out.write(f"**{line}**\n\n" if line.startswith(("verdict", "suite")) else f"{line}\n\n")
    if compact:  # a list, before MLflow's "Show more": its description ran a table's cells together
        header, rows = answer_table(summary)
        out.write("\n".join(f"- {ranked_item(header, row)}" for row in rows) + "\n\n")
    if shared := constant_line(summary):  # the columns every job shares, once (summary.csv holds them all)
        out.write(shared + "\n\n")
    if not compact:
        header, rows = table(summary, compact=True)
        out.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        out.write(
            "".join("| " + " | ".join(c.replace("|", "/") for c in row) + " |\n" for row in rows) + "\n"
        )
    out.write("\n".join(f"- {in_words(summary, line)}" for line in aggregate_lines(summary)) + "\n\n")
    out.write(in_words(summary, HOW.format(objective=summary.objective.label)) + "\n")
    if compact:
        out.write("\nThe full table: summary.md and summary.csv in this run's artifacts.\n")
    return out.getvalue()


# The answer's table's cells in words (a configuration as a list item).
ITEM_WORDS = {
    "figure [95% CI]": "{}",
    "speedup": "{} vs eager",
    "compile s": "compile {} s",
    "peak GiB": "peak {} GiB",
    "graph breaks": "{} graph breaks",
}


def ranked_item(header: list[str], row: list[str]) -> str:
    """One configuration of the answer's table in words: `★ default·inductor: 184 [101, 259], 1.13x
    [undetermined] vs eager, compile 64.7 s, peak 0.672 GiB, 0 graph breaks, FINISHED`."""
    cells = [
        ITEM_WORDS.get(name, "{}").format(cell)
        for name, cell in zip(header[1:], row[1:], strict=True)
        if cell not in (DASH, "-")
    ]
    return f"{row[0]}: {', '.join(cells)}" if cells else row[0]


# summary.csv's columns of the objective's figure, after a job's identity, outcome, status and error
FIGURE_COLUMNS = ("objective", "figure", "figure_ci95_low", "figure_ci95_high")


def write_csv(summary: Summary, path: Path) -> None:
    metric_names = sorted({k for r in summary.rows for k in r.metrics})
    keys = [*TABLE_KEYS, *summary.varied]
    outcomes = {o.run_name: o.outcome for o in summary.suite.outcomes} if summary.suite else None
    outcome = ["outcome"] if outcomes is not None else []  # a suite's: vs the model's own eager copy
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run_name", *keys, *outcome, "status", "error", *FIGURE_COLUMNS, *metric_names])
        for r in summary.rows:
            measured = r.passing and summary.objective.metric in r.metrics
            figure = interval_cells(*summary.objective.estimate(r.metrics)) if measured else ["", "", ""]
            writer.writerow(
                [
                    r.name,
                    *(r.config.get(k, "") for k in keys),
                    *([outcomes.get(r.name, "")] if outcomes is not None else []),
                    r.status,
                    r.error,
                    summary.objective.metric,
                    *figure,
                    *(r.metrics.get(k, "") for k in metric_names),
                ]
            )


def interval_cells(value: float, low: float, high: float) -> list[object]:
    """A figure and its interval's ends as CSV cells; both ends `undetermined` for an interval too wide."""
    return [value, UNDETERMINED, UNDETERMINED] if undetermined(low, high) else [value, low, high]


# Columns a narrow terminal drops first (they stay in summary.md and summary.csv); the figure, the
# speedup and the compile time (the cost a user asked about) stay.
DROP_FIRST = ("status", "graph breaks", "peak GiB")


def in_words(summary: Summary, text: str) -> str:
    """`text` in the words of the sweep's own unit (a call's, not a training step's): what its jobs call a
    unit of their work (`step`, `call`), or `unit` where they differ."""
    units = {r.work.unit for r in summary.rows if r.work is not None}
    return in_unit_words(text, unit_word(units.pop()) if len(units) == 1 else "step" if not units else "unit")


def verdict_words(summary: Summary) -> str:
    """The verdict in words, for the end of the terminal: what it is, about which configurations (their
    run names: the table above marks them ★ and =), and why, in the sweep's own words."""
    verdict = summary.verdict
    if verdict is None:
        return ""
    if verdict.kind == "fastest" and verdict.fastest:
        return in_words(summary, f"verdict: fastest: {verdict.fastest} ★ ({verdict.reason})")
    names = ", ".join(verdict.tied)
    if verdict.kind == "tie":
        return in_words(summary, f"verdict: tie between {names} = ({verdict.reason})")
    among = f" among {names}" if names else ""
    rerun = (
        "; rerun with a larger benchmark.budget_s, repeats or on a quiet host"
        if len(verdict.tied) > 1
        else ""
    )
    return in_words(summary, f"verdict: inconclusive{among}: {verdict.reason}{rerun}")


def answer_lines(summary: Summary, width: int) -> list[str]:
    """The sweep's answer, the last lines on the terminal, each within `width`: the ranked table and the
    verdict (a suite's answer per model instead). The table drops DROP_FIRST's columns, in that order,
    until each column fits its widest cell in `width` (two spaces between columns), so that no cell folds."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    header, rows = answer_table(summary)
    widths = [max(len(name), *(len(r[i]) for r in rows)) for i, name in enumerate(header)]
    cols = list(range(len(header)))
    for name in DROP_FIRST:
        if sum(widths[i] + 2 for i in cols) > width and name in header:
            cols.remove(header.index(name))
    view = Table(
        title=in_words(summary, f"sweep {summary.sweep_id}: {summary.objective.label}"),
        box=None,
        pad_edge=False,
        # one space between columns, not two
        collapse_padding=sum(widths[i] for i in cols) + 2 * (len(cols) - 1) > width,
    )
    for i in cols:
        view.add_column(header[i], overflow="fold")
    for row in rows:
        view.add_row(*(Text(row[i]) for i in cols))  # plain text: `[undetermined]` is no markup tag
    out = io.StringIO()
    Console(width=width, file=out, no_color=True, highlight=False).print(view)
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    words = summary.suite.lines() if summary.suite is not None else [verdict_words(summary)]
    for text in filter(None, words):
        lines += wrapped(text, width)
    return lines


def answer_table(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """The compact table with its identity columns in one, as a run name joins them (`★ default·inductor`,
    `eager`, `depth=1`: a swept key's value with its name), so that the figures keep the width."""
    header, rows = table(summary, compact=True)
    keys = identity_columns(summary, compact=True)
    merged = []
    for row in rows:
        mark = row[0][: len(row[0]) - len(row[0].lstrip("★= "))]
        cells = [row[0][len(mark) :], *row[1 : len(keys)]]
        merged.append([mark + (joined_identity(keys, cells) or cells[0]), *row[len(keys) :]])
    return ["configuration", *header[len(keys) :]], merged


def detail_lines(summary: Summary) -> list[str]:
    """What comes before the answer: shared identity values, aggregates, notes and failures."""
    lines = [constant_line(summary), *failure_class_lines(summary), *aggregate_lines(summary)]
    return [in_words(summary, line) for line in lines if line]


def print_details(summary: Summary) -> None:
    width = terminal_width()
    for line in detail_lines(summary):
        print("\n".join(wrapped(line, width)), flush=True)


def print_answer(summary: Summary) -> None:
    print("\n".join(answer_lines(summary, terminal_width())), flush=True)


def print_table(summary: Summary) -> None:
    print_details(summary)
    print_answer(summary)
