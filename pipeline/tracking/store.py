"""A sqlite store: its folder and file checked writable in milliseconds, its set-up (tables created or
migrated) by one process at a time under a lock beside it, a store another process holds locked waited
for (a bounded wait, said on the terminal) and then refused, and its repair when an earlier first use
was cut off halfway.

Whatever an error says, this module never drops a table of, empties, truncates or deletes a store it
did not create in this process (git's rule: never destroy what you cannot read). A sqlite error
(`database is locked`, an I/O error) is never read as "no runs" or "half set up": only a store whose
tables were read and found short of MLflow's schema is repaired, and it is repaired on a copy this
process made, swapped in once the copy holds every run the original held; the original is kept, byte
for byte, under another name. Every file operation that could lose data takes an :class:`OwnFile`, a
file this process created (`tests/test_store.py` holds the module to that)."""

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
        db = Path(tracking_uri[len("sqlite:///") :])
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


def sqlite_path(tracking_uri: str) -> Path:
    return Path(tracking_uri[len("sqlite:///") :])


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every sqlite database file


# How long a process waits for a sqlite store that another process holds locked (a long query, a
# backup, a second tool's transaction) before it refuses to go on: MLflow's own sqlite connections
# give up after 5 s and read as failures of the store. PIPELINE_STORE_WAIT_S sets it, in seconds.
STORE_WAIT_S = 60.0
STORE_WAIT_ENV = "PIPELINE_STORE_WAIT_S"
# The jobs of a sweep write for milliseconds at a time: a lock that outlasts this is said on the terminal.
QUIET_WAIT_S = 2.0
_LOCKED = re.compile(r"database (table |schema )?is locked", re.IGNORECASE)


class StoreLocked(TrackingUnavailable):
    """Another process held the sqlite store locked for longer than this one waits."""


def store_wait_s() -> float:
    """The bounded wait for a locked store: PIPELINE_STORE_WAIT_S, else STORE_WAIT_S."""
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
    """A sqlite store this process can use, or one line saying why, before anything starts: an absolute
    path; for writing, a folder that takes new files (sqlite's journal) and a file that writes; a file
    that is a sqlite database; and, where another process holds the store locked, the bounded wait for
    it (`wait_for_store`). Reading never probes for writing and never makes a store."""
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
    """Return once no other process holds the sqlite store locked against this use (writing: another
    process's write transaction; reading: its exclusive lock): quietly for QUIET_WAIT_S, then saying so
    on the terminal, up to `store_wait_s()` in all (or `deadline`, a `time.monotonic()`); then refuse in
    one line (:class:`StoreLocked`). An error other than a lock is left for opening the store to say."""
    db = sqlite_path(tracking_uri)
    if not db.exists():
        return
    wait = store_wait_s()
    started = time.monotonic()
    deadline = started + wait if deadline is None else deadline
    if _free(db, write=write, timeout=max(0.0, min(QUIET_WAIT_S, deadline - started))):
        return
    if deadline - time.monotonic() > 0:
        print(
            f"mlflow: {db} is locked by another process (a long query, a backup, another tool's transaction): "
            f"waiting up to {max(0.0, deadline - started):.0f} s for it ({STORE_WAIT_ENV})",
            file=sys.stderr,
            flush=True,
        )
        if _free(db, write=write, timeout=max(0.0, deadline - time.monotonic())):
            print(
                f"mlflow: {db} is free again after {time.monotonic() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
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
    """Whether the store takes this use within `timeout` s: a write transaction begun and rolled back
    (nothing written), or a read of its schema. An error other than a lock: not locked."""
    try:
        with contextlib.closing(
            sqlite3.connect(
                _file_uri(db, "rw" if write else "ro"), uri=True, timeout=timeout, isolation_level=None
            )
        ) as conn:
            if write:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            else:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return not is_locked_error(exc)
    return True


def _file_uri(db: Path, mode: str) -> str:
    """sqlite's URI for the file, opened `ro` (never written) or `rw` (never created)."""
    return f"file:{urllib.parse.quote(str(db))}?mode={mode}"


def mlflow_client(tracking_uri: str, *, read_only: bool = False) -> Any:
    """An MlflowClient. A sqlite store is set up (tables created or migrated) by one process at a time:
    MLflow's own set-up is not safe when several processes open a new file at once (12 jobs started
    together left it half-migrated for good), so it runs under a lock beside the file. A store another
    process holds locked is waited for (`wait_for_store`), then refused. `read_only`: a store that
    exists, opened for reading only (never set up, repaired or written; on a read-only filesystem
    sqlite reads it as it is)."""
    from mlflow.tracking import MlflowClient

    if not tracking_uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri=tracking_uri)
    _quiet_database_errors()
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
                raise TrackingUnavailable(_cannot_open(tracking_uri, first)) from first
            _repair(tracking_uri, state, first)
        try:
            return _opened(tracking_uri)
        except Exception as exc:
            raise TrackingUnavailable(_cannot_open(tracking_uri, exc)) from exc


