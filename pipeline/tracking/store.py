"""A sqlite store: checked usable up front, set up by one process at a time under a lock, waited for
(bounded) while another process holds it locked, and repaired on a copy when a first use was cut off.
Nothing here drops a table of, empties or deletes a store it did not create: every operation that could
lose data takes an :class:`OwnFile` (`tests/test_store.py` holds the module to that)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib
import logging
import math
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class TrackingUnavailable(RuntimeError):
    """The MLflow store cannot be reached or written."""


def default_artifact_location(tracking_uri: str) -> str | None:
    """Beside a sqlite store: `<store dir>/mlartifacts` (absolute). A server decides on its own."""
    if tracking_uri.startswith("sqlite:///"):
        return (sqlite_path(tracking_uri).parent / "mlartifacts").resolve().as_uri()
    return None


def sqlite_path(tracking_uri: str) -> Path:
    return Path(tracking_uri[len("sqlite:///") :])


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every sqlite database file


# The wait for a store another process holds locked (MLflow's own connections give up after 5 s).
STORE_WAIT_S = 60.0
STORE_WAIT_ENV = "PIPELINE_STORE_WAIT_S"
# The jobs of a sweep write for milliseconds at a time: a lock that outlasts this is said on the terminal.
QUIET_WAIT_S = 2.0
_LOCKED = re.compile(r"database (table |schema )?is locked", re.IGNORECASE)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class StoreLocked(TrackingUnavailable):
    """Another process held the sqlite store locked for longer than this one waits."""


def store_wait_s() -> float:
    raw = os.environ.get(STORE_WAIT_ENV, "").strip()
    if not raw:
        return STORE_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise TrackingUnavailable(f"{STORE_WAIT_ENV}={raw!r} is not allowed: a number of seconds, 0 or more")
    return value


def check_sqlite(tracking_uri: str, *, write: bool = True) -> None:
    """A sqlite store this process can use (absolute, writable where `write`, a sqlite file, not held
    locked past the wait), or one line saying why. Reading never probes for writing or makes a store."""
    db = sqlite_path(tracking_uri)
    if not db.is_absolute():
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: use an absolute sqlite path (sqlite:////abs/path.db)"
        )
    try:
        if write:
            db.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=db.parent, prefix=f".{db.name}.probe-"):
                pass
            if db.exists() and not os.access(db, os.W_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(db))
        elif not db.exists():
            raise TrackingUnavailable(
                f"mlflow.tracking_uri={tracking_uri!r}: there is no store at {db} (nothing was logged there)"
            )
        header = b""
        if db.exists():
            with open(db, "rb") as f:
                header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        where = exc.filename or db.parent
        doing = "write" if write else "read"
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: cannot {doing} {where} ({exc.strerror or exc})"
        ) from exc
    if header and header != SQLITE_HEADER:
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: {db} is not a sqlite database (it does not start with "
            "SQLite's header): point mlflow.tracking_uri at an MLflow store, or move the file aside"
        )
    wait_for_store(tracking_uri, write=write)


def wait_for_store(tracking_uri: str, *, write: bool, deadline: float | None = None) -> None:
    """Return once no other process holds the store locked against this use: quietly for QUIET_WAIT_S,
    then saying so, up to `store_wait_s()` (or `deadline`, monotonic); then :class:`StoreLocked`."""
    db = sqlite_path(tracking_uri)
    if not db.exists():
        return
    wait = store_wait_s()
    started = time.monotonic()
    deadline = started + wait if deadline is None else deadline
    if _free(db, write=write, timeout=max(0.0, min(QUIET_WAIT_S, deadline - started))):
        return
    if deadline - time.monotonic() > 0:
        _say(
            f"mlflow: {db} is locked by another process (a long query, a backup, another tool's transaction): "
            f"waiting up to {max(0.0, deadline - started):.0f} s for it ({STORE_WAIT_ENV})"
        )
        if _free(db, write=write, timeout=max(0.0, deadline - time.monotonic())):
            _say(f"mlflow: {db} is free again after {time.monotonic() - started:.0f} s")
            return
    raise StoreLocked(locked_line(tracking_uri, time.monotonic() - started))


def locked_line(tracking_uri: str, waited_s: float) -> str:
    db = sqlite_path(tracking_uri)
    return (
        f"mlflow.tracking_uri={tracking_uri!r}: {db} is locked by another process and stayed locked for "
        f"{waited_s:.0f} s ({STORE_WAIT_ENV}={store_wait_s():g}): nothing was started and nothing in the store "
        f"was changed; run again once that process lets go of it (`{shlex.join(['fuser', str(db)])}` names it)"
    )


def is_locked_error(exc: BaseException) -> bool:
    """Whether an error (or one it wraps: SQLAlchemy's, MLflow's) is sqlite's lock timeout."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if _LOCKED.search(str(error)):
            return True
        error = getattr(error, "orig", None) or error.__cause__ or error.__context__
    return False


