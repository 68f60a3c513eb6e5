"""The result file: one JSON file per job, written atomically, that a worker hands its parent (or the
parent makes, when the worker could not) and `report --sync` uploads later; it says whether MLflow has it."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.display import first_few
from pipeline.jobdir import RESULT, JobDir
from pipeline.provenance import sync_command
from pipeline.status import FAILED, KILLED, SKIPPED


class UnreadableResult(ValueError):
    """A result file that is not a job's result: cut off, not JSON, or JSON of another shape."""


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "true/false", type(None): "null"}.get(
        type(value), "number"
    )


@dataclass
class JobError:
    type: str  # e.g. OutOfMemoryError, Timeout, WorkerCrashed, GraphBreakInFullgraph, ConfigError
    message: str  # one line, shown to the user and set as the `error_message` tag
    traceback: str = ""


@dataclass
class JobResult:
    status: str = FAILED
    metrics: dict[str, float] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)  # per-step curves
    environment: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # effective settings, compile kwargs, notes
    diagnostics: dict[str, Any] = field(default_factory=dict)  # graph-break reasons, syncs, ...
    method: str = ""  # how it was measured, in words
    work: dict[str, Any] = field(default_factory=dict)  # what one unit did (pipeline.measure.objective.Work)
    error: JobError | None = None
    mlflow_run_id: str | None = None
    mlflow_synced: bool = False

    def fail(self, status: str, error_type: str, message: str, tb: str = "") -> None:
        self.status = status
        self.error = JobError(error_type, one_line(message), tb)

    def write(self, path: str | Path) -> None:
        """Atomically: the whole file or, when it cannot be written (a full disk), no file at all (the
        temp file is removed; an earlier result there stays as it was) and the OSError. Unmeasured (None,
        NaN) metrics are left out, but a NaN or infinite loss stays."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data["metrics"] = {
            k: v
            for k, v in self.metrics.items()
            if v is not None and (k.startswith("loss/") or not (isinstance(v, float) and math.isnan(v)))
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".result-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(data, indent=1, default=str, allow_nan=True))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @classmethod
    def read(cls, path: str | Path) -> JobResult:
        """The result in the file; :class:`UnreadableResult` (a ValueError) saying what is wrong with a
        file that is not one; OSError where it cannot be read."""
        text = Path(path).read_text()
        try:
            data = json.loads(text)
        except ValueError as exc:
            what = "empty" if not text.strip() else f"not JSON, cut off or damaged ({exc})"
            raise UnreadableResult(what) from exc
        if not isinstance(data, dict):
            raise UnreadableResult(f"JSON {_json_kind(data)}, not a job's result (an object with a `status`)")
        if not isinstance(data.get("status"), str) or not data["status"]:
            raise UnreadableResult("an object without a `status`: not a job's result")
        known = {f.name: f for f in fields(cls)}
        for name in ("metrics", "series", "environment", "info", "diagnostics", "work"):
            if name in data and not isinstance(data[name], dict):
                raise UnreadableResult(f"its `{name}` is JSON {_json_kind(data[name])}, not an object")
        error = data.get("error")
        if error is not None and not (
            isinstance(error, dict) and isinstance(error.get("type"), str) and "message" in error
        ):
            raise UnreadableResult("its `error` is not an object with a `type` and a `message`")
        result = cls(**{k: v for k, v in data.items() if k in known and k != "error"})
        if error:
            result.error = JobError(error["type"], str(error["message"]), str(error.get("traceback", "")))
        return result


def one_line(message: str, limit: int = 500) -> str:
    """The first meaningful line of an error message, bounded in length."""
    text = next((ln.strip() for ln in str(message).splitlines() if ln.strip()), "(no message)")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def recorded_run_id(job_dir: Path) -> str | None:
    try:
        return JobDir(job_dir).run_id.read_text().strip() or None
    except OSError:
        return None


def unsynced_results(folder: Path) -> list[Path]:
    """Result files in this folder or the job folders under it (two levels) that MLflow does not have
    yet, or that cannot be read: none may be overwritten or deleted before `--sync` uploads it."""
    found = []
    for path in [folder / RESULT, *folder.glob(f"*/{RESULT}"), *folder.glob(f"*/*/{RESULT}")]:
        try:
            if not path.is_file() or JobResult.read(path).mlflow_synced:
                continue
        except (OSError, ValueError, TypeError):
            pass  # unreadable: not known to be in MLflow
        found.append(path)
    return found


def refuse_overwrite(key: str, folder: Path, results: list[Path]) -> str:
    """The line that refuses to run where results MLflow never got would be overwritten."""
    kept = first_few([str(p) for p in results], most=1)
    return (
        f"{key}={str(folder)!r} holds job results MLflow never got ({kept}): upload them first "
        f"(`{sync_command([folder])}`), or pick another folder"
    )


def write_skipped(path: Path, run_id: str, job_num: int | None) -> None:
    """A resumed sweep's job whose configuration already FINISHED there: a result naming that run, which
    the sweep counts done; a resumption in the same folder keeps the earlier result."""
    if not path.exists():
        JobResult(SKIPPED, info={"job_num": job_num}, mlflow_run_id=run_id, mlflow_synced=True).write(path)


def write_timeout(path: str | Path, message: str, **info: Any) -> None:
    """The lifeline's backstop result: the job's parent did not stop this process at trainer.timeout_s."""
    result = JobResult(info=info)
    result.fail(KILLED, "Timeout", message)
    result.write(path)