def _cannot_open(tracking_uri: str, exc: BaseException) -> str:
    return (
        f"mlflow.tracking_uri={tracking_uri!r}: cannot open the store ({type(exc).__name__}: "
        f"{_error_line(str(exc))}); nothing in it was changed"
    )


def _opened(tracking_uri: str) -> Any:
    """A client whose store is set up: MLflow creates or checks the schema on its first request."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    client.search_experiments(max_results=1)
    return client


def _opened_waiting(tracking_uri: str, deadline: float) -> Any:
    """`_opened`, waiting again (up to `deadline`) where another process's lock is what failed it."""
    while True:
        try:
            return _opened(tracking_uri)
        except Exception as exc:
            if not is_locked_error(exc):
                raise
            if time.monotonic() >= deadline:
                raise StoreLocked(locked_line(tracking_uri, store_wait_s())) from exc
            wait_for_store(tracking_uri, write=True, deadline=deadline)


def _opened_for_reading(tracking_uri: str, deadline: float) -> Any:
    """A client of a store that exists and holds MLflow's tables, for reading: nothing is set up,
    repaired or written, and no write is probed for."""
    check_sqlite(tracking_uri, write=False)
    if not read_state(tracking_uri, deadline).tables:  # MLflow would create its tables in it
        raise TrackingUnavailable(
            f"mlflow.tracking_uri={tracking_uri!r}: {sqlite_path(tracking_uri)} holds no MLflow store yet"
        )
    while True:
        try:
            return _opened(tracking_uri)
        except Exception as exc:
            if is_locked_error(exc) and time.monotonic() < deadline:
                wait_for_store(tracking_uri, write=False, deadline=deadline)
                continue
            if is_locked_error(exc):
                raise StoreLocked(locked_line(tracking_uri, store_wait_s())) from exc
            raise TrackingUnavailable(
                f"mlflow.tracking_uri={tracking_uri!r}: cannot read the store ({type(exc).__name__}: "
                f"{_error_line(str(exc))})"
            ) from exc


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


# ----------------------------------------------------------------------------- what the store holds
SCRATCH_PREFIX = "_alembic_tmp_"  # alembic's copy of a table while a batch migration rebuilds it


@dataclass(frozen=True)
class StoreState:
    """What a sqlite store holds, as read (never guessed from an error): its tables, MLflow's schema
    revision, and its runs (those of `runs` and of alembic's copy of it)."""

    tables: tuple[str, ...]
    revision: str | None
    runs: int

    @property
    def scratch(self) -> list[str]:
        return [t for t in self.tables if t.startswith(SCRATCH_PREFIX)]

    @property
    def half_set_up(self) -> bool:
        """Tables there, but short of MLflow's schema or with alembic's scratch tables left behind: an
        earlier first use cut off halfway (killed, or raced before the set-up lock existed)."""
        from mlflow.store.db.utils import _get_latest_schema_revision

        return bool(self.tables) and (bool(self.scratch) or self.revision != _get_latest_schema_revision())


