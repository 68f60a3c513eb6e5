"""Sweep summaries, read back from MLflow: a table, aggregates, plots.

    python -m pipeline.report --sweep <sweep id>        # print, write summary files, log them to the parent
    python -m pipeline.report --list                    # the sweeps in the experiment
    python -m pipeline.report --sync [DIR ...]          # upload job results MLflow never received
    python -m pipeline.report --results DIR             # summarize job folders without MLflow

At the end of every multirun the same summary is printed, written as `summary.md` and `summary.csv`
into the sweep's output folder, and logged (with PNG plots) to the sweep's parent run.

Aggregates: the geometric-mean speedup over passing compiled jobs (passing = FINISHED and loss parity
within tolerance where it was measured), the pass rate, the PyTorch 2.0 launch's weighted speedup
0.75 * geomean(AMP) + 0.25 * geomean(FP32), and the fastest passing configuration.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.sweep import SweepContext

AMP_PRECISIONS = ("amp", "amp_fp16")
FP32_PRECISIONS = ("fp32",)
CONFIG_KEYS = ("model", "loss", "precision", "mode", "backend", "fullgraph", "dynamic", "scope")


@dataclass
class Row:
    """One job of a sweep, as MLflow has it."""

    name: str
    status: str
    config: dict[str, str]
    metrics: dict[str, float]
    error: str = ""
    config_hash: str = ""
    start_time: int = 0

    @property
    def compiled(self) -> bool:
        return self.config.get("mode") not in (None, "eager")

    @property
    def speedup(self) -> float | None:
        return self.metrics.get("speedup_vs_eager")

    @property
    def parity(self) -> float | None:
        return self.metrics.get("loss_parity")

    @property
    def passing(self) -> bool:
        return self.status == "FINISHED" and self.parity != 0.0

    @property
    def peak_gib(self) -> float | None:
        return self.metrics.get("peak_mem_reserved_gib")


@dataclass
class Summary:
    sweep_id: str
    rows: list[Row]
    aggregates: dict[str, float] = field(default_factory=dict)
    fastest: Row | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.status != "FINISHED"]


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def row_from_run(run: Any) -> Row:
    tags = run.data.tags
    config = {k: tags[k] for k in CONFIG_KEYS if k in tags}
    error = f"{tags['error_type']}: {tags.get('error_message', '')}" if "error_type" in tags else ""
    return Row(
        run.info.run_name or run.info.run_id,
        run.info.status,
        config,
        dict(run.data.metrics),
        error,
        tags.get("config_hash", ""),
        run.info.start_time or 0,
    )


def row_from_result(path: Path) -> Row | None:
    """A job from its folder (result.json + job_config.json), for summaries without MLflow."""
    import json

    from pipeline.sweep import config_hash
    from pipeline.tracking import identity, run_name

    try:
        result = json.loads(path.read_text())
        cfg = json.loads((path.parent / "job_config.json").read_text())
    except (OSError, ValueError):
        return None
    error = result.get("error") or {}
    started = int(1000 * (result.get("info", {}).get("worker_started_at") or path.stat().st_mtime))
    return Row(
        run_name(cfg),
        result["status"],
        identity(cfg),
        result.get("metrics", {}),
        f"{error['type']}: {error['message']}" if error else "",
        config_hash(cfg),
        started,
    )


def latest_per_config(rows: list[Row]) -> list[Row]:
    """A resumed sweep may hold a failed and a finished run of one config: keep the latest of each."""
    latest: dict[str, Row] = {}
    for row in sorted(rows, key=lambda r: r.start_time):
        latest[row.config_hash or row.name] = row
    return sorted(latest.values(), key=lambda r: r.start_time)


def summarize(sweep_id: str, rows: list[Row]) -> Summary:
    summary = Summary(sweep_id, latest_per_config(rows))
    compiled = [r for r in summary.rows if r.compiled]
    passing = [r for r in compiled if r.passing and r.speedup]
    agg = summary.aggregates
    agg["jobs"] = len(summary.rows)
    agg["jobs_failed"] = len(summary.failures)
    if compiled:
        agg["pass_rate"] = sum(r.passing for r in compiled) / len(compiled)
    if passing:
        agg["geomean_speedup"] = geomean([r.speedup for r in passing])  # type: ignore[misc]
        amp = [r.speedup for r in passing if r.config.get("precision") in AMP_PRECISIONS]
        fp32 = [r.speedup for r in passing if r.config.get("precision") in FP32_PRECISIONS]
        if amp and fp32:
            agg["weighted_speedup"] = 0.75 * geomean(amp) + 0.25 * geomean(fp32)  # type: ignore[arg-type]
        else:
            summary.notes.append(
                "weighted speedup (0.75 AMP + 0.25 FP32) needs passing AMP and fp32 jobs with a paired eager baseline"
            )
    elif compiled:
        summary.notes.append("no passing compiled job with a paired eager baseline: no speedup aggregates")
    finished = [r for r in summary.rows if r.passing and "step_time_ms_p50" in r.metrics]
    if finished:
        summary.fastest = min(finished, key=lambda r: r.metrics["step_time_ms_p50"])
        if len({(r.config.get("model"), r.config.get("loss")) for r in finished}) > 1:
            summary.notes.append(
                "the fastest configuration is taken across different models or losses; compare within one model in the table"
            )
    noisy = sum(1 for r in summary.rows if r.metrics.get("measurement_noisy"))
    if noisy:
        summary.notes.append(
            f"{noisy} job(s) flagged noisy (their measured steps spread beyond benchmark.noisy_spread_pct): "
            "trust their paired speedups more than their step times, or rerun them"
        )
    return summary


# ----------------------------------------------------------------------------------------- rendering
COLUMNS = [
    "model",
    "loss",
    "precision",
    "mode",
    "backend",
    "fullgraph",
    "dynamic",
    "scope",
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
        spread = (
            f"{_fmt(m.get('step_time_ms_p10'))}–{_fmt(m.get('step_time_ms_p90'))}"
            if "step_time_ms_p10" in m
            else "–"
        )
        parity = "–" if r.parity is None else ("ok" if r.parity else "DIVERGED")
        status = r.status if not r.error else f"{r.status} ({r.error.split(':')[0]})"
        if m.get("measurement_noisy"):
            status += ", noisy"
        breaks = m.get("graph_breaks")
        config = [r.config.get(k, "?" if k == "model" and not r.config else "–") for k in CONFIG_KEYS]
        if not r.config:
            config[0] = r.name
        out.append(
            [
                *config,
                _fmt(m.get("step_time_ms_p50")),
                spread,
                _fmt(r.speedup),
                _fmt(m.get("compile_time_s"), 1),
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
    if "sweep_wall_s" in a:
        lines[0] += f", sweep wall time {a['sweep_wall_s']:.1f} s"
    if "pass_rate" in a:
        lines.append(f"pass rate (finished, loss parity within tolerance): {a['pass_rate']:.0%}")
    if "geomean_speedup" in a:
        lines.append(
            f"geometric-mean speedup vs eager over passing compiled jobs: {a['geomean_speedup']:.3f}x"
        )
    if "weighted_speedup" in a:
        lines.append(
            f"weighted speedup 0.75·AMP + 0.25·FP32 (PyTorch 2.0 launch): {a['weighted_speedup']:.3f}x"
        )
    if summary.fastest is not None:
        f = summary.fastest
        lines.append(f"fastest: {f.name} at {f.metrics['step_time_ms_p50']:.2f} ms/step (p50)")
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
        writer.writerow(["run_name", *CONFIG_KEYS, "status", "error", *metric_names])
        for r in summary.rows:
            writer.writerow(
                [
                    r.name,
                    *(r.config.get(k, "") for k in CONFIG_KEYS),
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


# ----------------------------------------------------------------------------------------- plots
def _label(r: Row) -> str:
    return r.name


def make_plots(summary: Summary, out_dir: Path) -> list[Path]:
    """PNG plots: step time per configuration (p10-p90 bars), speedup heatmap (mode x precision),
    compile time against speedup, peak memory per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    done = [r for r in summary.rows if r.status == "FINISHED" and "step_time_ms_p50" in r.metrics]
    paths: list[Path] = []
    if not done:
        return paths
    height = max(3.0, 0.35 * len(done) + 1.5)

    fig, ax = plt.subplots(figsize=(11, height))
    p50 = [r.metrics["step_time_ms_p50"] for r in done]
    low = [
        r.metrics["step_time_ms_p50"] - r.metrics.get("step_time_ms_p10", r.metrics["step_time_ms_p50"])
        for r in done
    ]
    high = [
        r.metrics.get("step_time_ms_p90", r.metrics["step_time_ms_p50"]) - r.metrics["step_time_ms_p50"]
        for r in done
    ]
    ax.barh(
        [_label(r) for r in done],
        p50,
        xerr=[low, high],
        color=["tab:orange" if r.compiled else "tab:gray" for r in done],
        capsize=3,
    )
    ax.invert_yaxis()
    ax.set_xlabel("step time, ms (median; whiskers p10-p90)")
    ax.set_title(f"Step time per configuration - sweep {summary.sweep_id}")
    paths.append(_save(fig, out_dir / "step_time.png"))

    speed = [r for r in done if r.compiled and r.speedup]
    if speed:
        modes = sorted({r.config["mode"] for r in speed})
        precisions = sorted({r.config["precision"] for r in speed})
        grid = [[math.nan] * len(precisions) for _ in modes]
        for i, mode in enumerate(modes):
            for j, prec in enumerate(precisions):
                cell = [
                    r.speedup for r in speed if r.config["mode"] == mode and r.config["precision"] == prec
                ]
                if cell:
                    grid[i][j] = geomean(cell)  # type: ignore[arg-type]
        from matplotlib.colors import TwoSlopeNorm

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
        paths.append(_save(fig, out_dir / "speedup_heatmap.png"))

        fig, ax = plt.subplots(figsize=(10, 5))
        markers = "osD^vP*Xh<>p"
        for i, r in enumerate(speed):  # a legend, not annotations: labels of nearby points would overlap
            ax.scatter(
                r.metrics.get("compile_time_s", math.nan),
                r.speedup,
                s=45,
                marker=markers[i % len(markers)],
                color=plt.get_cmap("tab10")(i % 10),
                label=_label(r),
            )
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_xlabel("compile time, s")
        ax.set_ylabel("speedup vs eager")
        ax.set_title("Compile time against speedup")
        paths.append(_save(fig, out_dir / "compile_vs_speedup.png"))

    mem = [r for r in done if r.peak_gib is not None]
    if mem:
        fig, ax = plt.subplots(figsize=(9, max(3.0, 0.35 * len(mem) + 1.5)))
        ax.barh(
            [_label(r) for r in mem],
            [r.peak_gib for r in mem],
            color=["tab:orange" if r.compiled else "tab:gray" for r in mem],
        )
        ax.invert_yaxis()
        ax.set_xlabel("peak reserved memory over the measured steps, GiB")
        ax.set_title("Peak memory per configuration")
        paths.append(_save(fig, out_dir / "peak_memory.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside the axes included
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------- sweep end
def build_summary(tracker: Any, sweep_id: str) -> Summary:
    return summarize(sweep_id, [row_from_run(run) for run in tracker.sweep_children(sweep_id)])


def publish(tracker: Any, parent_run_id: str, summary: Summary, out_dir: Path) -> list[Path]:
    """Write summary.md, summary.csv and the plots into out_dir and log them to the parent run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.md").write_text(to_markdown(summary))
    write_csv(summary, out_dir / "summary.csv")
    plots = make_plots(summary, out_dir / "plots")
    tracker.log_artifacts(parent_run_id, [out_dir / "summary.md", out_dir / "summary.csv"])
    tracker.log_artifacts(parent_run_id, plots, "plots")
    tracker.log_metrics(
        parent_run_id, {k: v for k, v in summary.aggregates.items() if k not in ("jobs", "jobs_failed")}
    )
    # The parent's description is the summary (the run page renders it); `jobs` stays a tag for --list.
    tags: dict[str, Any] = {
        "jobs": int(summary.aggregates["jobs"]),
        "jobs_failed": int(summary.aggregates["jobs_failed"]),
        "mlflow.note.content": to_markdown(summary),
    }
    if summary.fastest is not None:
        tags["fastest_config"] = summary.fastest.name
    tracker.set_tags(parent_run_id, tags)
    return [out_dir / "summary.md", out_dir / "summary.csv", *plots]


def sweep_wall_s(tracker: Any, parent_run_id: str) -> float:
    """Seconds from the parent run's start (before any job) to now (every job ended): the sweep's
    wall time, less only its process start and the summary itself."""
    started_ms = tracker.client.get_run(parent_run_id).info.start_time
    return time.time() - started_ms / 1000


def close_orphans(tracker: Any, sweep_id: str) -> None:
    """Runs still RUNNING when every job of the sweep has ended belong to jobs that died without
    closing them (SIGKILL, node failure, the host's OOM killer): end them KILLED, with the reason."""
    from pipeline.tracking import KILLED

    for run in tracker.sweep_children(sweep_id):
        if run.info.status == "RUNNING":
            reason = "the job ended without recording a result (killed outright, or its node failed)"
            job_id = run.data.tags.get("slurm_job_id")
            if job_id:
                reason += f"; SLURM job {job_id}: {slurm_state(job_id)}"
            tracker.set_tags(run.info.run_id, {"error_type": "JobLost", "error_message": reason})
            tracker.end_run(run.info.run_id, KILLED)
            print(f"{run.info.run_name}: KILLED: {reason}", flush=True)


def slurm_state(job_id: str) -> str:
    """sacct's state for a job, or why it is not known."""
    import subprocess

    try:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-o", "State,ExitCode,Reason", "-j", job_id],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return (
            out.stdout.strip().splitlines()[0]
            if out.returncode == 0 and out.stdout.strip()
            else "state unknown"
        )
    except (OSError, subprocess.TimeoutExpired):
        return "state unknown (no sacct)"


def finish_sweep(sweep: SweepContext) -> list[str]:
    """At multirun end: print and publish the summary, close the parent run; return failed job names."""
    from pipeline.tracking import FINISHED, Tracker

    tracker = Tracker(sweep.tracking_uri, sweep.experiment)
    close_orphans(tracker, sweep.sweep_id)
    summary = build_summary(tracker, sweep.sweep_id)
    summary.aggregates["sweep_wall_s"] = sweep_wall_s(tracker, sweep.parent_run_id)
    print_table(summary)
    files = publish(tracker, sweep.parent_run_id, summary, Path(sweep.sweep_dir))
    print(
        f"summary: {', '.join(str(p) for p in files[:2])} and {len(files) - 2} plots; logged to parent run {sweep.parent_run_id}",
        flush=True,
    )
    tracker.end_run(sweep.parent_run_id, FINISHED)
    return [r.name for r in summary.failures]


# ----------------------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or outputs/mlflow.db)"
    )
    parser.add_argument("--experiment", default="compile-sweeps")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--sweep", metavar="ID", help="summarize this sweep (its `sweep_id` tag)")
    what.add_argument("--list", action="store_true", help="list the sweeps in the experiment")
    what.add_argument(
        "--sync",
        nargs="*",
        metavar="DIR",
        help="upload job results under these folders (default outputs/) that never reached MLflow",
    )
    what.add_argument(
        "--results",
        metavar="DIR",
        type=Path,
        help="summarize the job folders under DIR from their result files, without MLflow",
    )
    parser.add_argument(
        "--out", type=Path, help="where to write summary files (default: the sweep's output folder)"
    )
    args = parser.parse_args(argv)
    if args.results is not None:
        return summarize_folders(args.results, args.out or args.results)

    from pipeline.tracking import Tracker, TrackingUnavailable

    uri = args.tracking_uri or default_tracking_uri()
    try:
        tracker = Tracker(uri, args.experiment)
    except TrackingUnavailable as err:
        print(f"mlflow error: {err}", file=sys.stderr)
        return 1
    if args.list:
        for run in tracker.runs("tags.sweep_parent = 'true'"):
            print(
                f"{run.data.tags.get('sweep_id')}  {run.info.status:9}  jobs={run.data.tags.get('jobs', '?')}  failed={run.data.tags.get('jobs_failed', '?')}  {run.data.tags.get('sweep_dir', '')}"
            )
        return 0
    if args.sync is not None:
        from pipeline.sync import sync_results

        return sync_results(tracker, [Path(d) for d in (args.sync or ["outputs"])])
    parent = tracker.sweep_parent(args.sweep)
    if parent is None:
        print(
            f"no sweep with sweep_id={args.sweep!r} in experiment {args.experiment!r} at {uri}; `--list` shows the sweeps",
            file=sys.stderr,
        )
        return 1
    summary = build_summary(tracker, args.sweep)
    print_table(summary)
    out_dir = args.out or Path(parent.data.tags.get("sweep_dir") or f"outputs/sweeps/{args.sweep}")
    files = publish(tracker, parent.info.run_id, summary, out_dir)
    print(f"wrote {', '.join(str(p) for p in files)}")
    return 0


def summarize_folders(root: Path, out_dir: Path) -> int:
    """The summary of the job folders under `root`, read from their result files (no MLflow)."""
    rows = [row for path in sorted(root.rglob("result.json")) if (row := row_from_result(path)) is not None]
    if not rows:
        print(f"no job results under {root}", file=sys.stderr)
        return 1
    summary = summarize(root.resolve().name, rows)
    print_table(summary)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.md").write_text(to_markdown(summary))
    write_csv(summary, out_dir / "summary.csv")
    plots = make_plots(summary, out_dir / "plots")
    print(f"wrote {out_dir / 'summary.md'}, {out_dir / 'summary.csv'} and {len(plots)} plots")
    return 0


def default_tracking_uri() -> str:
    import os

    return (
        os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd().resolve() / 'outputs' / 'mlflow.db'}"
    )


if __name__ == "__main__":
    sys.exit(main())
