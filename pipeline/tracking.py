"""The only module that talks to MLflow. Callers get the project's own records (:class:`RunRecord`),
never MLflow's objects, and never reach for the client.

Runs are handled through an explicit `MlflowClient` (never mlflow's global "active run"), so one
process can own many runs one after another (Hydra's basic launcher) and a crash of a worker never
leaves a run half-logged: the parent logs from the result file.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import getpass
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config.schema import Config, MlflowConfig, to_dict
from pipeline.job.outcome import outcome_tags, run_description
from pipeline.job.result import JobResult
from pipeline.provenance import git_commit
from pipeline.redaction import redact_text, redact_uri, redacted, scrub, secret_values
from pipeline.status import FINISHED, RUNNING

# MLflow's telemetry thread edits os.environ from a background thread while HTTP requests read it (an
# intermittent "_MLFLOW_TELEMETRY_SESSION_ID" failure on closed networks); this project sends none.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow prints "View run ... at: <tracking URI>" when a run ends, a password in the URI included; the
# project prints its own (redacted) link.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# A store outage must not hold a job (and its GPU allocation) for minutes: MLflow's own defaults retry
# each HTTP request for about 4 minutes (7 retries, backoff factor 2, 120 s timeout). These bound it
# to seconds (3 retries at 1, 2, 4 s, a 30 s timeout per attempt); settings in the environment win.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
for _name, _value in HTTP_RETRY_DEFAULTS.items():
    os.environ.setdefault(_name, _value)

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
# Artifacts uploaded as redacted copies (names, values of secret-looking keys, URI passwords masked).
TEXT_SUFFIXES = (".yaml", ".json", ".csv", ".log", ".txt", ".md")


class TrackingUnavailable(RuntimeError):
    """The MLflow store cannot be reached or written."""


def retry_bound(tracking_uri: str) -> str:
    """How long an HTTP store is retried before a job gives up, as its error line says it."""
    if not tracking_uri.startswith(("http://", "https://")):
        return ""
    settings = ", ".join(f"{name}={os.environ[name]}" for name in HTTP_RETRY_DEFAULTS)
    return f"retries bounded by {settings}"


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
        self._client = mlflow_client(tracking_uri)
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
        """Remove these tags where the run has them."""
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
        redacted copies (`secrets`: values to mask wherever they appear, e.g. in a traceback)."""
        secrets = list(secrets)
        with tempfile.TemporaryDirectory(prefix="pipeline-artifacts-") as scratch:
            for path in paths:
                if path.is_dir():
                    self._client.log_artifacts(run_id, str(path), artifact_path or path.name)
                elif path.exists():
                    upload = _redacted_copy(path, Path(scratch), secrets)
                    self._client.log_artifact(run_id, str(upload), artifact_path)

    def log_result(
        self, run_id: str, cfg: Config, result: JobResult, job_dir: Path, *, completing: bool = False
    ) -> None:
        """Everything a job produced: params, metrics, curves, tags, artifacts; then its final status.
        `completing`: the run may hold part of it already (an earlier attempt failed midway); metrics
        and curve points it has are not logged again, so no history is doubled."""
        self.log_params(run_id, flatten(to_dict(cfg)))
        metrics, series = result.metrics, series_points(cfg, result)
        if completing:
            metrics, series = self._not_yet_logged(run_id, metrics, series)
            if result.error is None:  # the reason an earlier attempt closed it with no longer holds
                self.clear_error(run_id)
        self.log_metrics(run_id, metrics, series)
        # A few tags to filter on; the environment and the job's internals are in run_info.json.
        secrets = secret_values(to_dict(cfg))
        tags = {**outcome_tags(result), "mlflow.note.content": scrub(run_description(result), secrets)}
        if result.error:
            tags["error_message"] = scrub(result.error.message, secrets)
        self.set_tags(run_id, tags)
        self.log_artifacts(run_id, [job_dir / name for name in ARTIFACT_FILES], secrets=secrets)
        self.log_artifacts(run_id, [job_dir / name for name in ARTIFACT_FOLDERS if (job_dir / name).is_dir()])
        self.end_run(run_id, result.status)

    def clear_error(self, run_id: str) -> None:
        """Drop the `error_type` / `error_message` tags of a run completed after all."""
        run = self.get_run(run_id)
        for key in ("error_type", "error_message"):
            if run is not None and key in run.tags:
                self._client.delete_tag(run_id, key)

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

    def runs_where(
        self, tags: dict[str, str], *, status: str | None = None, max_results: int = 5000
    ) -> list[RunRecord]:
        """Runs whose tags equal these values (and with this status), newest first. Every value is
        quoted for MLflow's filter grammar; one the grammar cannot hold is matched after the search."""
        wanted = {f"tags.{k}": v for k, v in tags.items()}
        if status is not None:
            wanted["attributes.status"] = status
        clauses = [_equals(field, value) for field, value in wanted.items()]
        exact = all(clauses)
        found = self.runs(" and ".join(c for c in clauses if c), max_results if exact else 50000)
        matching = [
            r
            for r in found
            if all(r.tags.get(k) == v for k, v in tags.items()) and status in (None, r.status)
        ]
        return matching[:max_results]

    def sweep_parent(self, sweep_id: str) -> RunRecord | None:
        found = self.runs_where({"sweep_id": sweep_id, "sweep_parent": "true"}, max_results=1)
        return found[0] if found else None

    def sweep_parents(self) -> list[RunRecord]:
        return self.runs("tags.sweep_parent = 'true'")

    def sweep_children(self, sweep_id: str) -> list[RunRecord]:
        return [r for r in self.runs_where({"sweep_id": sweep_id}) if r.tags.get("sweep_parent") != "true"]

    def finished_run_for(self, sweep_id: str, config_hash: str) -> RunRecord | None:
        found = self.runs_where(
            {"sweep_id": sweep_id, "config_hash": config_hash}, status=FINISHED, max_results=1
        )
        return found[0] if found else None

    def job_run(self, job_dir: Path) -> RunRecord | None:
        """The newest run of the job that ran in `job_dir` (its `job_dir` tag)."""
        found = self.runs_where({"job_dir": str(job_dir)}, max_results=1)
        return found[0] if found else None