def _free(db: Path, *, write: bool, timeout: float) -> bool:
    """Whether the store takes this use within `timeout` s (a write transaction begun and rolled back,
    or a read of its schema). An error other than a lock: not locked."""
    try:
        with _connect(db, "rw" if write else "ro", timeout, isolation_level=None) as conn:
            if write:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            else:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return not is_locked_error(exc)
    return True


def _connect(db: Path, mode: str, timeout: float, **kwargs: Any) -> contextlib.closing[sqlite3.Connection]:
    """A connection to the file, `ro` (never written) or `rw` (never created), closed after the block."""
    uri = f"file:{urllib.parse.quote(str(db))}?mode={mode}"
    return contextlib.closing(sqlite3.connect(uri, uri=True, timeout=timeout, **kwargs))


def mlflow_client(tracking_uri: str, *, read_only: bool = False) -> Any:
    """An MlflowClient. A sqlite store is set up under a lock beside the file (MLflow's set-up is not
    safe when several processes open a new file at once). `read_only`: an existing store, never set up,
    repaired or written."""
    from mlflow.tracking import MlflowClient

    if not tracking_uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=tracking_uri)
    logging.getLogger("mlflow.store.db.utils").addFilter(_one_line_database_errors)  # added once
    db = sqlite_path(tracking_uri)
    deadline = time.monotonic() + store_wait_s()
    if read_only:
        return _opened_for_reading(tracking_uri, deadline)
    db.parent.mkdir(parents=True, exist_ok=True)  # as MLflow would
    wait_for_store(tracking_uri, write=True, deadline=deadline)  # said on the terminal if it lasts
    with _locked(db.with_name(db.name + ".lock")):
        try:
            return _opened_waiting(tracking_uri, deadline)
        except StoreLocked:
            raise
        except Exception as first:  # a store an earlier first use left half set up?
            state = read_state(tracking_uri, deadline)
            if not state.half_set_up:
                raise TrackingUnavailable(_cannot(tracking_uri, "open", first)) from first
            _repair(tracking_uri, state, first)
        try:
            return _opened(tracking_uri)
        except Exception as exc:
            raise TrackingUnavailable(_cannot(tracking_uri, "open", exc)) from exc


def _cannot(tracking_uri: str, doing: str, exc: BaseException) -> str:
    """One line for a store that cannot be opened (nothing in it was changed) or read."""
    changed = "; nothing in it was changed" if doing == "open" else ""
    return (
        f"mlflow.tracking_uri={tracking_uri!r}: cannot {doing} the store ({type(exc).__name__}: "
        f"{_error_line(str(exc))}){changed}"
    )


def _opened(tracking_uri: str) -> Any:
    """A client whose store is set up: MLflow creates or checks the schema on its first request."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    client.search_experiments(max_results=1)
    return client


def _opened_waiting(tracking_uri: str, deadline: float, *, write: bool = True) -> Any:
    """`_opened`, waiting again (up to `deadline`) where another process's lock is what failed it."""
    while True:
        try:
            return _opened(tracking_uri)
        except Exception as exc:
            if not is_locked_error(exc):
                raise
            if time.monotonic() >= deadline:
                raise StoreLocked(locked_line(tracking_uri, store_wait_s())) from exc
            wait_for_store(tracking_uri, write=write, deadline=deadline)


