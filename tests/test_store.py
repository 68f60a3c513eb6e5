"""The MLflow store, as jobs meet it for real: a new sqlite file opened by many jobs at once, one left
half set up, one in a read-only folder, a server reached with credentials in its URI, a server that
goes away mid-job. Each either works or is refused in one line, within seconds."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.tracking import Tracker, TrackingUnavailable, mlflow_client
from pipeline.tracking.store import STORE_WAIT_ENV, sqlite_path
from tests.conftest import (
    ROOT,
    TINY,
    finish,
    lock_held,
    one_line_errors,
    output,
    popen_cli,
    run_cli,
    runs,
    sqlite_uri,
    stop_group,
)
from tests.mlflow_server import start_server

EAGER = [*TINY, "compile.mode=eager"]


def schema_revision(db: Path) -> str | None:
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def scratch_tables(db: Path) -> list[str]:
    """alembic's `_alembic_tmp_*` tables (a batch migration's copy of a table, while it runs)."""
    try:
        with sqlite3.connect(db, timeout=0.05) as conn:
            rows = conn.execute(
                "SELECT name FROM sqlite_master WHERE name LIKE '\\_alembic\\_tmp\\_%' ESCAPE '\\'"
            )
            return [row[0] for row in rows]
    except sqlite3.Error:
        return []


@pytest.mark.slow
def test_twelve_jobs_on_a_new_sqlite_store_all_finish_with_everything_logged(tmp_path: Path):
    """Twelve jobs started together on a sqlite file that does not exist yet: MLflow's set-up of a new
    store is serialized (a lock beside the file), so none fails, then all twelve log at once with every
    metric, curve and artifact kept, never `database is locked`, and the store stays usable."""
    store = sqlite_uri(tmp_path / "new.db")
    procs = [popen_cli([*EAGER, f"trainer.seed={i}"], tmp_path / f"job{i}", store) for i in range(12)]
    done = [finish(p) for p in procs]
    for proc in done:
        assert proc.returncode == 0, output(proc)
        assert "database is locked" not in proc.stdout + proc.stderr
    finished = runs(store)
    assert len(finished) == 12 and {r.info.status for r in finished} == {"FINISHED"}
    assert sorted(int(r.data.params["trainer.seed"]) for r in finished) == list(range(12))
    c = mlflow_client(store)
    for run in finished:
        logged = set(run.data.metrics)
        assert {"step/p50_ms", "loss/final", "throughput/samples_per_s", "memory/cpu_rss_peak_gib"} <= logged
        assert len(c.get_metric_history(run.info.run_id, "curve/loss")) == 4  # TINY's trainer.steps
        assert "config.yaml" in {a.path for a in c.list_artifacts(run.info.run_id)}
    assert (tmp_path / "new.db.lock").exists()  # the lock is beside the store
    later = run_cli([*EAGER, "trainer.seed=12"], tmp_path / "later", store)  # and the store works after
    assert later.returncode == 0, output(later)


@pytest.mark.slow
def test_two_sweeps_started_together_on_a_new_store_both_get_their_parent(tmp_path: Path):
    store = sqlite_uri(tmp_path / "new.db")
    procs = [
        popen_cli([*EAGER, f"trainer.seed={i}"], tmp_path / f"sweep{i}", store, multirun=True) for i in (0, 1)
    ]
    done = [finish(p) for p in procs]
    for proc in done:
        assert proc.returncode == 0, output(proc)
    all_runs = runs(store)
    parents = {r.data.tags["sweep_id"]: r for r in all_runs if r.data.tags.get("sweep_parent") == "true"}
    children = [r for r in all_runs if r.data.tags.get("sweep_parent") != "true"]
    assert len(parents) == 2 and len(children) == 2
    assert {p.info.status for p in parents.values()} == {"FINISHED"}
    for child in children:  # each job nested in its own sweep's parent
        assert child.data.tags["mlflow.parentRunId"] == parents[child.data.tags["sweep_id"]].info.run_id


@pytest.mark.slow
def test_a_store_left_half_set_up_is_repaired_before_the_job_runs(tmp_path: Path):
    """An earlier first use killed in the middle of one of MLflow's schema migrations (as a crash, or
    the old race, leaves it: alembic's scratch table behind, the schema short of MLflow's), which MLflow
    alone then refuses for good: the next job repairs the store and runs."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    db = tmp_path / "half.db"
    opener = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from mlflow.tracking import MlflowClient; MlflowClient({sqlite_uri(db)!r}).search_experiments()",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while opener.poll() is None and not scratch_tables(db):  # a batch migration is halfway
        time.sleep(0.01)
    opener.send_signal(signal.SIGKILL)
    opener.wait()
    assert scratch_tables(db), "the migrations ended before the kill"
    assert schema_revision(db) != _get_latest_schema_revision()

    proc = run_cli(EAGER, tmp_path, sqlite_uri(db))
    assert proc.returncode == 0, output(proc)
    (run,) = runs(sqlite_uri(db))
    assert run.info.status == "FINISHED"
    assert schema_revision(db) == _get_latest_schema_revision() and not scratch_tables(db)


