"""The only module that talks to MLflow. Callers get the project's own records (:class:`RunRecord`),
never MLflow's objects, and never reach for the client.

Runs are handled through an explicit `MlflowClient` (never mlflow's global "active run"), so one
process can own many runs one after another (Hydra's basic launcher) and a crash of a worker never
leaves a run half-logged: the parent logs from the result file.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config.schema import Config, MlflowConfig, to_dict
from pipeline.job.outcome import outcome_tags, run_description
from pipeline.job.result import JobResult
from pipeline.provenance import git_commit
from pipeline.redaction import redact_uri, redacted
from pipeline.status import FINISHED, RUNNING

# MLflow's telemetry thread edits os.environ from a background thread while HTTP requests read it (an
# intermittent "_MLFLOW_TELEMETRY_SESSION_ID" failure on closed networks); this project sends none.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# Closing a run on a server makes MLflow print "View run ... at" and "View experiment at" lines: the
# job's own last line and the sweep's view link say it already.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")

PARAM_LIMIT = 6000  # MLflow's max param value length
TAG_LIMIT = 5000

# What a job leaves in its folder that MLflow gets (job_config.json stays local: it holds unredacted values).
ARTIFACT_FILES = (
    "config.yaml",
    "result.json",
    "run_info.json",
    "step_times.csv",
    "worker.log",
    "error.txt",
    "diagnostics.json",
    "explain.txt",
)
ARTIFACT_FOLDERS = ("profile", "tlparse")


class TrackingUnavailable(RuntimeError):
    """The MLflow store cannot be reached or written."""


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """A run as the project sees it."""

    run_id: str
    name: str
    status: str
    start_time_ms: int
    end_time_ms: int | None
    tags: dict[str, str]
    metrics: dict[str, float]
    params: dict[str, str]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted keys -> string values, redacted."""
    flat: dict[str, str] = {}
    for key, value in redacted(data).items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, path + "."))
            continue
        text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
        flat[path] = text[:PARAM_LIMIT]
    return flat