def _equals(field: str, value: str) -> str | None:
    """`field = 'value'` as MLflow's filter grammar reads it back; a value holding `'` is put in double
    quotes. None where the grammar cannot hold the value (both quotes, or a backslash, which its
    tokenizer takes as an escape that MLflow never undoes)."""
    if "\\" in value or ("'" in value and '"' in value):
        return None
    quote = '"' if "'" in value else "'"
    return f"{field} = {quote}{value}{quote}"


def _redacted_copy(path: Path, scratch: Path, secrets: list[str]) -> Path:
    """A text file as it may leave the machine (same name, under `scratch`); other files as they are."""
    if path.suffix not in TEXT_SUFFIXES:
        return path
    copy = scratch / path.name
    copy.write_text(scrub(path.read_text(errors="replace"), secrets))
    return copy


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
    """Fail fast, in one line naming `mlflow.tracking_uri`, when the store cannot be used: a sqlite file
    that cannot be written (a read-only directory fails here in milliseconds, where MLflow would retry
    its engine for two minutes), or a server that does not answer its health check."""
    if tracking_uri.startswith("sqlite:///"):
        _check_sqlite_writable(tracking_uri)
    elif tracking_uri.startswith(("http://", "https://")):
        _check_health(tracking_uri, timeout_s)


def sqlite_path(tracking_uri: str) -> Path:
    return Path(tracking_uri[len("sqlite:///") :])


def _check_sqlite_writable(tracking_uri: str) -> None:
    db = sqlite_path(tracking_uri)
    if not db.is_absolute():
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: use an absolute sqlite path (sqlite:////abs/path.db)"
        )
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        # sqlite writes its journal beside the file: the folder must take new files, the file writes.
        with tempfile.NamedTemporaryFile(dir=db.parent, prefix=f".{db.name}.probe-"):
            pass
        if db.exists():
            with open(db, "r+b"):
                pass
    except OSError as exc:
        where = exc.filename or db.parent
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: cannot write {where} ({exc.strerror or exc})"
        ) from exc


def _check_health(tracking_uri: str, timeout_s: float) -> None:
    shown = redact_uri(tracking_uri)
    try:
        with urllib.request.urlopen(_health_request(tracking_uri), timeout=timeout_s) as response:
            if response.status != 200:
                raise TrackingUnavailable(f"MLflow server at {shown} answered {response.status} on /health")
    except (TimeoutError, OSError, ValueError) as exc:
        reason = redact_text(str(exc))
        raise TrackingUnavailable(
            f"MLflow server at {shown} is not reachable ({reason}); start one with `make mlflow-server` or set mlflow.tracking_uri"
        ) from exc