def test_a_store_in_a_read_only_folder_is_refused_in_one_line_within_seconds(
    tmp_path: Path, read_only_dir: Path
):
    store = sqlite_uri(read_only_dir / "mlflow.db")
    for multirun in (False, True):
        started = time.monotonic()
        proc = run_cli(
            [*EAGER, "trainer.seed=0,1" if multirun else "trainer.seed=0"], tmp_path, store, multirun=multirun
        )
        assert time.monotonic() - started < 30  # MLflow alone retries its engine for ~110 s
        assert proc.returncode == 1, output(proc)
        (line,) = one_line_errors(proc, "mlflow error:")
        assert line.startswith(f"mlflow error: mlflow.tracking_uri={store!r}: cannot write"), line
    assert not list(tmp_path.rglob("worker.log"))  # nothing started


@pytest.mark.slow
@pytest.mark.integration
def test_credentials_in_the_tracking_uri_pass_the_health_check_and_stay_secret(tmp_path: Path):
    """`http://user:pw@host:port`, which MLflow's client accepts: the job runs and logs, and the
    password is written nowhere in MLflow."""
    server = start_server(tmp_path / "server")
    try:
        password = "s3cr3t-in-uri"
        url = server.url.replace("http://", f"http://someone:{password}@")
        proc = run_cli(EAGER, tmp_path, url)
        assert proc.returncode == 0, output(proc)
        assert password not in proc.stdout + proc.stderr
        (run,) = runs(server.url)
        assert run.info.status == "FINISHED"
        assert run.data.params["mlflow.tracking_uri"] == server.url.replace("http://", "http://someone:***@")
        logged = repr(run.data.params) + repr(run.data.tags) + (run.info.run_name or "")
        assert password not in logged
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.integration
def test_a_store_outage_ends_the_job_within_its_bounded_retries(tmp_path: Path):
    """The server goes away while the job trains: the job keeps its result and ends within seconds
    (MLflow's own HTTP defaults retry each request for about 4 minutes), saying what bounds the wait."""
    server = start_server(tmp_path / "server")
    env_free = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_REQUEST")}
    proc = popen_cli([*EAGER, "trainer.steps=60"], tmp_path, server.url, env=env_free)
    try:
        deadline = time.monotonic() + 300
        while not runs(server.url):  # the job's run is open: its worker trains
            assert time.monotonic() < deadline and proc.poll() is None, "the job never opened its run"
            time.sleep(0.2)
        server.stop()
        stopped = time.monotonic()
        done = finish(proc, timeout=150)
        waited = time.monotonic() - stopped
    finally:
        stop_group(proc)
        server.stop()
    assert done.returncode == 1, output(done)
    (line,) = one_line_errors(done, "mlflow error:")
    assert "retries bounded by MLFLOW_HTTP_REQUEST_MAX_RETRIES=2" in line and "--sync" in line, line
    assert waited < 90, f"the job waited {waited:.0f} s for a store that was gone"
    assert (tmp_path / "run" / "result.json").exists()


@pytest.mark.slow
def test_a_store_file_deleted_mid_job_is_named_with_sqlites_own_error(tmp_path: Path):
    """`rm` of the sqlite file while the job trains: the job's line gives sqlite's error and that the
    file is gone, not SQLAlchemy's autoflush notice, and no traceback; the result is kept."""
    db = tmp_path / "store" / "mlflow.db"
    store = sqlite_uri(db)
    proc = popen_cli([*EAGER, "trainer.steps=600"], tmp_path, store)
    try:
        deadline = time.monotonic() + 300
        while not runs(store):  # the job's run is open: its worker trains
            assert time.monotonic() < deadline and proc.poll() is None, "the job never opened its run"
            time.sleep(0.2)
        db.unlink()
        done = finish(proc, timeout=300)
    finally:
        stop_group(proc)
    assert done.returncode == 1, output(done)
    assert "Traceback" not in done.stdout + done.stderr and "autoflush" not in done.stdout + done.stderr
    (line,) = one_line_errors(done, "mlflow error:")
    assert "(sqlite3.OperationalError)" in line and f"{db} no longer exists" in line, line
    assert (tmp_path / "run" / "result.json").exists()