class Tracker:
    """Owns the MLflow client for one tracking URI and experiment."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_location: str | None = None):
        self.uri, self.experiment_name = tracking_uri, experiment
        self.artifact_location = artifact_location or default_artifact_location(tracking_uri)
        check_reachable(tracking_uri)
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(tracking_uri=tracking_uri)
        self._experiment_id: str | None = None

    @classmethod
    def from_config(cls, mlflow_cfg: MlflowConfig) -> Tracker:
        return cls(mlflow_cfg.tracking_uri, mlflow_cfg.experiment, mlflow_cfg.artifact_location)

    @property
    def experiment_id(self) -> str:
        """Get or create the experiment (created once, by the sweep callback, before any job runs)."""
        if self._experiment_id is None:
            exp = self._client.get_experiment_by_name(self.experiment_name)
            if exp is None:
                try:
                    self._experiment_id = self._client.create_experiment(
                        self.experiment_name, artifact_location=self.artifact_location
                    )
                except Exception:  # another process won the race
                    exp = self._client.get_experiment_by_name(self.experiment_name)
                    if exp is None:
                        raise
                    self._experiment_id = exp.experiment_id
            else:
                self._experiment_id = exp.experiment_id
        return self._experiment_id

    def runs_url(self, view_id: str | None = None) -> str:
        """Where the UI shows this experiment's runs table (MLflow 3 opens experiments on its GenAI
        view otherwise), in a saved view when given one. A sqlite store needs `make ui` first."""
        query = f"viewStateShareKey={view_id}&" if view_id else ""
        path = f"#/experiments/{self.experiment_id}/runs?{query}workflowType=machine_learning"
        if self.uri.startswith(("http://", "https://")):
            return f"{redact_uri(self.uri).rstrip('/')}/{path}"
        return f"http://127.0.0.1:5000/{path} (after `make ui`)"

    def experiment_tags(self) -> dict[str, str]:
        experiment = self._client.get_experiment(self.experiment_id)
        return dict(experiment.tags)

    def set_experiment_tag(self, key: str, value: str) -> None:
        self._client.set_experiment_tag(self.experiment_id, key, value)

    def delete_experiment_tag(self, key: str) -> None:
        self._client.delete_experiment_tag(self.experiment_id, key)

    # ------------------------------------------------------------------------------------- writing
    def start_run(self, name: str, tags: dict[str, str], parent_run_id: str | None = None) -> str:
        all_tags = {**standard_tags(), **{k: str(v)[:TAG_LIMIT] for k, v in tags.items()}}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self._client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        return run.info.run_id

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._client.log_batch(run_id, tags=[RunTag(k, str(v)[:TAG_LIMIT]) for k, v in tags.items()])

    def delete_tags(self, run_id: str, keys: Iterable[str]) -> None:
        """Remove these tags where the run has them."""
        run = self._client.get_run(run_id)
        for key in keys:
            if key in run.data.tags:
                self._client.delete_tag(run_id, key)

    def end_run(self, run_id: str, status: str) -> None:
        self._client.set_terminated(run_id, status=status)

    def reopen(self, run_id: str) -> None:
        """Mark an ended run RUNNING again (a resumed sweep's parent)."""
        self._client.update_run(run_id, status=RUNNING)

    def log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self._client.log_batch(run_id, params=items[i : i + 100])

    def log_metrics(
        self, run_id: str, metrics: dict[str, float], series: dict[str, list[tuple[int, float]]] | None = None
    ) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        for name, points in (series or {}).items():
            items.extend(Metric(name, float(v), now, int(step)) for step, v in points)
        for i in range(0, len(items), 1000):
            self._client.log_batch(run_id, metrics=items[i : i + 1000])

    def log_artifacts(self, run_id: str, paths: Iterable[Path], artifact_path: str | None = None) -> None:
        """Files (those that exist) and whole folders, under `artifact_path`."""
        for path in paths:
            if path.is_dir():
                self._client.log_artifacts(run_id, str(path), artifact_path or path.name)
            elif path.exists():
                self._client.log_artifact(run_id, str(path), artifact_path)

    def log_result(self, run_id: str, cfg: Config, result: JobResult, job_dir: Path) -> None:
        """Everything a job produced: params, metrics, curves, tags, artifacts; then its final status."""
        self.log_params(run_id, flatten(to_dict(cfg)))
        self.log_metrics(run_id, result.metrics, series_points(cfg, result))
        # A few tags to filter on; the environment and the job's internals are in run_info.json.
        self.set_tags(run_id, {**outcome_tags(result), "mlflow.note.content": run_description(result)})
        self.log_artifacts(run_id, [job_dir / name for name in ARTIFACT_FILES])
        self.log_artifacts(run_id, [job_dir / name for name in ARTIFACT_FOLDERS if (job_dir / name).is_dir()])
        self.end_run(run_id, result.status)

    # ------------------------------------------------------------------------------------- reading
    def read_json_artifact(self, run_id: str, path: str) -> dict[str, Any] | None:
        """A JSON artifact of a run (e.g. run_info.json), or None when it is not there."""
        import tempfile

        try:
            with tempfile.TemporaryDirectory() as tmp:
                local = self._client.download_artifacts(run_id, path, tmp)
                return json.loads(Path(local).read_text())
        except Exception:
            return None

    def get_run(self, run_id: str | None) -> RunRecord | None:
        """The run, or None when the store does not know it."""
        if not run_id:
            return None
        try:
            return _record(self._client.get_run(run_id))
        except Exception:
            return None

    def runs(self, filter_string: str, max_results: int = 5000) -> list[RunRecord]:
        found = self._client.search_runs(
            [self.experiment_id], filter_string=filter_string, max_results=max_results
        )
        return [_record(run) for run in found]

    def sweep_parent(self, sweep_id: str) -> RunRecord | None:
        found = self.runs(f"tags.sweep_id = '{sweep_id}' and tags.sweep_parent = 'true'", max_results=1)
        return found[0] if found else None

    def sweep_parents(self) -> list[RunRecord]:
        return self.runs("tags.sweep_parent = 'true'")

    def sweep_children(self, sweep_id: str) -> list[RunRecord]:
        return [r for r in self.runs(f"tags.sweep_id = '{sweep_id}'") if r.tags.get("sweep_parent") != "true"]

    def finished_run_for(self, sweep_id: str, config_hash: str) -> RunRecord | None:
        found = self.runs(
            f"tags.sweep_id = '{sweep_id}' and tags.config_hash = '{config_hash}' and attributes.status = '{FINISHED}'",
            max_results=1,
        )
        return found[0] if found else None


def _record(run: Any) -> RunRecord:
    return RunRecord(
        run_id=run.info.run_id,
        name=run.info.run_name or run.info.run_id,
        status=run.info.status,
        start_time_ms=run.info.start_time or 0,
        end_time_ms=run.info.end_time,
        tags=dict(run.data.tags),
        metrics=dict(run.data.metrics),
        params=dict(run.data.params),
    )


def series_points(cfg: Config, result: JobResult) -> dict[str, list[tuple[int, float]]]:
    """Per-step curves keyed by training step: losses from step 0, step times from the first measured
    step (= warm-up steps)."""
    warmup = cfg.trainer.warmup_steps
    points: dict[str, list[tuple[int, float]]] = {}
    for name, values in result.series.items():
        offset = warmup if name.endswith("step_ms") else 0
        points[name] = [(offset + i, v) for i, v in enumerate(values) if v == v]  # NaN-free
    return points


def standard_tags() -> dict[str, str]:
    """MLflow's own provenance tags (the UI's "Created by", "Source", git commit)."""
    tags = {"mlflow.source.name": "pipeline.run", "mlflow.source.type": "LOCAL"}
    with contextlib.suppress(KeyError, OSError):  # no user name for this uid
        tags["mlflow.user"] = getpass.getuser()
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    return tags


def default_artifact_location(tracking_uri: str) -> str | None:
    """Beside a sqlite store: `<store dir>/mlartifacts` (absolute). A server decides on its own."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///") :])
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


def check_reachable(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fail fast, with the URI in the message, when the store cannot be used."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///") :])
        if not db.is_absolute():
            raise TrackingUnavailable(
                f"mlflow.tracking_uri={tracking_uri!r}: use an absolute sqlite path (sqlite:////abs/path.db)"
            )
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TrackingUnavailable(
                f"mlflow.tracking_uri={tracking_uri!r}: cannot create {db.parent}: {exc}"
            ) from exc
        return
    if tracking_uri.startswith(("http://", "https://")):
        url = tracking_uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                if response.status != 200:
                    raise TrackingUnavailable(
                        f"MLflow server at {redact_uri(tracking_uri)} answered {response.status} on /health"
                    )
        except (TimeoutError, OSError) as exc:
            raise TrackingUnavailable(
                f"MLflow server at {redact_uri(tracking_uri)} is not reachable ({exc}); start one with `make mlflow-server` or set mlflow.tracking_uri"
            ) from exc
