"""The end of a sweep: close the runs of jobs that died without a result, publish the summary (files,
plots, the parent's metrics, tags and description), and close the parent run. A sweep whose end
failed (or whose driver died) is finished later by `python -m pipeline.report --sync`."""

from __future__ import annotations

import collections
import json
import os
import shlex
from pathlib import Path
from typing import Any, NamedTuple

from pipeline.display import first_few
from pipeline.job.result import JobResult, one_line, unsynced_results
from pipeline.jobdir import RESULT, SUMMARY_FILES, SWEEP_FILE, SweepDir
from pipeline.provenance import sync_command
from pipeline.redaction import private_files, redact_uri
from pipeline.status import FAILED, FINISHED, KILLED, RUNNING, SKIPPED
from pipeline.sweep import lease, slurm
from pipeline.sweep.plots import make_plots
from pipeline.sweep.render import print_answer, print_details, to_markdown, write_csv
from pipeline.sweep.state import axes_from_tag, axis_keys, hydra_value, resume_command
from pipeline.sweep.summary import Summary, kind_of_jobs, row_from_run, summarize
from pipeline.sweep.sync import close_ended_job_run
from pipeline.sweep.verdict import Rule
from pipeline.sweep_context import SweepContext
from pipeline.tracking import RunRecord, Tracker


def build_summary(tracker: Tracker, sweep_id: str) -> Summary:
    """The sweep's summary from MLflow: its axes and verdict settings from the parent run's tags."""
    parent = tracker.sweep_parent(sweep_id)
    tags = parent.tags if parent is not None else {}
    varied = axis_keys(axes_from_tag(tags.get("sweep_axes", "")))
    rule = Rule(min_effect_pct=float(tags.get("min_effect_pct", Rule.min_effect_pct)))
    runs = sorted(tracker.sweep_children(sweep_id), key=lambda r: r.start_time_ms)
    rows = [row_from_run(run, varied) for run in runs]
    for row, key in zip(rows, job_keys(runs), strict=True):
        row.config_hash = key
    # a parent from before the `sweep_kind` tag: the kind its jobs logged
    kind = tags.get("sweep_kind") or kind_of_jobs(run.params.get("sweep.kind") for run in runs)
    return summarize(
        sweep_id, rows, varied=varied, rule=rule, configured=tags.get("sweep_objective"), kind=kind
    )


def job_keys(runs: list[RunRecord]) -> list[str]:
    """What tells a sweep's jobs apart in its summary, run by run (oldest first): the configuration's
    hash (a bad job's overrides), so that a resumption's run replaces an earlier one; within one sweep
    folder each job folder counts on its own (a search's trials sampled twice)."""
    keys: list[str] = []
    folders: dict[tuple[str, str], dict[str, int]] = collections.defaultdict(dict)
    for run in runs:
        tags = run.tags
        base = tags.get("config_hash") or (f"bad:{tags['overrides']}" if "overrides" in tags else run.name)
        job_dir = os.path.normpath(tags.get("job_dir", "")) if tags.get("job_dir") else run.run_id
        seen = folders[(os.path.dirname(job_dir), base)]  # each job folder's number, in order of first run
        nth = seen.setdefault(job_dir, len(seen))
        keys.append(base if nth == 0 else f"{base}#{nth}")
    return keys