@pytest.mark.slow
@pytest.mark.integration
def test_a_hung_server_holds_a_job_for_seconds_and_sync_completes_its_run(tmp_path: Path):
    """The server stops answering (SIGSTOP: its socket still accepts) while the job trains: the job
    ends within seconds of its training, not after every request's retries (4.5 minutes once), keeps
    its result, and `--sync` completes the job's own run once the server answers again."""
    server = start_server(tmp_path / "server")
    env_free = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_REQUEST")}
    pid = int(server.pid_file.read_text())
    proc = popen_cli([*EAGER, "trainer.steps=60"], tmp_path, server.url, env=env_free)
    try:
        deadline = time.monotonic() + 300
        while not runs(server.url):  # the job's run is open: its worker trains
            assert time.monotonic() < deadline and proc.poll() is None, "the job never opened its run"
            time.sleep(0.2)
        os.killpg(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        done = finish(proc, timeout=300)
        waited = time.monotonic() - stopped
        os.killpg(pid, signal.SIGCONT)
        assert done.returncode == 1, output(done)
        (line,) = one_line_errors(done, "mlflow error:")
        assert "is not reachable" in line and "left RUNNING" in line and "--sync" in line, line
        assert waited < 45, f"the job waited {waited:.0f} s for a hung server"
        sync = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline.report",
                "--tracking-uri",
                server.url,
                "--sync",
                str(tmp_path / "run"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert sync.returncode == 0, sync.stdout + sync.stderr
        (run,) = runs(server.url)
        assert run.info.status == "FINISHED" and run.data.metrics["step/p50_ms"] > 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGCONT)
        stop_group(proc)
        server.stop()


def test_a_file_that_is_not_sqlite_is_refused_in_one_line_and_left_as_it_is(tmp_path: Path):
    """A store path that holds something else (garbage, another program's file): refused before
    anything starts, every time, the file untouched and no empty `.broken-*` copy beside it."""
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    garbage = os.urandom(5000)
    db.write_bytes(garbage)
    for attempt in range(2):
        proc = run_cli(EAGER, tmp_path / str(attempt), sqlite_uri(db))
        assert proc.returncode == 1, output(proc)
        (line,) = one_line_errors(proc, "mlflow error:")
        assert f"{db} is not a sqlite database" in line and "move the file aside" in line, line
        assert not (tmp_path / str(attempt) / "run" / "worker.log").exists()  # nothing started
    assert db.read_bytes() == garbage
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db"]


# ----------------------------------------------------------------------------- a store held by another process
def store_with_runs(store: str, count: int) -> set[str]:
    """`count` FINISHED runs logged to the store (a store someone has used)."""
    tracker = Tracker(store, "compile-sweeps")
    ids = {tracker.start_run(f"earlier {i}", {"earlier": "true"}) for i in range(count)}
    for run_id in ids:
        tracker.end_run(run_id, "FINISHED")
    return ids


def fresh_copy(db: Path, folder: Path) -> Path:
    """The store copied to a path this process never opened (MLflow keeps a store per URI)."""
    folder.mkdir()
    shutil.copyfile(db, folder / db.name)
    return folder / db.name


def set_aside_files(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(db.name + "."))


def test_a_store_another_process_holds_locked_is_waited_for_then_refused_and_left_as_it_was(
    tmp_path: Path, store: str
):
    """Issue 41: a job opening a store another process held locked read `database is locked` as a store
    half set up, dropped its tables and went on (76 runs, then 3). Now the job waits for it (said on the
    terminal, bounded), then refuses in one line: nothing started, the file byte for byte as it was."""
    db = sqlite_path(store)
    earlier = store_with_runs(store, 5)
    before = db.read_bytes()
    env = {STORE_WAIT_ENV: "3"}
    with lock_held(db):
        single = run_cli(EAGER, tmp_path / "single", store, env=env)
        sweep = run_cli([*EAGER, "trainer.seed=0,1"], tmp_path / "sweep", store, multirun=True, env=env)
    for proc in (single, sweep):
        assert proc.returncode == 1, output(proc)
        (line,) = one_line_errors(proc, "mlflow error:")
        assert f"{db} is locked by another process and stayed locked for 3 s" in line, line
        assert "nothing was started and nothing in the store was changed" in line, line
        assert (
            f"{db} is locked by another process (a long query" in proc.stderr
            and "waiting up to" in proc.stderr
        )
    assert not list(tmp_path.rglob("worker.log"))  # no worker started
    assert db.read_bytes() == before
    assert set_aside_files(db) == ["mlflow.db.lock"]  # no `.broken-*`, nothing moved
    kept = runs(store)
    assert {r.info.run_id for r in kept} == earlier and {r.info.status for r in kept} == {"FINISHED"}


def test_a_lock_let_go_within_the_wait_lets_the_job_run(tmp_path: Path, store: str):
    db = sqlite_path(store)
    earlier = store_with_runs(store, 3)
    with lock_held(db) as holder:
        proc = popen_cli(EAGER, tmp_path, store)
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # the job says it waits: then the other process lets go
                if "is locked by another process" in line:
                    assert "waiting up to 60 s" in line, line
                    break
            else:
                raise AssertionError("the job never said it waits for the store")
            assert holder.stdin is not None
            holder.stdin.close()
            done = finish(proc)
        finally:
            stop_group(proc)
    assert done.returncode == 0, output(done)
    assert f"{db} is free again after" in done.stderr
    after = runs(store)
    assert earlier < {r.info.run_id for r in after} and len(after) == 4
    assert {r.info.status for r in after} == {"FINISHED"}


def test_a_half_set_up_store_holding_runs_is_repaired_on_a_copy_and_its_original_kept(
    tmp_path: Path, store: str
):
    """A store whose migration an earlier process left halfway (alembic's scratch table behind, the schema
    four revisions short, which MLflow's own set-up then fails on), holding runs: repaired on a copy
    that holds every run, swapped in, and the original kept byte for byte beside it."""
    import sqlalchemy
    from alembic import command
    from mlflow.store.db.utils import _get_alembic_config, _get_latest_schema_revision

    db = sqlite_path(store)
    earlier = store_with_runs(store, 3)
    config = _get_alembic_config(store)
    engine = sqlalchemy.create_engine(store)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "1971f2d9a75b")  # before a migration that rebuilds experiment_tags
    engine.dispose()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE _alembic_tmp_experiment_tags AS SELECT * FROM experiment_tags")
        conn.commit()
    db = fresh_copy(db, tmp_path / "half")
    store = sqlite_uri(db)
    before = db.read_bytes()

    mlflow_client(store)  # MLflow's own set-up fails on it: the store is repaired
    (kept,) = [p for p in db.parent.iterdir() if ".before-repair-" in p.name]
    assert kept.read_bytes() == before
    assert schema_revision(db) == _get_latest_schema_revision() and not scratch_tables(db)
    assert {r.info.run_id for r in runs(store)} == earlier


