"""The end of a sweep: close the runs of jobs that died without a result, publish the summary (files,
plots, the parent's metrics, tags and description), and close the parent run. A sweep whose end
failed (or whose driver died) is finished later by `python -m pipeline.report --sync`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.job.result import one_line
from pipeline.redaction import private_files
from pipeline.status import FAILED, FINISHED, KILLED, RUNNING
from pipeline.sweep import lease, slurm
from pipeline.sweep.plots import make_plots
from pipeline.sweep.render import print_table, to_markdown, write_csv
from pipeline.sweep.summary import Summary, row_from_run, summarize
from pipeline.sweep.verdict import Rule
from pipeline.sweep_context import SWEEP_FILE, SweepContext
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
    return summarize(sweep_id, rows, varied=varied, rule=rule, configured=tags.get("sweep_objective"))


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


def close_orphans(tracker: Tracker, sweep_id: str) -> None:
    """Runs still RUNNING when every job of the sweep has ended belong to jobs that died without
    closing them (SIGKILL, node failure, the host's OOM killer): end them KILLED, with the reason."""
    for run in tracker.sweep_children(sweep_id):
        if run.status == RUNNING:
            reason = "the job ended without recording a result (killed outright, or its node failed)"
            job = slurm.task_name(run.tags)
            if job:
                reason += f"; SLURM job {job}: {slurm.state(job)}"
            tracker.close_run(run.run_id, KILLED, error_type="JobLost", message=reason)
            print(f"{run.name}: KILLED: {reason}", flush=True)


def finish_sweep(
    sweep: SweepContext, tracker: Tracker | None = None, *, wall_s: float | None = None
) -> Summary:
    """At multirun end: print and publish the summary, close the parent run; return the summary.
    `wall_s`: the sweep's wall time when it is finished later than its last job ended."""
    tracker = tracker or Tracker(sweep.tracking_uri, sweep.experiment)
    close_orphans(tracker, sweep.sweep_id)
    summary = build_summary(tracker, sweep.sweep_id)
    # The parent run's start (before any job) to now (every job ended), less the gaps between a sweep
    # and its resumptions: the sweep's wall time, but for its process start and the summary itself.
    summary.aggregates["sweep/wall_s"] = sweep.wall_s() if wall_s is None else wall_s
    print_table(summary)
    files = publish(tracker, sweep.parent_run_id, summary, Path(sweep.sweep_dir))
    print(
        f"summary: {', '.join(str(p) for p in files[:2])} and {len(files) - 2} plots; logged to parent run {sweep.parent_run_id}",
        flush=True,
    )
    tracker.clear_error(sweep.parent_run_id)  # a sweep finished late (`--sync`) ends as if on time
    tracker.end_run(sweep.parent_run_id, FINISHED)
    sweep.finished = True
    with private_files():
        sweep.save()
    return summary


def abandon(sweep: SweepContext, err: Exception) -> str:
    """The one line for a sweep whose end failed: its parent run closed FAILED with the reason (when
    the store still answers), and how to finish it later."""
    reason = f"could not finish sweep {sweep.sweep_id}: {type(err).__name__}: {one_line(str(err))}"
    later = f"`python -m pipeline.report --sync {sweep.sweep_dir}` finishes it"
    try:
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        tracker.log_metrics(sweep.parent_run_id, {"sweep/wall_s": sweep.wall_s()})
        tracker.close_run(sweep.parent_run_id, FAILED, error_type="SweepEndFailed", message=reason)
    except Exception:  # the store itself is what failed
        return f"sweep error: {reason}; its parent run {sweep.parent_run_id} stays RUNNING until {later}"
    return f"sweep error: {reason}; parent run {sweep.parent_run_id} closed FAILED, {later}"


def finish_left_sweeps(tracker: Tracker, dirs: list[Path]) -> int:
    """`report --sync`: finish the sweeps under these folders whose end never happened (the store was
    gone, the summary could not be written, the driver died), once none of their jobs still runs.
    Returns how many could not be finished."""
    failed = 0
    for path in sorted({p for d in dirs for p in [d / SWEEP_FILE, *d.rglob(SWEEP_FILE)] if p.exists()}):
        sweep = SweepContext.load(path.parent)
        if sweep is None or sweep.finished or lease.still_working([path.parent])[0]:
            continue
        try:
            finish_sweep(sweep, tracker, wall_s=_wall_when_left(tracker, sweep))
            print(f"finished sweep {sweep.sweep_id} ({path.parent})")
        except Exception as exc:
            failed += 1
            print(
                f"could not finish sweep {sweep.sweep_id} ({path.parent}): {type(exc).__name__}: {one_line(str(exc))}"
            )
    return failed


def _wall_when_left(tracker: Tracker, sweep: SweepContext) -> float | None:
    """The wall time of a sweep finished late: as logged when its end failed, else up to its last
    job's end (never the time it then waited for `--sync`)."""
    parent = tracker.get_run(sweep.parent_run_id)
    if parent is not None and "sweep/wall_s" in parent.metrics:
        return parent.metrics["sweep/wall_s"]
    ends = [r.end_time_ms for r in tracker.sweep_children(sweep.sweep_id) if r.end_time_ms]
    return sweep.prior_wall_s + max(ends) / 1000 - sweep.started_at if ends else None


def close_interrupted(sweep: SweepContext, reason: str, *, status: str = KILLED) -> None:
    """Mark any child still RUNNING KILLED, and the parent run `status` (Ctrl-C or SIGTERM of the sweep:
    KILLED; a sweep that could not go on: FAILED), with the reason and the wall time so far."""
    error_type = "Interrupted" if status == KILLED else "SweepFailed"
    try:
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        for run in tracker.sweep_children(sweep.sweep_id):
            if run.status == RUNNING:
                tracker.close_run(run.run_id, KILLED, error_type=error_type, message=reason)
        tracker.log_metrics(sweep.parent_run_id, {"sweep/wall_s": sweep.wall_s()})
        tracker.close_run(sweep.parent_run_id, status, error_type=error_type, message=reason)
    except Exception as exc:  # the store itself may be what failed
        print(f"could not close the sweep's runs in MLflow: {exc}", flush=True)
