"""The :class:`Tracker`: one MLflow client for one tracking URI and experiment, returning the project's
own records (:class:`RunRecord`). An explicit `MlflowClient`, never mlflow's global "active run", so one
process can own many runs one after another."""

from __future__ import annotations

import contextlib
import getpass
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config.schema import MlflowConfig
from pipeline.provenance import PROJECT_ROOT, git_commit
from pipeline.redaction import redact_text, redact_uri
from pipeline.status import RUNNING
from pipeline.tracking.http import check_reachable
from pipeline.tracking.payload import TAG_LIMIT, RunPayload, redacted_copy
from pipeline.tracking.queries import SweepQueries
from pipeline.tracking.store import default_artifact_location, mlflow_client

# The experiment's type in MLflow 3's UI ("Machine learning": runs, not traces). Newer MLflow opens the
# page the browser's workflow switch names (GenAI at first), so the description says how to reach the runs.
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
DESCRIPTION_TAG = "mlflow.note.content"


def experiment_description(experiment_id: str) -> str:
    """The experiment's description (markdown), collapsed to its first line: how to reach the runs table."""
    runs = f"#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    return (
        f"**Runs: [open the runs table]({runs})**, or choose **Model training** at the top of the sidebar "
        "(once in a browser: until then MLflow opens experiments on its GenAI pages). torch.compile measured "
        "by compile-sweeps: one run per job, nested under its sweep's run, which holds the sweep's verdict and "
        "summary; each sweep prints the link to its own view (its runs ranked, the verdict and the intervals "
        'beside the figures), kept under "Views" at the runs table\'s top right.'
    )


class NoExperiment(LookupError):
    """A store opened for reading holds no experiment of that name (reading never creates one)."""


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


