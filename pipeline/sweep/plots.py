"""The summary as plots (PNG), one function per plot: step time per configuration, speedup heatmap
(mode x precision), compile time against speedup, peak memory per configuration."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.status import FINISHED
from pipeline.sweep.summary import Row, Summary, geomean

COMPILED_COLOR, EAGER_COLOR = "tab:orange", "tab:gray"


def make_plots(summary: Summary, out_dir: Path) -> list[Path]:
    """Every plot that has data, written under `out_dir`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir.mkdir(parents=True, exist_ok=True)
    done = [r for r in summary.rows if r.status == FINISHED and "step/p50_ms" in r.metrics]
    speed = [r for r in done if r.compiled and r.speedup]
    plots: list[tuple[str, Callable[..., Any], list[Row]]] = [
        ("step_time.png", step_time_plot, done),
        ("speedup_heatmap.png", speedup_heatmap, speed),
        ("compile_vs_speedup.png", compile_vs_speedup_plot, speed),
        ("peak_memory.png", peak_memory_plot, [r for r in done if r.peak_gib is not None]),
    ]
    paths = []
    for name, draw, rows in plots:
        if rows:
            paths.append(_save(draw(rows, summary), out_dir / name))
    return paths


def _colors(rows: list[Row]) -> list[str]:
    return [COMPILED_COLOR if r.compiled else EAGER_COLOR for r in rows]


def step_time_plot(rows: list[Row], summary: Summary) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, max(3.0, 0.35 * len(rows) + 1.5)))
    p50 = [r.metrics["step/p50_ms"] for r in rows]
    low = [p - r.metrics.get("step/p10_ms", p) for p, r in zip(p50, rows, strict=True)]
    high = [r.metrics.get("step/p90_ms", p) - p for p, r in zip(p50, rows, strict=True)]
    ax.barh([r.name for r in rows], p50, xerr=[low, high], color=_colors(rows), capsize=3)
    ax.invert_yaxis()
    ax.set_xlabel("step time, ms (median; whiskers p10-p90)")
    ax.set_title(f"Step time per configuration - sweep {summary.sweep_id}")
    return fig


def speedup_heatmap(rows: list[Row], summary: Summary) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    modes = sorted({r.config["mode"] for r in rows})
    precisions = sorted({r.config["precision"] for r in rows})
    grid = [[math.nan] * len(precisions) for _ in modes]
    for i, mode in enumerate(modes):
        for j, prec in enumerate(precisions):
            cell = [r.speedup for r in rows if r.config["mode"] == mode and r.config["precision"] == prec]
            if cell:
                grid[i][j] = geomean(cell)  # type: ignore[arg-type]
    cells = [v for row in grid for v in row if v == v]
    fig, ax = plt.subplots(figsize=(3.5 + 1.3 * len(precisions), 1.8 + 0.6 * len(modes)))
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(0.5, *cells), vmax=max(1.5, *cells))
    image = ax.imshow(grid, cmap="RdYlGn", norm=norm)
    ax.set_xticks(range(len(precisions)), precisions)
    ax.set_yticks(range(len(modes)), modes)
    for i in range(len(modes)):
        for j in range(len(precisions)):
            if grid[i][j] == grid[i][j]:
                ax.text(j, i, f"{grid[i][j]:.2f}x", ha="center", va="center", fontsize=9)
    fig.colorbar(image, ax=ax, label="speedup vs eager")
    ax.set_title("Speedup vs eager: mode x precision\n(geomean over the other axes)", fontsize=10)
    return fig


def compile_vs_speedup_plot(rows: list[Row], summary: Summary) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    markers = "osD^vP*Xh<>p"
    for i, r in enumerate(rows):  # a legend, not annotations: labels of nearby points would overlap
        ax.scatter(
            r.metrics.get("compile/total_s", math.nan),
            r.speedup,
            s=45,
            marker=markers[i % len(markers)],
            color=plt.get_cmap("tab10")(i % 10),
            label=r.name,
        )
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.axhline(1.0, color="gray", lw=0.8, ls="--")
    ax.set_xlabel("compile time, s")
    ax.set_ylabel("speedup vs eager")
    ax.set_title("Compile time against speedup")
    return fig


def peak_memory_plot(rows: list[Row], summary: Summary) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.35 * len(rows) + 1.5)))
    ax.barh([r.name for r in rows], [r.peak_gib for r in rows], color=_colors(rows))
    ax.invert_yaxis()
    ax.set_xlabel("peak reserved memory over the measured steps, GiB")
    ax.set_title("Peak memory per configuration")
    return fig


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside the axes included
    plt.close(fig)
    return path
