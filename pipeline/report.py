"""Sweep summaries read back from MLflow (also a CLI: `python -m pipeline.report --sweep <id>`)."""

from __future__ import annotations

from pipeline.sweep import SweepContext


def finish_sweep(sweep: SweepContext) -> list[str]:
    """Close the sweep's parent run; return the names of the jobs that did not finish."""
    from pipeline.tracking import FINISHED, Tracker

    tracker = Tracker(sweep.tracking_uri, sweep.experiment)
    children = tracker.sweep_children(sweep.sweep_id)
    failures = [run.info.run_name for run in children if run.info.status != FINISHED]
    tracker.set_tags(sweep.parent_run_id, {"jobs": len(children), "jobs_failed": len(failures)})
    tracker.end_run(sweep.parent_run_id, FINISHED)
    return failures