def read_state(tracking_uri: str, deadline: float) -> StoreState:
    """The store's tables, revision and runs, read without writing (waiting, bounded, for another
    process's lock). A store that cannot be read is refused in one line: it may hold runs."""
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
    with contextlib.closing(sqlite3.connect(_file_uri(db, "ro"), uri=True, timeout=timeout)) as conn:
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
    """A file this process created, new (`O_EXCL`: it did not exist before): the only kind of file this
    module ever writes into, drops tables of or deletes."""

    path: Path

    @classmethod
    def create(cls, path: Path) -> OwnFile:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return cls(path)


def _repair(tracking_uri: str, state: StoreState, cause: Exception) -> None:
    """Finish a set-up that an earlier process left halfway, as `mlflow db upgrade` does, on a copy of
    the store this process makes: alembic's leftover scratch tables dropped in the copy (where the table
    they copy is whole), the copy migrated to MLflow's schema, and swapped in only if it holds every run
    the store held, the original kept under another name. If that fails, a store that held no runs is
    moved aside (kept) and set up afresh; one that holds runs is refused in one line saying what to do,
    and left as it was."""
    db = sqlite_path(tracking_uri)
    leftovers = f", leftover {', '.join(state.scratch)}" if state.scratch else ""
    what = f"schema revision {state.revision or 'none'}{leftovers}"
    try:
        copy = OwnFile.create(_unused_name(db, "repair"))
    except OSError as exc:
        failure = f"{type(exc).__name__}: {exc}"
    else:
        try:
            failure = _repair_copy(db, copy, state)
            if not failure:
                kept = _swap_in(copy, db)
                _forget_engines(tracking_uri)
                print(
                    f"mlflow: {db} was half set up ({what}): repaired on a copy holding all its {state.runs} "
                    f"run(s), as `mlflow db upgrade` does; the original is kept as {kept}",
                    file=sys.stderr,
                    flush=True,
                )
                return
        except OSError as exc:
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            _discard(copy)
    if state.runs == 0:
        try:
            aside = _move_aside(db, "broken")
        except OSError as exc:
            failure += f"; could not move it aside ({type(exc).__name__}: {exc})"
        else:
            _forget_engines(tracking_uri)
            print(
                f"mlflow: {db} was half set up ({what}) and held no runs: set up afresh, the old file kept as {aside}",
                file=sys.stderr,
                flush=True,
            )
            return
    raise TrackingUnavailable(
        f"mlflow.tracking_uri={tracking_uri!r}: the store is half set up ({what}) and could not be repaired "
        f"({failure}; first error: {_error_line(str(cause))}); it holds {state.runs} run(s), left as they were: "
        f"keep a copy, then try `{shlex.join(['mlflow', 'db', 'upgrade', tracking_uri])}`"
    ) from cause


def _repair_copy(db: Path, copy: OwnFile, state: StoreState) -> str:
    """Copy the store into `copy` (sqlite's backup: a consistent copy, the store only read), drop the
    scratch tables whose table is whole there, migrate it; '' when it holds MLflow's schema and every
    run the store held, else what went wrong."""
    try:
        with (
            contextlib.closing(sqlite3.connect(_file_uri(db, "ro"), uri=True, timeout=5.0)) as source,
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
    """The repaired copy takes the store's name in one step (`rename`), once the original has a name of
    its own (a hard link: the same file, byte for byte), which is returned."""
    kept = _unused_name(db, "before-repair")
    os.link(db, kept)
    os.replace(copy.path, db)
    return kept


def _move_aside(db: Path, what: str) -> Path:
    """The store under a new name (a hard link made first, so its content always has a name), its own
    name freed for MLflow to set up afresh."""
    aside = _unused_name(db, what)
    os.link(db, aside)
    os.unlink(db)
    return aside


def _discard(own: OwnFile) -> None:
    """Delete a file this process made (a repair's copy), if it is still there under its name."""
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
    """MLflow keeps one engine per store URI, whose pooled connections would still read the file that
    had the store's name: dropped, so the next client opens the file that has it now."""
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