def _opened_for_reading(tracking_uri: str, deadline: float) -> Any:
    """A client of an existing store holding MLflow's tables; nothing is set up or written."""
    check_sqlite(tracking_uri, write=False)
    if not read_state(tracking_uri, deadline).tables:  # MLflow would create its tables in it
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: {sqlite_path(tracking_uri)} holds no MLflow store yet"
        )
    try:
        return _opened_waiting(tracking_uri, deadline, write=False)
    except StoreLocked:
        raise
    except Exception as exc:
        raise TrackingUnavailable(_cannot(tracking_uri, "read", exc)) from exc


@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    """An exclusive flock on `lock_file` for the block; unlocked where the filesystem has no locks."""
    with contextlib.ExitStack() as stack:
        with contextlib.suppress(OSError):
            fcntl.flock(stack.enter_context(open(lock_file, "a")), fcntl.LOCK_EX)
        yield


# ----------------------------------------------------------------------------- what the store holds
SCRATCH_PREFIX = "_alembic_tmp_"  # alembic's copy of a table while a batch migration rebuilds it


@dataclass(frozen=True)
class StoreState:
    """What a store holds, as read (never guessed from an error); runs include alembic's copy's."""

    tables: tuple[str, ...]
    revision: str | None
    runs: int

    @property
    def scratch(self) -> list[str]:
        return [t for t in self.tables if t.startswith(SCRATCH_PREFIX)]

    @property
    def half_set_up(self) -> bool:
        """Tables short of MLflow's schema, or alembic's scratch tables left: a first use cut off."""
        from mlflow.store.db.utils import _get_latest_schema_revision

        return bool(self.tables) and (bool(self.scratch) or self.revision != _get_latest_schema_revision())


def read_state(tracking_uri: str, deadline: float) -> StoreState:
    """The store's state, read without writing; one that cannot be read is refused: it may hold runs."""
    db = sqlite_path(tracking_uri)
    if not db.exists():
        return StoreState(tables=(), revision=None, runs=0)
    for attempt in (0, 1):
        try:
            return _state(db, timeout=max(0.0, min(5.0, deadline - time.monotonic())))
        except sqlite3.Error as exc:
            if not is_locked_error(exc):
                raise TrackingUnavailable(
                    f"mlflow.tracking_uri={tracking_uri!r}: cannot read {db} ({type(exc).__name__}: {exc}); it may "
                    "hold runs, so nothing in it was changed: keep a copy, then check it (`"
                    f"{shlex.join(['sqlite3', str(db), 'PRAGMA integrity_check'])}`)"
                ) from exc
            if attempt:
                raise StoreLocked(locked_line(tracking_uri, store_wait_s())) from exc
            wait_for_store(tracking_uri, write=False, deadline=deadline)
    raise AssertionError("unreachable")