def test_a_half_set_up_store_holding_runs_that_cannot_be_repaired_is_refused_and_left_as_it_was(
    tmp_path: Path, store: str
):
    """A store whose schema is MLflow's but whose revision is one short (the migration ran, its stamp did
    not): `mlflow db upgrade` fails on it, and it holds runs: refused in one line, untouched."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    db = sqlite_path(store)
    store_with_runs(store, 2)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '75868b020152'")
        conn.commit()
    db = fresh_copy(db, tmp_path / "stamped")
    store = sqlite_uri(db)
    before = db.read_bytes()
    with pytest.raises(TrackingUnavailable) as refused:
        mlflow_client(store)
    line = str(refused.value)
    assert "the store is half set up (schema revision 75868b020152)" in line, line
    assert "it holds 2 run(s), left as they were" in line and "mlflow db upgrade" in line, line
    assert db.read_bytes() == before and set_aside_files(db) == ["mlflow.db.lock"]
    assert schema_revision(db) != _get_latest_schema_revision()


def test_a_damaged_store_is_refused_and_left_as_it_was(tmp_path: Path):
    """A file that starts like sqlite but cannot be read (damaged): an error is never read as a store
    holding nothing; refused, untouched."""
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"SQLite format 3\x00" + os.urandom(8000))
    before = db.read_bytes()
    with pytest.raises(TrackingUnavailable) as refused:
        mlflow_client(sqlite_uri(db))
    assert "it may hold runs, so nothing in it was changed" in str(refused.value), refused.value
    assert db.read_bytes() == before and set_aside_files(db) == ["mlflow.db.lock"]


# ----------------------------------------------------------------------------- no path that loses a store
# What could lose what a store holds: SQL that drops or deletes, a file removed, overwritten, truncated
# or written over.
DESTRUCTIVE_SQL = re.compile(r"\b(DROP\s+TABLE|DELETE\s+FROM|TRUNCATE)\b")
REMOVING = {"os.unlink", "os.remove", "os.rmdir", "shutil.rmtree", "shutil.move", "os.truncate"}
MOVING = {"os.replace", "os.rename"}
WRITING_METHODS = {"unlink", "truncate", "rmdir", "write_text", "write_bytes"}
# Writes outside any store: (module, function, call), and why each cannot touch one.
NOT_A_STORE = {
    (
        "payload.py",
        "redacted_copy",
        "copy.write_text",
    ): "a redacted copy under the upload's own temporary folder",
}


def _mentions(own: set[str], text: str) -> bool:
    """Whether an expression names the path of one of these `OwnFile` parameters."""
    return any(f"{name}.path" in text for name in own)


def destructive_sites(source: str, module: str) -> list[str]:
    """Every place in `source` that could drop, delete, overwrite or truncate what a store holds and is
    not guarded: a site is guarded when its function takes an `OwnFile` (a file this process created)
    and acts on it, or when it moves the store only after giving its content a name of its own
    (`os.link(store, new name)` first)."""
    tree = ast.parse(source)
    problems: list[str] = []
    for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        own = {
            a.arg
            for a in func.args.args + func.args.kwonlyargs
            if a.annotation is not None and ast.unparse(a.annotation) == "OwnFile"
        }
        linked: list[str] = []  # paths given a second name so far in this function
        bound = {  # names bound in the function (`with ... as x`, `x = ...`) to what they were made from
            ast.unparse(item.optional_vars): ast.unparse(item.context_expr)
            for node in ast.walk(func)
            if isinstance(node, ast.With)
            for item in node.items
            if item.optional_vars is not None
        }
        for node in sorted(
            (n for n in ast.walk(func) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)
        ):
            name = ast.unparse(node.func)
            args = [ast.unparse(a) for a in node.args]
            site = f"{module}:{node.lineno} {func.name}: {ast.unparse(node)[:120]}"
            if name == "os.link":
                linked.append(args[0])
                continue
            sql = " ".join(
                c.value
                for a in node.args
                for c in ast.walk(a)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
            if DESTRUCTIVE_SQL.search(sql):
                receiver = ast.unparse(node.func.value) if isinstance(node.func, ast.Attribute) else ""
                if not _mentions(own, bound.get(receiver, "")):
                    problems.append(site)
            elif name in REMOVING or (
                isinstance(node.func, ast.Attribute) and node.func.attr in WRITING_METHODS
            ):
                target = args[0] if name in REMOVING and args else ast.unparse(node.func.value)
                allowed = (module, func.name, name) in NOT_A_STORE
                if not (_mentions(own, target) or target in linked or allowed):
                    problems.append(site)
            elif name in MOVING:
                if not (_mentions(own, args[0]) and args[1] in linked):
                    problems.append(site)
            elif name in ("open", "os.open"):
                mode = args[1] if len(args) > 1 else ""
                if (
                    any(flag in mode for flag in ("w", "+", "O_TRUNC", "O_WRONLY", "O_RDWR"))
                    and "O_EXCL" not in mode
                ):
                    problems.append(site)
    return problems


def test_no_code_path_of_the_tracking_package_can_drop_or_truncate_a_store_it_did_not_create():
    """Issue 41: the tracking package dropped every table of a live store in place. Every remaining
    operation that could lose data acts on a file this process created (`OwnFile`, made with O_EXCL),
    or moves a store only once its content has a second name; the scan finds each, and finds a bad one."""
    package = ROOT / "pipeline" / "tracking"
    problems = [
        p for path in sorted(package.glob("*.py")) for p in destructive_sites(path.read_text(), path.name)
    ]
    assert problems == [], problems
    store_source = (package / "store.py").read_text()
    assert "DROP TABLE" in store_source and "os.unlink" in store_source  # the scan has sites to judge
    # OwnFile is made only by its `create` (O_EXCL), nowhere else
    made = [
        n
        for n in ast.walk(ast.parse(store_source))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "OwnFile"
    ]
    assert made == []
    # and the scan catches what the old store did: tables dropped in place, a file emptied
    old = """
def _set_aside(db: Path) -> Path:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    db.unlink()
    with open(db, "w"):
        pass
"""
    assert len(destructive_sites(old, "old.py")) == 3
