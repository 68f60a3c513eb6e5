"""The summary as PNG plots, one function per plot: the objective per configuration, compile time
against speedup, peak memory, the mode x precision speedup heatmap and the Pareto front. An interval
too wide to say anything (`undetermined`) gets no whiskers and says so in its label."""

from __future__ import annotations

import logging
import math
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.measure.objective import SPEEDUP
from pipeline.measure.registry import bounds, headline
from pipeline.measure.stats import undetermined
from pipeline.status import FINISHED
from pipeline.sweep.render import in_words, verdict_words
from pipeline.sweep.suite import geomean
from pipeline.sweep.summary import Row, Summary

COMPILED_COLOR, EAGER_COLOR = "tab:orange", "tab:gray"


def make_plots(summary: Summary, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    # its font cache's first build says so at INFO ("generated new fontManager"), through Hydra's handlers
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = [r for r in summary.rows if r.status == FINISHED and headline(r.metrics) is not None]
    speed = [r for r in done if r.compiled and r.speedup]
    two_axes = (
        len({r.config.get("mode") for r in speed}) > 1 and len({r.config.get("precision") for r in speed}) > 1
    )
    plots: list[tuple[str, Callable[..., Any], list[Row]]] = [
        ("step_time.png", step_time_plot, done),
        ("speedup_heatmap.png", speedup_heatmap, speed if two_axes else []),
        ("compile_vs_speedup.png", compile_vs_speedup_plot, speed),
        ("peak_memory.png", peak_memory_plot, [r for r in done if r.peak_gib is not None]),
        ("pareto.png", pareto_plot, done if summary.pareto is not None else []),
    ]
    return [save_figure(draw(rows, summary), out_dir / name) for name, draw, rows in plots if rows]


def _colors(rows: list[Row]) -> list[str]:
    return [COMPILED_COLOR if r.compiled else EAGER_COLOR for r in rows]


def step_time_plot(rows: list[Row], summary: Summary) -> Any:
    """The objective per job, best first, whiskers = its 95% interval."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    objective = summary.objective
    rows = sorted(
        (r for r in rows if objective.metric in r.metrics),
        key=lambda r: r.metrics[objective.metric],
        reverse=objective.higher_is_better,
    )
    figures = [objective.estimate(r.metrics) for r in rows]
    figures = [(v, v, v) if undetermined(lo, hi) else (v, lo, hi) for v, lo, hi in figures]
    undecided = [undetermined(*objective.estimate(r.metrics)[1:]) for r in rows]
    fig, ax = plt.subplots(figsize=(12, max(3.0, 0.4 * len(rows) + 1.8)))
    bars = ax.barh(
        [
            _label(summary, r) + (" (interval undetermined)" if u else "")
            for r, u in zip(rows, undecided, strict=True)
        ],
        [f[0] for f in figures],
        xerr=[[f[0] - f[1] for f in figures], [f[2] - f[0] for f in figures]],
        color=_colors(rows),
        capsize=4,
    )
    for bar, row in zip(bars, rows, strict=True):
        if row.noisy:
            bar.set_hatch("//")
            bar.set_alpha(0.6)
    ax.invert_yaxis()
    ax.set_xlabel(in_words(summary, f"{objective.label}; whiskers: 95% interval"))
    verdict = textwrap.fill(verdict_words(summary), 110)  # whole, on as many lines as it takes
    ax.set_title(f"sweep {summary.sweep_id}\n{verdict}", fontsize=10, loc="left")
    ax.legend(  # beside the axes: over them it hid the longest bar
        handles=[
            Patch(color=COMPILED_COLOR, label="compiled"),
            Patch(color=EAGER_COLOR, label="eager"),
            Patch(
                facecolor="white", edgecolor="black", hatch="//", label="noisy (the host may have slowed it)"
            ),
        ],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0,
        fontsize=8,
    )
    return fig


def _label(summary: Summary, row: Row) -> str:
    """The row's name, marked ★ when it is the fastest configuration."""
    fastest = summary.verdict.fastest if summary.verdict else None
    pooled = next((c.name for c in summary.configurations if row in c.rows), row.name)
    return ("★ " if pooled == fastest else "") + row.name


def speedup_heatmap(rows: list[Row], summary: Summary) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    modes = sorted({r.config["mode"] for r in rows})
    precisions = sorted({r.config["precision"] for r in rows})

    def cell(mode: str, prec: str) -> float:
        speedups = [r.speedup for r in rows if r.config["mode"] == mode and r.config["precision"] == prec]
        return geomean(speedups) if speedups else math.nan  # type: ignore[arg-type]

    grid = [[cell(mode, prec) for prec in precisions] for mode in modes]
    cells = [v for row in grid for v in row if v == v]
    fig, ax = plt.subplots(figsize=(3.5 + 1.3 * len(precisions), 1.8 + 0.6 * len(modes)))
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(0.5, *cells), vmax=max(1.5, *cells))
    image = ax.imshow(grid, cmap="RdYlGn", norm=norm)
    ax.set_xticks(range(len(precisions)), precisions)
    ax.set_yticks(range(len(modes)), modes)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value == value:  # not NaN: the cell has jobs
                ax.text(j, i, f"{value:.2f}x", ha="center", va="center", fontsize=9)
    fig.colorbar(image, ax=ax, label="speedup vs eager")
    ax.set_title("Speedup vs eager: mode x precision\n(geomean over the other axes)", fontsize=10)
    return fig


