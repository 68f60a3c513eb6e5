"""The only module that talks to MLflow.

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
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.provenance import git_commit, looks_secret
from pipeline.result import FAILED, FINISHED, KILLED, JobResult

# MLflow's telemetry thread edits os.environ from a background thread while HTTP requests read it (an
# intermittent "_MLFLOW_TELEMETRY_SESSION_ID" failure on closed networks); this project sends none.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

PARAM_LIMIT = 6000  # MLflow's max param value length
TAG_LIMIT = 5000

# What a job leaves in its folder that MLflow gets (job_config.json stays local: it holds unredacted values).
ARTIFACT_FILES = (
    "config.yaml",
    "result.json",
    "step_times.csv",
    "worker.log",
    "error.txt",
    "diagnostics.json",
    "explain.txt",
)
IDENTITY_TAGS = ("model", "loss", "precision", "mode", "backend", "fullgraph", "dynamic", "scope", "teacher")


class TrackingUnavailable(RuntimeError):
    """The MLflow store cannot be reached or written."""


# --------------------------------------------------------------------------------------------- helpers
def redact_uri(uri: str) -> str:
    """Drop a password from a URI (`postgresql://user:pw@host/db` -> `postgresql://user:***@host/db`)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return uri


def redacted(data: Any, path: str = "") -> Any:
    """A copy with the values of secret-looking keys masked and passwords dropped from URIs: what may
    leave the machine (MLflow params, the uploaded config)."""
    if isinstance(data, dict):
        return {k: redacted(v, f"{path}.{k}" if path else str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [redacted(v, path) for v in data]
    if path and looks_secret(path):
        return "***"
    if isinstance(data, str) and "://" in data:
        return redact_uri(data)
    return data


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


def identity(cfg: dict[str, Any]) -> dict[str, str]:
    """The tags that identify a configuration (also the summary table's columns)."""
    c = cfg["compile"]
    return {
        "model": cfg["model"]["id"],
        "loss": cfg["loss"]["id"],
        "precision": cfg["precision"]["id"],
        "mode": c["mode"],
        "backend": c["backend"] if c["mode"] != "eager" else "-",
        "fullgraph": str(c["fullgraph"]).lower(),
        "dynamic": str(c["dynamic"]).lower(),
        "scope": c["scope"] if c["mode"] != "eager" else "-",
        "teacher": (cfg["loss"].get("teacher") or {}).get("id") or "-",
    }


def run_name(cfg: dict[str, Any]) -> str:
    """Readable: `vit_b16·amp·max-autotune·inductor`, plus whatever differs from the defaults."""
    ident = identity(cfg)
    parts = [ident["model"], ident["precision"], ident["mode"]]
    if ident["mode"] != "eager":
        parts.append(ident["backend"])
        if ident["scope"] != "model":
            parts.append(ident["scope"])
        if ident["fullgraph"] == "true":
            parts.append("fullgraph")
        if ident["dynamic"] != "none":
            parts.append(f"dynamic={ident['dynamic']}")
    if ident["loss"] != "ce":
        teacher = (cfg["loss"].get("teacher") or {}).get("id")
        parts.insert(1, f"{ident['loss']}({teacher})" if teacher else ident["loss"])
    return "·".join(parts)


# --------------------------------------------------------------------------------------------- the tracker
class Tracker:
    """Owns the MLflow client for one tracking URI."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_location: str | None = None):
        self.uri, self.experiment_name = tracking_uri, experiment
        self.artifact_location = artifact_location or default_artifact_location(tracking_uri)
        check_reachable(tracking_uri)
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=tracking_uri)
        self._experiment_id: str | None = None

    @classmethod
    def from_config(cls, mlflow_cfg: dict[str, Any]) -> Tracker:
        return cls(mlflow_cfg["tracking_uri"], mlflow_cfg["experiment"], mlflow_cfg.get("artifact_location"))

    @property
    def experiment_id(self) -> str:
        """Get or create the experiment (created once, by the sweep callback, before any job runs)."""
        if self._experiment_id is None:
            exp = self.client.get_experiment_by_name(self.experiment_name)
            if exp is None:
                try:
                    self._experiment_id = self.client.create_experiment(
                        self.experiment_name, artifact_location=self.artifact_location
                    )
                except Exception:  # another process won the race
                    exp = self.client.get_experiment_by_name(self.experiment_name)
                    if exp is None:
                        raise
                    self._experiment_id = exp.experiment_id
            else:
                self._experiment_id = exp.experiment_id
        return self._experiment_id

    def runs_url(self) -> str:
        """Where the UI shows this experiment's runs table (MLflow 3 opens experiments on its GenAI
        view otherwise). A sqlite store needs `make ui` first."""
        path = f"#/experiments/{self.experiment_id}/runs?workflowType=machine_learning"
        if self.uri.startswith(("http://", "https://")):
            return f"{self.uri.rstrip('/')}/{path}"
        return f"http://127.0.0.1:5000/{path} (after `make ui`)"

    def start_run(self, name: str, tags: dict[str, str], parent_run_id: str | None = None) -> str:
        all_tags = {**standard_tags(), **{k: str(v)[:TAG_LIMIT] for k, v in tags.items()}}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        return run.info.run_id

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(run_id, tags=[RunTag(k, str(v)[:TAG_LIMIT]) for k, v in tags.items()])

    def end_run(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status=status)

    def log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i : i + 100])

    def log_metrics(
        self, run_id: str, metrics: dict[str, float], series: dict[str, list[tuple[int, float]]] | None = None
    ) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
        for name, points in (series or {}).items():
            items.extend(Metric(name, float(v), now, int(step)) for step, v in points)
        for i in range(0, len(items), 1000):
            self.client.log_batch(run_id, metrics=items[i : i + 1000])

    def log_artifacts(self, run_id: str, paths: Iterable[Path], artifact_path: str | None = None) -> None:
        for path in paths:
            if path.exists():
                self.client.log_artifact(run_id, str(path), artifact_path)

    def log_result(self, run_id: str, cfg: dict[str, Any], result: JobResult, job_dir: Path) -> None:
        """Everything a job produced: params, metrics, curves, tags, artifacts; then its final status."""
        self.log_params(run_id, flatten(cfg))
        self.log_metrics(run_id, result.metrics, series_points(cfg, result))
        tags = {f"env.{k}": v for k, v in result.environment.items()}
        # Scalars as tags; structured info (compile kwargs, precision flags, rounds) is in result.json.
        tags.update({f"info.{k}": v for k, v in result.info.items() if not isinstance(v, (dict, list))})
        if result.method:
            tags["mlflow.note.content"] = result.method
        if result.error:
            tags["error_type"], tags["error_message"] = result.error.type, result.error.message
        self.set_tags(run_id, tags)
        self.log_artifacts(
            run_id,
            [job_dir / name for name in ARTIFACT_FILES],
        )
        for folder in ("profile", "tlparse"):
            if (job_dir / folder).is_dir():
                self.client.log_artifacts(run_id, str(job_dir / folder), folder)
        self.end_run(run_id, result.status)

    # ------------------------------------------------------------------------------------- queries
    def runs(self, filter_string: str, max_results: int = 5000) -> list[Any]:
        return list(
            self.client.search_runs(
                [self.experiment_id], filter_string=filter_string, max_results=max_results
            )
        )

    def sweep_parent(self, sweep_id: str) -> Any | None:
        found = self.runs(f"tags.sweep_id = '{sweep_id}' and tags.sweep_parent = 'true'", max_results=1)
        return found[0] if found else None

    def sweep_children(self, sweep_id: str) -> list[Any]:
        return [
            r for r in self.runs(f"tags.sweep_id = '{sweep_id}'") if r.data.tags.get("sweep_parent") != "true"
        ]

    def finished_run_for(self, sweep_id: str, config_hash: str) -> Any | None:
        found = self.runs(
            f"tags.sweep_id = '{sweep_id}' and tags.config_hash = '{config_hash}' and attributes.status = '{FINISHED}'",
            max_results=1,
        )
        return found[0] if found else None


def series_points(cfg: dict[str, Any], result: JobResult) -> dict[str, list[tuple[int, float]]]:
    """Per-step curves keyed by training step: losses from step 0, step times from the first measured
    step (= warm-up steps)."""
    warmup = cfg["trainer"]["warmup_steps"]
    points: dict[str, list[tuple[int, float]]] = {}
    for name, values in result.series.items():
        offset = warmup if name.endswith("step_time_ms") else 0
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


__all__ = [
    "FAILED",
    "FINISHED",
    "IDENTITY_TAGS",
    "KILLED",
    "Tracker",
    "TrackingUnavailable",
    "flatten",
    "identity",
    "run_name",
]