class Tracker(SweepQueries):
    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        artifact_location: str | None = None,
        *,
        read_only: bool = False,
    ):
        """`read_only`: for commands that only read: the store must exist, and nothing is probed for
        writing, set up or created, not even the experiment."""
        self.uri, self.experiment_name, self.read_only = tracking_uri, experiment, read_only
        self.artifact_location = artifact_location or default_artifact_location(tracking_uri)
        check_reachable(tracking_uri, read_only=read_only)
        with quiet_store_setup():
            self._client = mlflow_client(tracking_uri, read_only=read_only)
        self._experiment_id: str | None = None

    @classmethod
    def from_config(cls, mlflow_cfg: MlflowConfig) -> Tracker:
        return cls(mlflow_cfg.tracking_uri, mlflow_cfg.experiment, mlflow_cfg.artifact_location)

    @property
    def experiment_id(self) -> str:
        """Get or create the experiment; its type and description are set where it has none (a user's stay)."""
        if self._experiment_id is not None:
            return self._experiment_id
        exp = self._client.get_experiment_by_name(self.experiment_name)
        if exp is None and self.read_only:
            raise NoExperiment(f"experiment {self.experiment_name!r} is not in {redact_uri(self.uri)}")
        if exp is None:
            try:
                self._experiment_id = self._client.create_experiment(
                    self.experiment_name, artifact_location=self.artifact_location
                )
            except Exception:  # another process won the race
                exp = self._client.get_experiment_by_name(self.experiment_name)
                if exp is None:
                    raise
        tags: dict[str, str] = {}
        if exp is not None:
            self._experiment_id, tags = exp.experiment_id, dict(exp.tags)
        if self.read_only:
            return self._experiment_id
        key, kind = EXPERIMENT_KIND
        wanted = {key: kind, DESCRIPTION_TAG: experiment_description(self._experiment_id)}
        for name, value in wanted.items():
            if name not in tags:
                with contextlib.suppress(Exception):  # a read-only store: the runs matter, not this
                    self._client.set_experiment_tag(self._experiment_id, name, value)
        return self._experiment_id

    def runs_url(self, view_id: str | None = None) -> str:
        """Where the UI shows this experiment's runs table, in a saved view when given one (a sqlite store
        needs `make ui` first)."""
        query = f"viewStateShareKey={view_id}&" if view_id else ""
        path = f"#/experiments/{self.experiment_id}/runs?{query}workflowType=machine_learning"
        if self.uri.startswith(("http://", "https://")):
            return f"{redact_uri(self.uri).rstrip('/')}/{path}"
        served = f"sqlite:///{PROJECT_ROOT / 'outputs' / 'mlflow.db'}"  # the store `make ui` serves
        ui = "make ui" if self.uri == served else f"make ui UI_STORE={redact_uri(self.uri)}"
        return f"http://127.0.0.1:5000/{path} (after `{ui}`)"

    def experiment_tags(self) -> dict[str, str]:
        return dict(self._client.get_experiment(self.experiment_id).tags)

    def set_experiment_tag(self, key: str, value: str) -> None:
        self._client.set_experiment_tag(self.experiment_id, key, value)

    def delete_experiment_tag(self, key: str) -> None:
        self._client.delete_experiment_tag(self.experiment_id, key)

    # ------------------------------------------------------------------------------------- writing
    # Every name and tag value goes through redact_text: whatever a caller puts in, secrets stay out.
    def start_run(self, name: str, tags: dict[str, str], parent_run_id: str | None = None) -> str:
        all_tags = {**standard_tags(), **{k: redact_text(str(v))[:TAG_LIMIT] for k, v in tags.items()}}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self._client.create_run(self.experiment_id, run_name=redact_text(name), tags=all_tags)
        return run.info.run_id

    def set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._client.log_batch(
            run_id, tags=[RunTag(k, redact_text(str(v))[:TAG_LIMIT]) for k, v in tags.items()]
        )

    def delete_tags(self, run_id: str, keys: Iterable[str]) -> None:
        run = self._client.get_run(run_id)
        for key in keys:
            if key in run.data.tags:
                self._client.delete_tag(run_id, key)

    def end_run(self, run_id: str, status: str) -> None:
        self._client.set_terminated(run_id, status=status)

    def close_run(self, run_id: str, status: str, *, error_type: str, message: str) -> None:
        """End a run with the reason it ended so (`error_type`, `error_message` tags)."""
        self.set_tags(run_id, {"error_type": error_type, "error_message": message})
        self.end_run(run_id, status)

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

    def log_artifacts(
        self,
        run_id: str,
        paths: Iterable[Path],
        artifact_path: str | None = None,
        *,
        secrets: Iterable[str] = (),
    ) -> None:
        """Files (those that exist) and whole folders, under `artifact_path`. Text files go up as
        redacted copies (`secrets`: values to mask wherever they appear)."""
        secrets = list(secrets)
        with tempfile.TemporaryDirectory(prefix="pipeline-artifacts-") as scratch:
            for path in paths:
                if path.is_dir():
                    self._client.log_artifacts(run_id, str(path), artifact_path or path.name)
                elif path.exists():
                    upload = redacted_copy(path, Path(scratch), secrets)
                    self._client.log_artifact(run_id, str(upload), artifact_path)

    def log_payload(self, run_id: str, payload: RunPayload, *, completing: bool = False) -> None:
        """Everything a job produced, then its final status. `completing`: the run may hold part of it
        already (an earlier attempt failed midway); what it has is not logged again."""
        self.log_params(run_id, payload.params)
        metrics, series = payload.metrics, payload.series
        if completing:
            metrics, series = self._not_yet_logged(run_id, metrics, series)
            if not payload.failed:  # the reason an earlier attempt closed it with no longer holds
                self.clear_error(run_id)
        self.log_metrics(run_id, metrics, series)
        self.set_tags(run_id, payload.tags)
        self.log_artifacts(run_id, payload.files, secrets=payload.secrets)
        self.log_artifacts(run_id, [folder for folder in payload.folders if folder.is_dir()])
        self.end_run(run_id, payload.status)

    def clear_error(self, run_id: str) -> None:
        """Drop the `error_type` / `error_message` tags of a run completed after all."""
        self.delete_tags(run_id, ("error_type", "error_message"))

    def _not_yet_logged(
        self, run_id: str, metrics: dict[str, float], series: dict[str, list[tuple[int, float]]]
    ) -> tuple[dict[str, float], dict[str, list[tuple[int, float]]]]:
        """The scalars the run lacks, and the curve points (by step) it lacks."""
        run = self.get_run(run_id)
        have = run.metrics if run is not None else {}
        missing_series = {}
        for name, points in series.items():
            steps = {m.step for m in self._client.get_metric_history(run_id, name)} if name in have else set()
            missing_series[name] = [(step, v) for step, v in points if step not in steps]
        return {k: v for k, v in metrics.items() if k not in have}, missing_series

    # ------------------------------------------------------------------------------------- reading
    def read_json_artifact(self, run_id: str, path: str) -> dict[str, Any] | None:
        """A JSON artifact of a run (e.g. run_info.json), or None when it is not there."""
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
        try:
            experiment_id = self.experiment_id
        except NoExperiment:  # read only, and the store has no such experiment: none of its runs
            return []
        found = self._client.search_runs(
            [experiment_id], filter_string=filter_string, max_results=max_results
        )
        return [_record(run) for run in found]


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


# MLflow's INFO lines as it sets up or migrates a sqlite store: nothing a user acts on.
STORE_SETUP_LOGGERS = ("mlflow.store.db.utils", "alembic.runtime.migration")


@contextlib.contextmanager
def quiet_store_setup() -> Iterator[None]:
    """MLflow's store set-up without its INFO lines, unless the user sets MLFLOW_LOGGING_LEVEL."""
    names = () if os.environ.get("MLFLOW_LOGGING_LEVEL") else STORE_SETUP_LOGGERS
    levels = {logger: logger.level for logger in map(logging.getLogger, names)}
    for logger in levels:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in levels.items():
            logger.setLevel(level)


def standard_tags() -> dict[str, str]:
    """MLflow's own provenance tags (the UI's "Created by", "Source", git commit)."""
    tags = {"mlflow.source.name": "pipeline.run", "mlflow.source.type": "LOCAL"}
    with contextlib.suppress(KeyError, OSError):  # no user name for this uid
        tags["mlflow.user"] = getpass.getuser()
    if commit := git_commit():
        tags["mlflow.source.git.commit"] = commit
    return tags
