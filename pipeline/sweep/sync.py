"""Upload job results that never reached MLflow (`python -m pipeline.report --sync [DIR ...]`).

Every job keeps its result as `result.json` in its output folder, with `mlflow_synced` saying whether
MLflow has it. When the store was unreachable at the end of a job, this finds those folders and logs
them: into the job's own run when the store still knows it (e.g. a run left RUNNING when the store went
away mid-job), or into a new run with the same name, tags and sweep parent otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.config.schema import from_dict
from pipeline.identity import config_hash, identity_tags, pool_hash, run_name
from pipeline.job.result import RESULT_FILE, JobResult
from pipeline.sweep.state import SweepContext
from pipeline.tracking import Tracker


def unsynced(dirs: list[Path]) -> list[Path]:
    found = []
    for root in dirs:
        for path in sorted(root.rglob(RESULT_FILE)):
            try:
                if not JobResult.read(path).mlflow_synced and (path.parent / "job_config.json").exists():
                    found.append(path)
            except (OSError, ValueError, TypeError):
                continue
    return found


def sync_one(tracker: Tracker, result_path: Path) -> str:
    job_dir = result_path.parent
    result = JobResult.read(result_path)
    cfg = from_dict(json.loads((job_dir / "job_config.json").read_text()))
    run = tracker.get_run(result.mlflow_run_id)
    if run is None:
        sweep = SweepContext.load(job_dir.parent)
        varied = sweep.axes if sweep else []
        tags = {
            **identity_tags(cfg, varied),
            "config_hash": config_hash(cfg),
            "pool_hash": pool_hash(cfg),
            "job_dir": str(job_dir),
            "synced_later": "true",
        }
        parent = None
        if sweep is not None:
            tags["sweep_id"] = sweep.sweep_id
            parent = sweep.parent_run_id if tracker.get_run(sweep.parent_run_id) else None
        run_id = tracker.start_run(run_name(cfg, varied), tags, parent_run_id=parent)
    else:
        run_id = run.run_id
        tracker.set_tags(run_id, {"synced_later": "true"})
    tracker.log_result(run_id, cfg, result, job_dir)
    result.mlflow_run_id, result.mlflow_synced = run_id, True
    result.write(result_path)
    return run_id


def sync_results(tracker: Tracker, dirs: list[Path]) -> int:
    paths = unsynced(dirs)
    if not paths:
        print(f"nothing to sync under {', '.join(map(str, dirs))}: every job result is in MLflow")
        return 0
    failed = 0
    for path in paths:
        try:
            run_id = sync_one(tracker, path)
            print(f"synced {path.parent} -> run {run_id}")
        except Exception as exc:
            failed += 1
            print(f"could not sync {path.parent}: {type(exc).__name__}: {exc}")
    return 1 if failed else 0
