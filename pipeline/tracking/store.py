"""A sqlite store: its folder and file checked writable in milliseconds, its set-up (tables created or
migrated) by one process at a time under a lock beside it, and its repair when an earlier first use
was cut off halfway."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class TrackingUnavailable(RuntimeError):
    """The MLflow store cannot be reached or written."""


def default_artifact_location(tracking_uri: str) -> str | None:
    """Beside a sqlite store: `<store dir>/mlartifacts` (absolute). A server decides on its own."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///") :])
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


def sqlite_path(tracking_uri: str) -> Path:
    return Path(tracking_uri[len("sqlite:///") :])


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every sqlite database file


def check_sqlite_writable(tracking_uri: str) -> None:
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
        header = b""
        if db.exists():
            with open(db, "r+b") as f:
                header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        where = exc.filename or db.parent
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: cannot write {where} ({exc.strerror or exc})"
        ) from exc
    if header and header != SQLITE_HEADER:
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: {db} is not a sqlite database (it does not start with "
            "SQLite's header): point mlflow.tracking_uri at an MLflow store, or move the file aside"
        )


def mlflow_client(tracking_uri: str) -> Any:
    """An MlflowClient. A sqlite store is set up (tables created or migrated) by one process at a time:
    MLflow's own set-up is not safe when several processes open a new file at once (12 jobs started
    together left it half-migrated for good), so it runs under a lock beside the file."""
    from mlflow.tracking import MlflowClient

    if not tracking_uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=tracking_uri)
    _quiet_database_errors()
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
    """Whether the store may hold runs: a file that is not a sqlite database may hold anything."""
    try:
        with open(db, "rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError:
        return True
    if header and header != SQLITE_HEADER:
        return True
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return bool(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    except sqlite3.OperationalError:  # no runs table: nothing was ever logged
        return False
    except sqlite3.Error:  # damaged: it may hold runs
        return True


def _set_aside(db: Path) -> Path:
    """Copy the store to `<db>.broken-<time>`, then empty it in place (the same file: connections this
    process already holds keep working, and MLflow sets it up afresh)."""
    aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        with contextlib.closing(sqlite3.connect(db)) as conn:  # rolls back a hot journal first
            with contextlib.closing(sqlite3.connect(aside)) as copy:
                conn.backup(copy)
            tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            conn.execute("PRAGMA foreign_keys = OFF")
            for table in tables:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            conn.commit()
    except sqlite3.Error:  # no copy kept of what could not be copied (never an empty `.broken-*`)
        aside.unlink(missing_ok=True)
        raise
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


def describe_store_error(exc: BaseException, tracking_uri: str = "") -> str:
    """One line for an error a store raised: for sqlite the database's own error (`(sqlite3.OperationalError)
    attempt to write a readonly database`), which SQLAlchemy wraps in an autoflush or rollback notice,
    and whether the store's file is still there; else the first line of the message."""
    line = _sqlite_cause(str(exc))
    if line is None:
        lines = [text.strip() for text in str(exc).strip().splitlines() if text.strip()]
        return (lines[0] if lines else type(exc).__name__)[:500]
    if tracking_uri.startswith("sqlite:///") and not sqlite_path(tracking_uri).exists():
        line += f"; {sqlite_path(tracking_uri)} no longer exists (deleted while the job ran?)"
    return line


def _sqlite_cause(text: str) -> str | None:
    for line in text.splitlines():
        start = line.find("(sqlite3.")
        if start >= 0:
            return line[start:].split(" [SQL:", 1)[0].split(" (Background on", 1)[0].strip()[:300]
    return None


class _OneLineDatabaseErrors(logging.Filter):
    """MLflow logs every SQLAlchemy error with its whole traceback before raising it (which the job
    says in one line): the log keeps the database's own error, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info or "\n" in str(record.msg):
            cause = _sqlite_cause(record.getMessage()) or record.getMessage().strip().splitlines()[0]
            record.msg, record.args, record.exc_info, record.exc_text = cause, None, None, None
        return True


def _quiet_database_errors() -> None:
    logger = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(f, _OneLineDatabaseErrors) for f in logger.filters):
        logger.addFilter(_OneLineDatabaseErrors())
