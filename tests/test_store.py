"""The MLflow store, as jobs meet it for real: a new sqlite file opened by many jobs at once, one left
half set up, one in a read-only folder, a server reached with credentials in its URI, a server that
goes away mid-job. Each either works or is refused in one line, within seconds."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import (
    TINY,
    finish,
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
def test_twelve_jobs_on_a_new_sqlite_store_all_finish(tmp_path: Path):
    """Twelve jobs started together on a sqlite file that does not exist yet: MLflow's set-up of a new
    store is serialized (a lock beside the file), so none fails and the store stays usable."""
    store = sqlite_uri(tmp_path / "new.db")
    procs = [popen_cli([*EAGER, f"trainer.seed={i}"], tmp_path / f"job{i}", store) for i in range(12)]
    done = [finish(p) for p in procs]
    for proc in done:
        assert proc.returncode == 0, output(proc)
    finished = runs(store)
    assert len(finished) == 12 and {r.info.status for r in finished} == {"FINISHED"}
    assert sorted(int(r.data.params["trainer.seed"]) for r in finished) == list(range(12))
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
