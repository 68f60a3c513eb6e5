"""Upload job results that never reached MLflow (`python -m pipeline.report --sync [DIR ...]`) into the
job's own run (a new one only where the store never had it), never twice and never over a FINISHED
run; and close runs left RUNNING by jobs that ended (`close_ended_job_run`, a sweep's end's rule too)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config.schema import from_dict
from pipeline.identity import job_tags, run_name
from pipeline.job.outcome import run_payload
from pipeline.job.result import JobResult, recorded_run_id
from pipeline.jobdir import JOB_CONFIG, RESULT, RUN_ID, SWEEP_FILE, JobDir, job_files
from pipeline.provenance import sync_command
from pipeline.redaction import redact_uri
from pipeline.status import FAILED, FINISHED, JOB_LOST, KILLED, RESULT_NOT_LOGGED, RUNNING
from pipeline.sweep import lease
from pipeline.sweep_context import SweepContext
from pipeline.tracking import RunRecord, Tracker


def unsynced(dirs: list[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The result files under these folders that MLflow lacks, and those that cannot be uploaded, each
    with what is wrong (not a job's result: cut off, not JSON, of another shape; its job's config
    missing): never skipped without a word."""
    found: list[Path] = []
    problems: list[tuple[Path, str]] = []
    for root in dirs:
        for path in job_files(root, RESULT):
            try:
                result = JobResult.read(path)
            except (OSError, ValueError) as exc:
                why = f"cannot be read ({exc.strerror or exc})" if isinstance(exc, OSError) else str(exc)
                problems.append((path, why))
                continue
            if result.mlflow_synced:
                continue
            if JobDir(path.parent).job_config.exists():
                found.append(path)
            else:
                problems.append(
                    (path, f"has no {JOB_CONFIG} beside it (the job's config), which its run needs")
                )
    return found, problems


def sync_one(tracker: Tracker, result_path: Path) -> tuple[str, str]:
    """Log one job's result; returns (run id, what was done)."""
    job_dir = result_path.parent
    result = JobResult.read(result_path)
    cfg = from_dict(json.loads(JobDir(job_dir).job_config.read_text()))
    # the run this job opened, if the store knows it: the result's, the folder's note, the folder's tag
    runs = (tracker.get_run(run_id) for run_id in (result.mlflow_run_id, recorded_run_id(job_dir)))
    run = next((r for r in runs if r is not None), None) or tracker.job_run(job_dir)
    if run is None:
        sweep = SweepContext.load(job_dir.parent)
        varied = sweep.axes if sweep else []
        tags = job_tags(cfg, varied, job_dir) | {"synced_later": "true"}
        parent = None
        if sweep is not None:
            tags["sweep_id"] = sweep.sweep_id
            if result.info.get("job_num") is not None:  # the sweep's end counts the job as run
                tags["job_num"] = str(result.info["job_num"])
            parent = sweep.parent_run_id if tracker.get_run(sweep.parent_run_id) else None
        run_id = tracker.start_run(run_name(cfg, varied), tags, parent_run_id=parent)
        tracker.log_payload(run_id, run_payload(cfg, result, job_dir))
        done = f"logged into a new run: MLflow never had the job's run ({result.status})"
    elif run.status == FINISHED:
        run_id, done = run.run_id, "kept: the run is FINISHED in MLflow"
        if result.status != FINISHED:
            done += f", this later {result.status} result is not logged"
    else:
        run_id = run.run_id
        tracker.set_tags(run_id, {"synced_later": "true"})
        tracker.log_payload(run_id, run_payload(cfg, result, job_dir), completing=True)
        done = f"logged into the job's run ({result.status})"
    result.mlflow_run_id, result.mlflow_synced = run_id, True
    result.write(result_path)
    return run_id, done


@dataclass(frozen=True)
class Store:
    """Where a job logged: its tracking URI (unredacted: job_config.json and sweep.json stay local) and
    MLflow experiment."""

    uri: str
    experiment: str


@dataclass
class Folders:
    """The job folders and sweep folders `--sync` hands to one store."""

    jobs: list[Path] = field(default_factory=list)
    sweeps: list[Path] = field(default_factory=list)


def folders_by_store(dirs: list[Path]) -> dict[Store | None, Folders]:
    """The job and sweep folders under `dirs`, by the store their own files name (job_config.json's
    `mlflow` section, sweep.json's): `--sync` uploads each result into the store its job logged to,
    whatever the command's own default store is. None: folders whose files do not say (unreadable,
    or no job config), which `sync_results` names."""
    found: dict[Store | None, Folders] = {}
    for root in dirs:
        jobs = {path.parent for name in (RESULT, RUN_ID, JOB_CONFIG) for path in job_files(root, name)}
        for job_dir in sorted(jobs):
            found.setdefault(_job_store(job_dir), Folders()).jobs.append(job_dir)
        for sweep_file in job_files(root, SWEEP_FILE):
            found.setdefault(_sweep_store(sweep_file.parent), Folders()).sweeps.append(sweep_file.parent)
    return found