def compile_vs_speedup_plot(rows: list[Row], summary: Summary) -> Any:
    """What each compiled configuration buys (speedup, with its interval) for what it costs (compile s)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5.5))
    markers = "osD^vP*Xh<>p"
    for i, r in enumerate(rows):  # a legend, not annotations: labels of nearby points would overlap
        m = r.metrics
        _, low, high = bounds(m, SPEEDUP)
        wide = undetermined(low, high)  # type: ignore[arg-type]
        if wide:
            low = high = r.speedup
        ax.errorbar(
            m.get("compile/total_s", math.nan),
            r.speedup,
            yerr=[[r.speedup - low], [high - r.speedup]],  # type: ignore[operator]
            fmt=markers[i % len(markers)],
            markersize=7,
            capsize=3,
            color=plt.get_cmap("tab10")(i % 10),
            label=_label(summary, r)
            + (" (noisy)" if r.noisy else "")
            + (" (interval undetermined)" if wide else ""),
        )
    ax.axhline(1.0, color="gray", lw=0.8, ls="--", label="1.0x: no gain over eager")
    ax.margins(x=0.15, y=0.2)  # no point on the frame
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.set_xlabel("compile time, s (the torch.compile call plus the warm-up excess)")
    ax.set_ylabel("speedup vs paired eager (whiskers: 95% interval)")
    ax.set_title("Compile time against speedup")
    return fig


def peak_memory_plot(rows: list[Row], summary: Summary) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.35 * len(rows) + 1.5)))
    ax.barh([_label(summary, r) for r in rows], [r.peak_gib for r in rows], color=_colors(rows))
    ax.invert_yaxis()
    kinds = {r.peak_is_device for r in rows}
    ax.set_xlabel(
        "peak reserved memory over the measured steps, GiB"
        if kinds == {True}
        else "peak resident memory (RSS) of the job's worker process, GiB"
        if kinds == {False}
        else "peak memory, GiB: reserved over the measured steps; RSS of the worker for jobs on the CPU"
    )
    ax.set_title("Peak memory per configuration")
    return fig


def pareto_plot(rows: list[Row], summary: Summary) -> Any:
    """Throughput against compile time, memory as the points' colour; the Pareto front's points ringed
    and labelled."""
    import matplotlib.pyplot as plt

    front = summary.pareto
    assert front is not None
    fig, ax = plt.subplots(figsize=(10, 6))
    points = front.points
    dots = ax.scatter(
        [p.compile_s for p in points],
        [p.throughput for p in points],
        c=[p.memory_gib for p in points],
        cmap="viridis",
        s=60,
        zorder=2,
    )
    fig.colorbar(dots, ax=ax, label=f"{front.memory_metric}, GiB (lower is better)")
    best = sorted(front.front, key=lambda p: p.compile_s)
    ax.scatter(
        [p.compile_s for p in best],
        [p.throughput for p in best],
        s=220,
        facecolors="none",
        edgecolors="tab:red",
        linewidths=2,
        label="Pareto front",
        zorder=3,
    )
    middle = (min(p.compile_s for p in points) + max(p.compile_s for p in points)) / 2
    for p in best:  # labels point inwards, so that they stay inside the axes
        right = p.compile_s > middle
        ax.annotate(
            p.name,
            (p.compile_s, p.throughput),
            fontsize=7,
            xytext=(-8 if right else 8, 6),
            textcoords="offset points",
            ha="right" if right else "left",
        )
    ax.set_xlabel("compile time, s (compile/total_s; lower is better)")
    ax.set_ylabel(f"{front.throughput_metric} (higher is better)")
    ax.set_title(
        f"sweep {summary.sweep_id}: Pareto front of throughput, compile time and memory "
        f"({len(front.front)} of {len(points)} jobs)",
        fontsize=10,
    )
    ax.legend(loc="lower right", fontsize=8)
    return fig


def save_figure(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside the axes included
    plt.close(fig)
    return path