def _health_request(tracking_uri: str) -> urllib.request.Request:
    """GET <server>/health; credentials in the URI (`http://user:pw@host:port`, which MLflow's client
    accepts) go in a basic Authorization header, as MLflow's client sends them."""
    parts = urllib.parse.urlsplit(tracking_uri)
    host = parts.netloc.rpartition("@")[2]
    url = urllib.parse.urlunsplit(parts._replace(netloc=host)).rstrip("/") + "/health"
    request = urllib.request.Request(url)
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request


# ------------------------------------------------------------------------------------- sqlite set-up
def mlflow_client(tracking_uri: str) -> Any:
    """An MlflowClient. A sqlite store is set up (tables created or migrated) by one process at a time:
    MLflow's own set-up is not safe when several processes open a new file at once (12 jobs started
    together left it half-migrated for good), so it runs under a lock beside the file."""
    from mlflow.tracking import MlflowClient

    if not tracking_uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=tracking_uri)
    db = sqlite_path(tracking_uri)
    db.parent.mkdir(parents=True, exist_ok=True)  # as MLflow would
    with _locked(db.with_name(db.name + ".lock")):
        try:
            return _opened(tracking_uri)
        except Exception as first:  # a store an earlier first use left half set up?
            _repair(tracking_uri, db, first)
        try:
            return _opened(tracking_uri)
        except Exception as exc:
            raise TrackingUnavailable(
                f"mlflow.tracking_uri={tracking_uri!r}: cannot open the store ({type(exc).__name__}: {_error_line(str(exc))})"
            ) from exc


def _opened(tracking_uri: str) -> Any:
    """A client whose store is set up: MLflow creates or checks the schema on its first request."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    client.search_experiments(max_results=1)
    return client


@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    """An exclusive advisory lock (flock) on `lock_file`, released when the block ends. Where the lock
    cannot be had (a filesystem without locks), the block runs unlocked, as MLflow alone would."""
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(open(lock_file, "a"))
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            pass
        yield


def _repair(tracking_uri: str, db: Path, cause: Exception) -> None:
    """Finish a set-up that an earlier process left halfway (killed, or raced before this lock): drop
    alembic's leftover scratch tables and migrate to MLflow's schema, as `mlflow db upgrade` does. If
    that fails, a store that holds no runs yet is moved aside and set up afresh; one that holds runs
    is refused in one line saying what to do."""
    revision, scratch = _schema_state(db)
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            for table in scratch:
                conn.execute(f'DROP TABLE "{table}"')
            conn.commit()
        upgrade = subprocess.run(
            [sys.executable, "-m", "mlflow", "db", "upgrade", tracking_uri],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if upgrade.returncode == 0:
            return
        failure = _error_line(upgrade.stderr or upgrade.stdout)
    except (OSError, sqlite3.Error, subprocess.SubprocessError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
    if _holds_runs(db):
        leftovers = f", leftover {', '.join(scratch)}" if scratch else ""
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: the store is half set up (schema revision "
            f"{revision or 'none'}{leftovers}) and could not be repaired ({failure}; first error: "
            f"{_error_line(str(cause))}); keep a copy, then try `mlflow db upgrade {tracking_uri}`, or "
            f"move it aside (mv {db} {db}.broken) and run again"
        ) from cause
    aside = _set_aside(db)
    print(
        f"mlflow: {db} was half set up (schema revision {revision or 'none'}) and held no runs: set up afresh, the old file kept as {aside}",
        file=sys.stderr,
        flush=True,
    )


def _holds_runs(db: Path) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return bool(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    except sqlite3.Error:  # no runs table: nothing was ever logged
        return False


def _set_aside(db: Path) -> Path:
    """Copy the store to `<db>.broken-<time>`, then empty it in place (the same file: connections this
    process already holds keep working, and MLflow sets it up afresh)."""
    aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    with contextlib.closing(sqlite3.connect(db)) as conn:  # rolls back a hot journal first
        with contextlib.closing(sqlite3.connect(aside)) as copy:
            conn.backup(copy)
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        conn.execute("PRAGMA foreign_keys = OFF")
        for table in tables:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        conn.commit()
    return aside


def _schema_state(db: Path) -> tuple[str | None, list[str]]:
    """The store's alembic revision and alembic's leftover scratch tables (`_alembic_tmp_*`)."""
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            revision = None
            if "alembic_version" in tables:
                row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
                revision = row[0] if row else None
    except sqlite3.Error:
        return None, []
    return revision, [t for t in tables if t.startswith("_alembic_tmp_")]


def _error_line(text: str) -> str:
    """The line of a (possibly multi-line) error text that names the error."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line.split(":", 1)[0]]
    return (named or lines or ["no message"])[-1][:300]