def _state(db: Path, *, timeout: float) -> StoreState:
    with _connect(db, "ro", timeout) as conn:
        tables = tuple(row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        revision = None
        if "alembic_version" in tables:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            revision = row[0] if row else None
        runs = sum(
            conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            for table in ("runs", SCRATCH_PREFIX + "runs")
            if table in tables
        )
    return StoreState(tables=tables, revision=revision, runs=runs)


# ----------------------------------------------------------------------------- repair
@dataclass(frozen=True)
class OwnFile:
    """A file this process created (O_EXCL): the only kind this module writes, drops tables of, deletes."""

    path: Path

    @classmethod
    def create(cls, path: Path) -> OwnFile:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return cls(path)


def _repair(tracking_uri: str, state: StoreState, cause: Exception) -> None:
    """Finish a half set-up on a copy (`mlflow db upgrade`), swapped in only if it holds every run, the
    original kept. Failing that, a store with no runs is moved aside; one with runs is refused, untouched."""
    db = sqlite_path(tracking_uri)
    leftovers = f", leftover {', '.join(state.scratch)}" if state.scratch else ""
    what = f"schema revision {state.revision or 'none'}{leftovers}"
    copy = None
    try:
        copy = OwnFile.create(_unused_name(db, "repair"))
        failure = _repair_copy(db, copy, state)
        if not failure:
            kept = _swap_in(copy, db)
            _forget_engines(tracking_uri)
            _say(
                f"mlflow: {db} was half set up ({what}): repaired on a copy holding all its {state.runs} "
                f"run(s), as `mlflow db upgrade` does; the original is kept as {kept}"
            )
            return
    except OSError as exc:
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        if copy is not None:
            _discard(copy)
    if state.runs == 0:
        try:  # the store under a new name (linked first, so its content always has one), its own name freed
            aside = _unused_name(db, "broken")
            os.link(db, aside)
            os.unlink(db)
        except OSError as exc:
            failure += f"; could not move it aside ({type(exc).__name__}: {exc})"
        else:
            _forget_engines(tracking_uri)
            _say(
                f"mlflow: {db} was half set up ({what}) and held no runs: set up afresh, the old file kept as {aside}"
            )
            return
    raise TrackingUnavailable(
        f"mlflow.tracking_uri={tracking_uri!r}: the store is half set up ({what}) and could not be repaired "
        f"({failure}; first error: {_error_line(str(cause))}); it holds {state.runs} run(s), left as they were: "
        f"keep a copy, then try `{shlex.join(['mlflow', 'db', 'upgrade', tracking_uri])}`"
    ) from cause


def _repair_copy(db: Path, copy: OwnFile, state: StoreState) -> str:
    """Back the store up into `copy`, drop its redundant scratch tables, migrate it: '' when it holds
    MLflow's schema and every run, else what went wrong."""
    try:
        with (
            _connect(db, "ro", 5.0) as source,
            contextlib.closing(sqlite3.connect(copy.path)) as target,
        ):
            source.backup(target)
            for table in state.scratch:
                if table.removeprefix(SCRATCH_PREFIX) in state.tables:  # the copy's own partial copy
                    target.execute(f'DROP TABLE "{table}"')
            target.commit()
        upgrade = subprocess.run(
            [sys.executable, "-m", "mlflow", "db", "upgrade", f"sqlite:///{copy.path}"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if upgrade.returncode != 0:
            return _error_line(upgrade.stderr or upgrade.stdout)
        repaired = _state(copy.path, timeout=5.0)
    except (OSError, sqlite3.Error, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if repaired.half_set_up or repaired.runs != state.runs:
        return f"the migrated copy holds {repaired.runs} of the {state.runs} runs, schema revision {repaired.revision}"
    return ""


def _swap_in(copy: OwnFile, db: Path) -> Path:
    """The copy takes the store's name once the original has another (a hard link), which is returned."""
    kept = _unused_name(db, "before-repair")
    os.link(db, kept)
    os.replace(copy.path, db)
    return kept


def _discard(own: OwnFile) -> None:
    with contextlib.suppress(OSError):
        os.unlink(own.path)


def _unused_name(db: Path, what: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = db.with_name(f"{db.name}.{what}-{stamp}" + (f".{n}" if n else ""))
        if not os.path.lexists(path):
            return path
    raise FileExistsError(errno.EEXIST, "no unused name", str(db))


def _forget_engines(tracking_uri: str) -> None:
    """Drop MLflow's cached engines of the URI: their pooled connections still read the replaced file."""
    for module in (
        "mlflow.store.tracking.sqlalchemy_store",
        "mlflow.store.model_registry.sqlalchemy_store",
        "mlflow.store.jobs.sqlalchemy_store",
    ):
        with contextlib.suppress(Exception):
            engine = importlib.import_module(module).SqlAlchemyStore._engine_map.pop(tracking_uri, None)
            if engine is not None:
                engine.dispose()


def _error_line(text: str) -> str:
    """The line of a (possibly multi-line) error text that names the error."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line.split(":", 1)[0]]
    return (named or lines or ["no message"])[-1][:300]


def describe_store_error(exc: BaseException, tracking_uri: str = "") -> str:
    """One line for a store's error: sqlite's own (unwrapped from SQLAlchemy's notice) and whether the
    file is still there; else the message's first line."""
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


def _one_line_database_errors(record: logging.LogRecord) -> bool:
    """MLflow logs each SQLAlchemy error with its traceback before raising it: keep one line."""
    if record.exc_info or "\n" in str(record.msg):
        cause = _sqlite_cause(record.getMessage()) or record.getMessage().strip().splitlines()[0]
        record.msg, record.args, record.exc_info, record.exc_text = cause, None, None, None
    return True
