"""The end of a sweep: close the runs of jobs that died without a result, publish the summary (files,
plots, the parent's metrics, tags and description), and close the parent run."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from pipeline.status import FINISHED, KILLED, RUNNING
from pipeline.sweep.plots import make_plots
from pipeline.sweep.render import print_table, to_markdown, write_csv
from pipeline.sweep.state import SweepContext
from pipeline.sweep.summary import Summary, row_from_run, summarize
from pipeline.sweep.verdict import Rule
from pipeline.tracking import Tracker

SUMMARY_FILES = ("summary.md", "summary.csv")


def build_summary(tracker: Tracker, sweep_id: str) -> Summary:
    """The sweep's summary from MLflow: its axes and verdict settings from the parent run's tags."""
    parent = tracker.sweep_parent(sweep_id)
    tags = parent.tags if parent is not None else {}
    varied = [axis.split("=", 1)[0].lstrip("+~") for axis in tags.get("sweep_axes", "").split()]
    rule = Rule(
        min_effect_pct=float(tags.get("min_effect_pct", Rule.min_effect_pct)),
        max_interval_pct=float(tags.get("max_interval_pct", Rule.max_interval_pct)),
    )
    rows = [row_from_run(run, varied) for run in tracker.sweep_children(sweep_id)]
    return summarize(sweep_id, rows, varied=varied, rule=rule)


def write_summary(summary: Summary, out_dir: Path) -> list[Path]:
    """summary.md, summary.csv and the plots under `out_dir`; returns their paths (files first)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.md").write_text(to_markdown(summary))
    write_csv(summary, out_dir / "summary.csv")
    return [out_dir / name for name in SUMMARY_FILES] + make_plots(summary, out_dir / "plots")


def publish(tracker: Tracker, parent_run_id: str, summary: Summary, out_dir: Path) -> list[Path]:
    """Write the summary files and plots into out_dir and log them to the parent run."""
    files = write_summary(summary, out_dir)
    tracker.log_artifacts(parent_run_id, files[: len(SUMMARY_FILES)])
    tracker.log_artifacts(parent_run_id, files[len(SUMMARY_FILES) :], "plots")
    tracker.log_metrics(
        parent_run_id, {k: v for k, v in summary.aggregates.items() if k not in ("jobs", "jobs_failed")}
    )
    # The parent's description leads with the verdict and the compact table (the run page renders it);
    # `jobs` stays a tag for --list.
    tags: dict[str, Any] = {
        "jobs": int(summary.aggregates["jobs"]),
        "jobs_failed": int(summary.aggregates["jobs_failed"]),
        "mlflow.note.content": to_markdown(summary, compact=True),
        **verdict_tags(summary),
    }
    stale = {"fastest_config", "fastest_run_id", "tied_configs"} - set(tags)
    tracker.delete_tags(parent_run_id, stale)  # a resumed sweep's earlier verdict
    tracker.set_tags(parent_run_id, tags)
    return files


def verdict_tags(summary: Summary) -> dict[str, str]:
    """`verdict` (fastest, tie or inconclusive), the objective; `fastest_config` and `fastest_run_id`
    only for `fastest`, `tied_configs` otherwise."""
    verdict = summary.verdict
    if verdict is None:
        return {}
    tags = {"verdict": verdict.kind, "verdict_reason": verdict.reason, "objective": summary.objective.metric}
    fastest = summary.fastest
    if fastest is not None:
        objective = summary.objective
        pick = max if objective.higher_is_better else min
        best = pick(fastest.rows, key=lambda r: r.metrics[objective.metric])
        tags.update({"fastest_config": fastest.name, "fastest_run_id": best.run_id})
    else:
        tags["tied_configs"] = ", ".join(verdict.tied)
    return tags


def sweep_wall_s(tracker: Tracker, parent_run_id: str) -> float:
    """Seconds from the parent run's start (before any job) to now (every job ended): the sweep's
    wall time, less only its process start and the summary itself."""
    parent = tracker.get_run(parent_run_id)
    assert parent is not None, f"the sweep's parent run {parent_run_id} is gone"
    return time.time() - parent.start_time_ms / 1000


def close_orphans(tracker: Tracker, sweep_id: str) -> None:
    """Runs still RUNNING when every job of the sweep has ended belong to jobs that died without
    closing them (SIGKILL, node failure, the host's OOM killer): end them KILLED, with the reason."""
    for run in tracker.sweep_children(sweep_id):
        if run.status == RUNNING:
            reason = "the job ended without recording a result (killed outright, or its node failed)"
            job_id = run.tags.get("slurm_job_id")
            if job_id:
                reason += f"; SLURM job {job_id}: {slurm_state(job_id)}"
            tracker.set_tags(run.run_id, {"error_type": "JobLost", "error_message": reason})
            tracker.end_run(run.run_id, KILLED)
            print(f"{run.name}: KILLED: {reason}", flush=True)


def slurm_state(job_id: str) -> str:
    """sacct's state for a job, or why it is not known."""
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
    tracker = Tracker(sweep.tracking_uri, sweep.experiment)
    close_orphans(tracker, sweep.sweep_id)
    summary = build_summary(tracker, sweep.sweep_id)
    summary.aggregates["sweep/wall_s"] = sweep_wall_s(tracker, sweep.parent_run_id)
    print_table(summary)
    files = publish(tracker, sweep.parent_run_id, summary, Path(sweep.sweep_dir))
    print(
        f"summary: {', '.join(str(p) for p in files[:2])} and {len(files) - 2} plots; logged to parent run {sweep.parent_run_id}",
        flush=True,
    )
    tracker.end_run(sweep.parent_run_id, FINISHED)
    return [r.name for r in summary.failures]


def close_interrupted(sweep: SweepContext, reason: str) -> None:
    """Mark the parent run, and any child still RUNNING, as KILLED (Ctrl-C or SIGTERM of the sweep)."""
    try:
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        for run in tracker.sweep_children(sweep.sweep_id):
            if run.status == RUNNING:
                tracker.set_tags(run.run_id, {"error_type": "Interrupted", "error_message": reason})
                tracker.end_run(run.run_id, KILLED)
        tracker.set_tags(sweep.parent_run_id, {"error_type": "Interrupted", "error_message": reason})
        tracker.end_run(sweep.parent_run_id, KILLED)
    except Exception as exc:  # the store itself may be what failed
        print(f"could not close the sweep's runs in MLflow: {exc}", flush=True)