def write_summary(summary: Summary, out_dir: Path) -> list[Path]:
    """summary.md, summary.csv and the plots under `out_dir`; returns their paths (files first)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    folder = SweepDir(out_dir)
    markdown, table = folder.summary_files
    markdown.write_text(to_markdown(summary))
    write_csv(summary, table)
    return [markdown, table, *make_plots(summary, folder.plots)]


def publish(tracker: Tracker, parent_run_id: str, summary: Summary, out_dir: Path) -> list[Path]:
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
        **(summary.suite.tags() if summary.suite is not None else {}),
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
    """Close the runs still RUNNING once every job of the sweep has ended, by the rule `--sync` follows
    too (`sync.close_ended_job_run`)."""
    for run in tracker.sweep_children(sweep_id):
        if run.status == RUNNING:
            job = slurm.task_name(run.tags)
            note = f"; SLURM job {job}: {slurm.state(job)}" if job else ""
            job_dir = Path(run.tags["job_dir"]) if run.tags.get("job_dir") else None
            print(f"{run.name}: {close_ended_job_run(tracker, run, job_dir, note=note)}", flush=True)


class SweepEnd(NamedTuple):
    """What closing a sweep gave: its summary, and the lines saying it is incomplete and that results
    on disk are not in MLflow yet ('' when not)."""

    summary: Summary
    incomplete: str = ""
    pending: str = ""


def missing_jobs(tracker: Tracker, sweep: SweepContext) -> list[int]:
    """The jobs this session planned (sweep.json's `total_jobs`) that left no run from this session's
    folder and no SKIPPED result: stopped before their run opened, or never launched. Empty for a
    search."""
    if not sweep.total_jobs:
        return []
    here = os.path.realpath(sweep.sweep_dir) + os.sep
    seen: set[int] = set()
    for run in tracker.sweep_children(sweep.sweep_id):
        num, job_dir = run.tags.get("job_num", ""), run.tags.get("job_dir", "")
        if num.isdigit() and job_dir and os.path.realpath(job_dir).startswith(here):
            seen.add(int(num))
    folder = Path(sweep.sweep_dir)
    for path in [*folder.glob(f"*/{RESULT}"), *folder.glob(f"*/*/{RESULT}")]:
        try:
            result = JobResult.read(path)
        except (OSError, ValueError, TypeError):
            continue
        if result.status == SKIPPED and str(result.info.get("job_num", "")).isdigit():
            seen.add(int(result.info["job_num"]))
    return [num for num in range(sweep.total_jobs) if num not in seen]


def pending_line(sweep: SweepContext, pending: list[Path]) -> str:
    kept = first_few([str(p) for p in pending], most=1)
    return (
        f"{len(pending)} job result(s) are kept on disk but not in MLflow ({kept}): this summary is "
        f"provisional until `{sync_command([sweep.sweep_dir])}` uploads them, which closes the sweep and "
        "publishes its summary again"
    )


def incomplete_line(sweep: SweepContext, missing: list[int]) -> str:
    shown = ", ".join(map(str, missing[:20])) + (", ..." if len(missing) > 20 else "")
    return (
        f"{len(missing)} of the {sweep.total_jobs} planned jobs left no run in MLflow (job{'s' if len(missing) > 1 else ''} "
        f"{shown}: stopped before their run opened, or never launched)"
    )


def finish_sweep(
    sweep: SweepContext, tracker: Tracker | None = None, *, wall_s: float | None = None
) -> SweepEnd:
    """Print and publish the summary and close the parent run: FINISHED only when every planned job is
    accounted for and every result is in MLflow. `wall_s`: the wall time of a sweep finished late."""
    tracker = tracker or Tracker(sweep.tracking_uri, sweep.experiment)
    parent = tracker.get_run(sweep.parent_run_id)
    if parent is None:  # never write a summary of a store that is not the sweep's
        raise LookupError(
            f"its parent run {sweep.parent_run_id} is not in {redact_uri(tracker.uri)}: the store the sweep "
            f"logged to is {redact_uri(sweep.tracking_uri)}"
        )
    close_orphans(tracker, sweep.sweep_id)
    summary = build_summary(tracker, sweep.sweep_id)
    missing = missing_jobs(tracker, sweep)
    incomplete = incomplete_line(sweep, missing) if missing else ""
    if incomplete:
        summary.notes.append(f"incomplete: {incomplete}")
    pending_results = unsynced_results(Path(sweep.sweep_dir))  # the summary from MLflow lacks them
    pending = pending_line(sweep, pending_results) if pending_results else ""
    if pending:
        summary.notes.append(f"provisional: {pending}")
    # The parent run's start (before any job) to now (every job ended), less the gaps between a sweep
    # and its resumptions: the sweep's wall time, but for its process start and the summary itself.
    summary.aggregates["sweep/wall_s"] = sweep.wall_s() if wall_s is None else wall_s
    sweep.ended_wall_s = summary.aggregates["sweep/wall_s"]
    print_details(summary)  # the answer comes last, once the sweep is closed (print_answer)
    files = publish(tracker, sweep.parent_run_id, summary, Path(sweep.sweep_dir))
    with private_files():  # the wall time its summary says, for `report --results`
        sweep.save()
    print(f"summary: {files[0]} (.csv, {len(files) - 2} plots; in the sweep's run too)", flush=True)
    if pending:
        tracker.set_tags(sweep.parent_run_id, {"results_pending": ", ".join(map(str, pending_results))})
    if incomplete:
        interrupted = parent.status == KILLED
        before = parent.tags.get("error_message", "") if interrupted else ""
        tracker.set_tags(sweep.parent_run_id, {"jobs_missing": ", ".join(map(str, missing))})
        tracker.close_run(
            sweep.parent_run_id,
            KILLED if interrupted else FAILED,
            error_type=parent.tags.get("error_type", "Interrupted") if interrupted else "IncompleteSweep",
            message="; ".join(filter(None, [before, incomplete])),
        )
        return SweepEnd(summary, incomplete, pending)
    if pending:  # never published as final: `--sync` uploads the results and finishes the sweep
        tracker.close_run(sweep.parent_run_id, FAILED, error_type="ResultsNotInMlflow", message=pending)
        return SweepEnd(summary, pending=pending)
    # a resumption ran what an earlier session lacked; `--sync` uploaded what the end lacked
    tracker.delete_tags(sweep.parent_run_id, ["jobs_missing", "results_pending"])
    tracker.clear_error(sweep.parent_run_id)  # a sweep finished late (`--sync`) ends as if on time
    tracker.end_run(sweep.parent_run_id, FINISHED)
    sweep.finished = True
    with private_files():
        sweep.save()
    return SweepEnd(summary)


def abandon(sweep: SweepContext, err: Exception) -> str:
    """The one line for a sweep whose end failed: its parent run closed FAILED with the reason (when
    the store still answers), and how to finish it later."""
    reason = f"could not finish sweep {sweep.sweep_id}: {type(err).__name__}: {one_line(str(err))}"
    later = f"`{sync_command([sweep.sweep_dir])}` finishes it"
    try:
        tracker = Tracker(sweep.tracking_uri, sweep.experiment)
        tracker.log_metrics(sweep.parent_run_id, {"sweep/wall_s": sweep.wall_s()})
        tracker.close_run(sweep.parent_run_id, FAILED, error_type="SweepEndFailed", message=reason)
    except Exception:  # the store itself is what failed
        return f"sweep error: {reason}; its parent run {sweep.parent_run_id} stays RUNNING until {later}"
    return f"sweep error: {reason}; parent run {sweep.parent_run_id} closed FAILED, {later}"


def finish_left_sweeps(tracker: Tracker, dirs: list[Path]) -> int:
    """`report --sync`: finish the sweeps under these folders whose end never happened, once none of
    their jobs still runs. Returns how many could not be finished (an incomplete sweep is one)."""
    failed = 0
    for path in sorted({p for d in dirs for p in [d / SWEEP_FILE, *d.rglob(SWEEP_FILE)] if p.exists()}):
        try:
            sweep = SweepContext.load(path.parent)
        except (OSError, ValueError, TypeError) as exc:  # not a sweep file this version wrote
            failed += 1
            print(
                f"could not finish the sweep in {path.parent}: {path.name} cannot be read ({one_line(str(exc))})"
            )
            continue
        if sweep is None or sweep.finished or lease.still_working([path.parent])[0]:
            continue
        try:
            if not _finish_left(tracker, sweep, path.parent):
                failed += 1
        except Exception as exc:
            failed += 1
            print(
                f"could not finish sweep {sweep.sweep_id} ({path.parent}): {type(exc).__name__}: {one_line(str(exc))}"
            )
    return failed


def _finish_left(tracker: Tracker, sweep: SweepContext, folder: Path) -> bool:
    """Finish one sweep left unfinished; False when it is (still) incomplete."""
    parent = tracker.get_run(sweep.parent_run_id)
    said = f"sweep {sweep.sweep_id} ({folder})"
    dirs = json.loads(parent.tags.get("sweep_dirs", "[]")) if parent is not None else []
    if dirs and dirs[-1] != sweep.sweep_dir:  # a later session of the sweep (resumed) finishes it
        print(f"{said}: resumed later in {dirs[-1]}, which finishes it")
        return True
    settled = parent is not None and parent.status != RUNNING and "results_pending" not in parent.tags
    if settled and "jobs_missing" in parent.tags:
        print(
            f"{said} is incomplete: jobs {parent.tags['jobs_missing']} left no run; "
            f"parent run {parent.run_id} {parent.status}; {resume_hint(sweep)}"
        )
        return False
    # the wall time of a sweep finished late: as logged when its end failed, else up to its last job's end
    # (never the time it then waited for `--sync`)
    wall_s = parent.metrics.get("sweep/wall_s") if parent is not None else None
    if wall_s is None and (
        ends := [r.end_time_ms for r in tracker.sweep_children(sweep.sweep_id) if r.end_time_ms]
    ):
        wall_s = sweep.prior_wall_s + max(ends) / 1000 - sweep.started_at
    end = finish_sweep(sweep, tracker, wall_s=wall_s)
    print_answer(end.summary)
    if end.incomplete:
        print(
            f"{said} is incomplete: {end.incomplete}; parent run closed, not FINISHED; {resume_hint(sweep)}"
        )
        return False
    if end.pending:
        print(f"{said} is not finished: {end.pending}; parent run closed, not FINISHED")
        return False
    print(f"finished sweep {sweep.sweep_id} ({folder})")
    return True


def resume_hint(sweep: SweepContext) -> str:
    """How to run a sweep's missing jobs: its own command resumed, shell-quoted so that pasted it runs
    that command and nothing else."""
    command = resume_command(sweep.command, sweep.sweep_id)
    if not command:  # a sweep.json from before it held the command
        resume = shlex.join([f"sweep.id={hydra_value(sweep.sweep_id)}", "sweep.resume=true"])
        return f"run the missing jobs by resuming it: the sweep's command with {resume}"
    masked = " (put back the values masked as ***)" if "***" in command else ""
    return f"run the missing jobs by resuming it: `{command}`{masked}"


def close_interrupted(sweep: SweepContext, reason: str, *, status: str = KILLED) -> None:
    """Close any child still RUNNING as KILLED and the parent as `status`, with the reason and the wall
    time so far."""
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