def _job_store(job_dir: Path) -> Store | None:
    try:
        mlflow = json.loads(JobDir(job_dir).job_config.read_text())["mlflow"]
        return Store(str(mlflow["tracking_uri"]), str(mlflow["experiment"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _sweep_store(sweep_dir: Path) -> Store | None:
    try:
        sweep = SweepContext.load(sweep_dir)
    except (OSError, ValueError, TypeError):  # finish_left_sweeps names it
        return None
    return Store(sweep.tracking_uri, sweep.experiment) if sweep is not None else None


def name_unsaid(folders: Folders) -> int:
    """The folders whose files name no store (`folders_by_store`'s None), each named with what is wrong;
    no store is guessed for them. Returns how many."""
    paths, problems = unsynced(folders.jobs)
    why = f"its {JOB_CONFIG} cannot be read, so the store its job logged to is unknown (--tracking-uri names one)"
    problems += [(path, why) for path in paths]
    say_not_uploaded(problems)
    for sweep_dir in folders.sweeps:
        print(
            f"could not finish the sweep in {sweep_dir}: {SWEEP_FILE}, which names its store, cannot be read"
        )
    return len(problems) + len(folders.sweeps)


def say_not_uploaded(problems: list[tuple[Path, str]]) -> None:
    for path, why in problems:
        print(
            f"sync error: {path}: {why}: job {path.parent} cannot be uploaded (its run, if any, stays as it is); "
            "look at its worker.log and error.txt, or move the folder away"
        )


def sync_results(tracker: Tracker, dirs: list[Path]) -> tuple[int, int]:
    """Upload the results under `dirs` that `tracker`'s store lacks; returns (uploaded, failed)."""
    paths, unreadable = unsynced(dirs)
    say_not_uploaded(unreadable)
    # Results that say MLflow has them (`mlflow_synced`) in a run this store does not hold: the store is
    # not the one they were logged to, or it lost them (a deleted sqlite file set up afresh).
    lost = []
    for root in dirs:
        for path in job_files(root, RESULT):
            try:
                result = JobResult.read(path)
            except (OSError, ValueError):  # named by `unsynced`
                continue
            if result.mlflow_synced and result.mlflow_run_id and not tracker.get_run(result.mlflow_run_id):
                lost.append((path, result.mlflow_run_id))
    if lost:
        (first, run_id), more = lost[0], f" and {len(lost) - 1} more" if len(lost) > 1 else ""
        sweep = next((s for p, _ in lost if (s := SweepContext.load(p.parent.parent)) is not None), None)
        store = f" (sweep.json names {redact_uri(sweep.tracking_uri)})" if sweep is not None else ""
        print(
            f"sync error: {first}{more} say MLflow has them (run {run_id}), but {redact_uri(tracker.uri)} holds "
            f"no such run: this is not the store they were logged to, or it lost them; point --tracking-uri at "
            f"that store{store}"
        )
    uploaded, failed = 0, len(lost) + len(unreadable)
    for path in paths:
        try:
            run_id, done = sync_one(tracker, path)
            uploaded += 1
            print(f"synced {path.parent} -> run {run_id}: {done}")
        except Exception as exc:
            failed += 1
            print(f"could not sync {path.parent}: {type(exc).__name__}: {exc}")
    return uploaded, failed


def close_lost_jobs(tracker: Tracker, dirs: list[Path]) -> None:
    """Close the runs left RUNNING by jobs that have ended (nothing holds their lease), as a sweep's end
    does: `close_ended_job_run`."""
    for noted in sorted({p for root in dirs for p in job_files(root, RUN_ID)}):
        job_dir = noted.parent
        if lease.holders([job_dir]):
            continue
        run = tracker.get_run(recorded_run_id(job_dir))
        if run is not None and run.status == RUNNING:
            print(f"closed run {run.run_id} of {job_dir}: {close_ended_job_run(tracker, run, job_dir)}")


LOST = "the job ended without recording a result (killed outright, or its node failed)"


def close_ended_job_run(tracker: Tracker, run: RunRecord, job_dir: Path | None, *, note: str = "") -> str:
    """The one rule for a run left RUNNING by a job that has ended: FAILED (`ResultNotLogged`) where its
    result is on disk, for `--sync` to upload; else KILLED (`JobLost`, with `note`). Returns what was
    done, in words."""
    if job_dir is not None and (kept := JobDir(job_dir).result).exists():
        reason = f"the job's result is kept in {kept}, not in MLflow: `{sync_command([job_dir])}` uploads it"
        tracker.close_run(run.run_id, FAILED, error_type=RESULT_NOT_LOGGED, message=reason)
        return f"{FAILED}: {reason}"
    tracker.close_run(run.run_id, KILLED, error_type=JOB_LOST, message=LOST + note)
    return f"{KILLED}: {LOST}{note}"
