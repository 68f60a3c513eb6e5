"""Faults, injected for real: out of memory, segfault, SIGKILL, SIGTERM, an unreachable or lost MLflow
store, concurrent logging, and secrets. Nothing finished is lost; nothing is left RUNNING."""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY, client, output, run_cli, run_report, runs, with_host_check
from tests.mlflow_server import free_port, start_server

# A linear model from tests/fault_models.py on 32 px images, 4 steps, eager.
FAULTY = [
    "model.id=faulty",
    "model.name=null",
    "model.input.height=32",
    "model.input.width=32",
    "model.input.num_classes=10",
    "model.batch_size=2",
    "trainer.steps=4",
    "trainer.warmup_steps=1",
    "compile.mode=eager",
]
FAST_FAIL_HTTP = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}


def only_run(store: str):
    (run,) = runs(store)
    return run


def start_cli(args: list[str], tmp_path: Path, store: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "pipeline.run",
        *with_host_check(args),
        f"mlflow.tracking_uri={store}",
        f"hydra.run.dir={tmp_path}/run",
    ]
    full_env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}, **(env or {})}
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=full_env,
    )


def wait_for_file(path: Path, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.2)
    raise AssertionError(f"{path} never appeared")


def wait_for_job_under_way(job_dir: Path, store: str, timeout: float = 300) -> None:
    """Until the job is under way: its worker started and its MLflow run open (the job opens it while
    the worker imports its libraries)."""
    deadline = time.monotonic() + timeout
    log = job_dir / "worker.log"
    while time.monotonic() < deadline:
        if (job_dir / "worker.pid").exists() and log.exists() and runs(store):
            return
        time.sleep(0.2)
    raise AssertionError("the job never got under way")


def pause_worker(job_dir: Path, timeout: float = 300) -> int:
    """The job's worker, paused (SIGSTOP to its process group) as soon as it leads one; its pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):  # no pid yet, or the worker's group not made yet
            worker = int((job_dir / "worker.pid").read_text())
            os.killpg(worker, signal.SIGSTOP)
            return worker
        time.sleep(0.02)
    raise AssertionError("the job never started its worker")


def test_out_of_memory_is_recorded_with_peak_memory(tmp_path: Path, store: str):
    proc = run_cli([*FAULTY, "model._target_=tests.fault_models.out_of_memory"], tmp_path, store)
    assert proc.returncode == 1, output(proc)
    run = only_run(store)
    assert run.info.status == "FAILED"
    assert run.data.tags["error_type"] == "OutOfMemoryError"
    assert "allocate" in run.data.tags["error_message"]
    assert (
        run.data.metrics["memory/cpu_rss_peak_gib"] > 0
    )  # the peak up to the failure (GPU peaks too on a GPU)
    assert "FAILED: OutOfMemoryError" in proc.stdout
    error = (tmp_path / "run" / "error.txt").read_text()
    assert "Traceback" in error and "fault_models.py" in error
    assert "error.txt" in {a.path for a in client(store).list_artifacts(run.info.run_id)}


def test_a_loss_that_becomes_nan_fails_the_job_says_so_and_is_logged(tmp_path: Path, store: str):
    """Issue 41: an eager job whose loss turned NaN ended FINISHED with no word of it, and its NaN losses
    were dropped from what was logged. Now it fails (`NonFiniteLoss`, its figures kept), its last line
    says from which step, and the NaN losses are in its run."""
    proc = run_cli([*FAULTY, "model._target_=tests.fault_models.nan_output"], tmp_path, store)
    assert proc.returncode == 1, output(proc)
    (last,) = [line for line in proc.stdout.splitlines() if ": FAILED: NonFiniteLoss: " in line]
    assert "the loss is NaN from step 1 (3 of 4 steps not finite)" in last, last
    run = only_run(store)
    assert run.info.status == "FAILED" and run.data.tags["error_type"] == "NonFiniteLoss"
    metrics = run.data.metrics
    assert metrics["loss/non_finite_steps"] == 3 and metrics["loss/first_non_finite_step"] == 1
    assert math.isnan(metrics["loss/final"]) and math.isfinite(metrics["loss/first"])
    assert metrics["step/p50_ms"] > 0  # its figures are kept
    curve = client(store).get_metric_history(run.info.run_id, "curve/loss")
    assert [p.step for p in curve] == [0, 1, 2, 3] and [math.isnan(p.value) for p in curve] == [
        False,
        True,
        True,
        True,
    ]


def test_a_sweeps_job_whose_loss_diverges_is_never_ranked_and_counts_as_failed(tmp_path: Path, store: str):
    """Issue 41: in a sweep, an eager job whose loss was NaN from step 1 (`trainer.optimizer.lr=1e30`) was
    named fastest; the totals read `failed: 0`. Now it is a failure of its own class, never ranked."""
    proc = run_cli(
        [*TINY, "compile.mode=eager", "trainer.optimizer.lr=0.001,1e30", "sweep.id=nan"],
        tmp_path,
        store,
        multirun=True,
    )
    assert proc.returncode == 1, output(proc)
    assert "jobs: 2, failed: 1" in proc.stdout and "failures by class: 1 non-finite loss" in proc.stdout
    all_runs = runs(store)
    (parent,) = [r for r in all_runs if r.data.tags.get("sweep_parent") == "true"]
    (diverged,) = [r for r in all_runs if r.data.params.get("trainer.optimizer.lr") == "1e+30"]
    assert diverged.info.status == "FAILED" and diverged.data.tags["error_type"] == "NonFiniteLoss"
    assert parent.data.tags["jobs_failed"] == "1" and parent.data.tags.get("verdict") != "fastest"
    assert parent.data.tags.get("fastest_run_id") != diverged.info.run_id
    lines = (tmp_path / "multirun" / "summary.md").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| 1e+30 |"))
    row, header = lines[at], next(line for line in reversed(lines[:at]) if "| status |" in line)
    names, cells = ([c.strip() for c in line.strip("|").split("|")][1:] for line in (header, row))  # after lr
    shown = dict(zip(names, cells, strict=True))
    assert "FAILED (NonFiniteLoss)" in row and "★" not in row, row
    assert next(iter(shown.values())) == "FAILED", (header, row)  # its figure: none, never ranked
    # nor any other figure of it, but the peak memory it reached (kept, as an out-of-memory job's is)
    assert not any(re.match(r"\d", v) for k, v in shown.items() if "GiB" not in k), (header, row)


def test_segfault_in_the_worker_is_recorded(tmp_path: Path, store: str):
    proc = run_cli([*FAULTY, "model._target_=tests.fault_models.segfault"], tmp_path, store)
    assert proc.returncode == 1, output(proc)
    run = only_run(store)
    assert run.info.status == "FAILED" and run.data.tags["error_type"] == "WorkerCrashed"
    assert "killed by SIGSEGV" in run.data.tags["error_message"]
    assert "Segmentation fault" in (tmp_path / "run" / "worker.log").read_text()  # faulthandler's stack


def test_worker_killed_by_sigkill_is_recorded(tmp_path: Path, store: str):
    proc = start_cli([*TINY, "compile.mode=eager", "trainer.steps=100000"], tmp_path, store)
    pid = int(wait_for_file(tmp_path / "run" / "worker.pid"))
    time.sleep(2)
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    run = only_run(store)
    assert run.info.status == "FAILED" and run.data.tags["error_type"] == "WorkerCrashed"
    assert "killed by SIGKILL" in run.data.tags["error_message"]
    assert "WorkerCrashed" in out


def test_sigterm_to_the_job_ends_its_run_killed(tmp_path: Path, store: str):
    """What `scancel` or `kill` does to a job: the worker dies with it, the run ends KILLED."""
    proc = start_cli([*TINY, "compile.mode=eager", "trainer.steps=100000"], tmp_path, store)
    worker = int(wait_for_file(tmp_path / "run" / "worker.pid"))
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    run = only_run(store)
    assert run.info.status == "KILLED" and run.data.tags["error_type"] == "Interrupted"
    assert "SIGTERM" in run.data.tags["error_message"]
    assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()


def test_sigterm_as_the_worker_starts_still_records_the_run_killed(tmp_path: Path, store: str):
    """The worker starts before the job opens its MLflow run (its imports overlap MLflow's); a signal
    in between is held until the run exists, so the stopped job is recorded, never lost."""
    proc = start_cli([*TINY, "compile.mode=eager", "trainer.steps=100000"], tmp_path, store)
    worker = int(wait_for_file(tmp_path / "run" / "worker.pid", timeout=120))
    proc.send_signal(signal.SIGTERM)  # at once: the job is still opening its run
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    run = only_run(store)
    assert run.info.status == "KILLED" and "SIGTERM" in run.data.tags["error_message"]
    assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()


def test_signals_held_are_delivered_after_the_critical_section():
    from pipeline.job.signals import signals_held

    events: list[str] = []

    def on_term(signum, frame):
        events.append("handler")
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"), signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            events.append("section finished")
        assert events == ["section finished", "handler"]
        assert signal.getsignal(signal.SIGTERM) is on_term
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_signals_held_outside_the_main_thread_holds_nothing_and_does_not_fail():
    """A launcher may run the job in a thread, where Python cannot set signal handlers."""
    import threading

    from pipeline.job.signals import signals_held

    done: list[str] = []

    def job() -> None:
        with signals_held():
            done.append("opened")

    thread = threading.Thread(target=job)
    thread.start()
    thread.join()
    assert done == ["opened"]


def test_a_store_that_answers_health_but_refuses_the_run_stops_the_job_with_one_line(tmp_path: Path):
    """The store passes the start check, then fails when the job opens its run (the worker is already
    importing): the job says so in one line, stops its worker and leaves no run and no process."""
    import http.server
    import threading

    class HealthOnly(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 503)
            self.end_headers()
            self.wfile.write(b"OK" if self.path == "/health" else b"down for maintenance")

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HealthOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        proc = run_cli([*TINY, "compile.mode=eager"], tmp_path, url, env=FAST_FAIL_HTTP)
    finally:
        server.shutdown()
    assert proc.returncode == 1, output(proc)
    assert "mlflow error: could not open the job's run" in proc.stderr and "Traceback" not in proc.stderr
    worker = int((tmp_path / "run" / "worker.pid").read_text())  # it had started, and was stopped
    assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()
    assert not (tmp_path / "run" / "result.json").exists()


def test_unreachable_store_fails_fast_before_training(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    proc = run_cli([*TINY, "compile.mode=eager"], tmp_path, url, env=FAST_FAIL_HTTP)
    assert proc.returncode == 1, output(proc)
    assert f"mlflow error: MLflow server at {url} is not reachable" in proc.stderr
    assert not (tmp_path / "run" / "worker.log").exists()  # nothing trained
    sweep = run_cli(
        [*TINY, "compile.mode=eager", "trainer.seed=0,1"], tmp_path, url, multirun=True, env=FAST_FAIL_HTTP
    )
    assert sweep.returncode == 1, output(sweep)
    assert "is not reachable" in sweep.stderr and "Traceback" not in sweep.stderr
    assert not list((tmp_path / "multirun").glob("*/worker.log"))
    assert time.monotonic() - start < 120


@pytest.mark.integration
@pytest.mark.slow
def test_store_lost_mid_job_keeps_the_result_and_sync_uploads_it(tmp_path: Path):
    server = start_server(tmp_path / "server")
    try:
        proc = start_cli(
            [*TINY, "compile.mode=eager", "trainer.steps=60"], tmp_path, server.url, env=FAST_FAIL_HTTP
        )
        # the store goes away while the job trains: its worker paused from its start until then, so that
        # a busy host's slow look at the store or slow stop never lets the job finish and log first
        worker = pause_worker(tmp_path / "run")
        try:
            wait_for_job_under_way(tmp_path / "run", server.url)
            server.stop()
        finally:
            os.killpg(worker, signal.SIGCONT)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 1, out + err
        assert "could not log run" in err and "pipeline.report --sync" in err
        result = json.loads((tmp_path / "run" / "result.json").read_text())
        assert (
            result["status"] == "FINISHED"
            and result["mlflow_synced"] is False
            and result["metrics"]["step/p50_ms"] > 0
        )
    finally:
        server.stop()
    server = start_server(tmp_path / "server")  # the same store comes back (on another port)
    try:
        sync = run_report("--tracking-uri", server.url, "--sync", str(tmp_path / "run"))
        assert sync.returncode == 0, sync.stdout + sync.stderr
        (run,) = runs(server.url)
        assert run.info.run_id == result["mlflow_run_id"]  # the job's own run, left RUNNING, now complete
        assert run.info.status == "FINISHED" and run.data.metrics["step/p50_ms"] == pytest.approx(
            result["metrics"]["step/p50_ms"]
        )
        assert json.loads((tmp_path / "run" / "result.json").read_text())["mlflow_synced"] is True
        again = run_report("--tracking-uri", server.url, "--sync", str(tmp_path / "run"))
        assert again.returncode == 0 and "nothing to sync" in again.stdout
    finally:
        server.stop()


def run_eight_at_once(tmp_path: Path, store: str) -> list[subprocess.CompletedProcess]:
    procs = [
        start_cli(
            [*TINY, "compile.mode=eager", f"trainer.seed={i}", f"hydra.run.dir={tmp_path}/job{i}"],
            tmp_path / f"p{i}",
            store,
        )
        for i in range(8)
    ]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=900), *p.communicate()) for p in procs]


def check_eight(store: str, done: list[subprocess.CompletedProcess]) -> None:
    for proc in done:
        assert proc.returncode == 0, output(proc)
        assert "database is locked" not in proc.stdout + proc.stderr
    finished = runs(store)
    assert len(finished) == 8 and all(r.info.status == "FINISHED" for r in finished)
    c = client(store)
    for run in finished:
        assert {"step/p50_ms", "loss/final", "throughput/samples_per_s", "memory/cpu_rss_peak_gib"} <= set(
            run.data.metrics
        )
        assert len(c.get_metric_history(run.info.run_id, "curve/loss")) == 4
        assert "config.yaml" in {a.path for a in c.list_artifacts(run.info.run_id)}


@pytest.mark.slow
@pytest.mark.integration
def test_eight_jobs_log_at_once_to_an_mlflow_server(tmp_path: Path):
    server = start_server(tmp_path / "server")
    try:
        check_eight(server.url, run_eight_at_once(tmp_path, server.url))
    finally:
        server.stop()


def test_secrets_and_the_environment_are_never_logged(tmp_path: Path, store: str):
    secret, env_secret = "s3cr3t-config-value", "s3cr3t-env-value"
    args = [*FAULTY, "model._target_=tests.fault_models.with_secret", f"+model.kwargs.access_token={secret}"]
    proc = run_cli(args, tmp_path, store, env={"HF_TOKEN": env_secret, "MY_SERVICE_PASSWORD": env_secret})
    assert proc.returncode == 0, output(proc)
    run = only_run(store)
    assert run.data.params["model.kwargs.access_token"] == "***"
    logged = json.dumps(run.data.params) + json.dumps(run.data.tags)
    c = client(store)
    for artifact in c.list_artifacts(run.info.run_id):
        if not artifact.is_dir:
            logged += Path(
                c.download_artifacts(run.info.run_id, artifact.path, str(tmp_path / "dl"))
            ).read_text(errors="replace")
    assert secret not in logged and env_secret not in logged
    assert "HF_TOKEN" not in logged


def test_no_eval_or_exec_of_config_strings():
    for package in ("pipeline", "models", "losses"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    assert node.func.id not in ("eval", "exec"), f"{path}:{node.lineno}"


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def everything_logged(store: str, tmp_path: Path) -> str:
    """Every run's name, tags, params and description, and the text of every artifact, as one string."""
    c = client(store)
    text = ""
    for i, run in enumerate(runs(store)):
        text += f"{run.info.run_name}\n{run.data.tags}\n{run.data.params}\n"
        folder = Path(c.download_artifacts(run.info.run_id, "", str(tmp_path / f"artifacts{i}")))
        for path in folder.rglob("*"):
            if path.is_file():
                text += path.read_text(errors="replace")
    return text


@pytest.mark.slow
def test_swept_secrets_and_bad_input_overrides_never_reach_mlflow(tmp_path: Path, store: str):
    """A swept secret-looking key and a passphrase, in a sweep with bad-input jobs: no value reaches a
    run name, tag (sweep_axes, overrides, command), param, description or artifact."""
    first, second, phrase = "pw-first-1234", "pw-second-5678", "phrase-90123"
    args = [
        *FAULTY,
        "model._target_=tests.fault_models.with_secret",
        f"+model.kwargs.db_password={first},{second}",
        f"+model.kwargs.auth_passphrase={phrase}",
        "trainer.batch_size=2,0",
    ]
    proc = run_cli(args, tmp_path, store, multirun=True)
    assert proc.returncode == 1, output(proc)  # the two bad-input jobs
    statuses = sorted(r.info.status for r in runs(store) if r.data.tags.get("sweep_parent") != "true")
    assert statuses == ["FAILED", "FAILED", "FINISHED", "FINISHED"]
    logged = everything_logged(store, tmp_path)
    for secret in (first, second, phrase):
        assert secret not in logged, secret
    assert "db_password=***" in logged and "auth_passphrase" in logged  # the keys are there, masked


def test_the_worker_dies_with_its_job_process(tmp_path: Path, store: str):
    """`kill -9` of the job: its worker ends at once (no orphan holding the device, no late result)."""
    assert runs(store) == []  # the store exists before the job starts: the polling below races nothing
    proc = start_cli([*TINY, "compile.mode=eager", "trainer.steps=100000"], tmp_path, store)
    worker = int(wait_for_file(tmp_path / "run" / "worker.pid"))
    try:
        wait_for_job_under_way(tmp_path / "run", store)
        proc.kill()
        proc.wait()
        wait_until(lambda: gone(worker), 10, "the worker outlived its job process")
        time.sleep(2)
        assert not (tmp_path / "run" / "result.json").exists()  # no spurious result either
    finally:
        if not gone(worker):
            os.killpg(worker, signal.SIGKILL)
    # --sync closes what the job could not.
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "run"))
    assert sync.returncode == 0 and "nothing to sync" in sync.stdout, sync.stdout + sync.stderr
    (run,) = runs(store)
    assert run.info.status == "KILLED" and run.data.tags["error_type"] == "JobLost"


@pytest.mark.slow
def test_a_worker_whose_job_hangs_ends_itself_and_sync_records_it_in_the_jobs_run(tmp_path: Path, store: str):
    """The job process stops (SIGSTOP: hung) after opening its run: the worker ends itself
    trainer.timeout_s (+ a grace) after it started, with a Timeout result, and `--sync` records that
    result in the job's own run, adding none."""
    assert runs(store) == []  # the store exists before the job starts: the polling below races nothing
    proc = start_cli(
        [*TINY, "compile.mode=eager", "trainer.steps=100000", "trainer.timeout_s=20"], tmp_path, store
    )
    worker = int(wait_for_file(tmp_path / "run" / "worker.pid"))
    try:
        wait_for_job_under_way(tmp_path / "run", store)
        proc.send_signal(signal.SIGSTOP)
        wait_until(lambda: gone(worker), 120, "the worker ran on past its timeout")
    finally:
        proc.kill()
        proc.wait()
        if not gone(worker):
            os.killpg(worker, signal.SIGKILL)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "KILLED" and result["error"]["type"] == "Timeout"
    assert "trainer.timeout_s=20" in result["error"]["message"]
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "run"))
    assert sync.returncode == 0, sync.stdout + sync.stderr
    (run,) = runs(store)
    assert run.info.status == "KILLED" and run.data.tags["error_type"] == "Timeout"


@pytest.mark.slow
def test_sync_never_overrides_a_finished_run_nor_adds_one(tmp_path: Path, store: str):
    """A late failure result beside a job whose run FINISHED (what a worker that outlived its job
    used to write): `--sync` keeps the FINISHED run as it is and makes no second run."""
    proc = run_cli([*TINY, "compile.mode=eager"], tmp_path, store)
    assert proc.returncode == 0, output(proc)
    (finished,) = runs(store)
    path = tmp_path / "run" / "result.json"
    late = json.loads(path.read_text())
    late.update(status="FAILED", mlflow_run_id=None, mlflow_synced=False)
    late["error"] = {"type": "BrokenPipeError", "message": "[Errno 32] Broken pipe", "traceback": ""}
    path.write_text(json.dumps(late))
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "run"))
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert "kept: the run is FINISHED in MLflow" in sync.stdout
    (run,) = runs(store)
    assert run.info.run_id == finished.info.run_id and run.info.status == "FINISHED"
    assert "error_type" not in run.data.tags
    assert len(client(store).get_metric_history(run.info.run_id, "curve/loss")) == 4


@pytest.mark.slow
def test_an_artifact_store_failure_closes_the_run_with_the_reason_and_sync_completes_it(
    tmp_path: Path, store: str, full_dir: Path
):
    """The artifact store is full (a full tmpfs) in a sweep: the job's run ends FAILED with the real
    error (not RUNNING, not `JobLost`), the sweep says its end failed, nothing stays RUNNING; once
    there is room, `--sync` completes both runs without doubling any metric history."""
    args = [*TINY, "compile.mode=eager", "trainer.seed=0", f"mlflow.artifact_location=file://{full_dir}"]
    proc = run_cli(args, tmp_path, store, multirun=True)
    assert proc.returncode == 1, output(proc)
    assert any(line.startswith("mlflow error: could not log run") for line in proc.stderr.splitlines())
    parent, (job,) = split_sweep(store)
    assert job.info.status == "FAILED" and job.data.tags["error_type"] == "ResultNotLogged", job.data.tags
    assert "No space left on device" in job.data.tags["error_message"]
    assert parent.info.status == "FAILED" and parent.data.tags["error_type"] == "SweepEndFailed"
    assert job.data.metrics["step/p50_ms"] > 0  # what the store took is kept

    (full_dir / "filler").unlink()  # room again
    # the sweep's last line, pasted as printed, from elsewhere
    command = re.findall(r"`([^`]*--sync[^`]*)`", proc.stderr)[-1]
    assert shlex.split(command)[-1] == str(tmp_path / "multirun"), proc.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | {"PYTHONPATH": str(ROOT)}
    sync = subprocess.run(
        [sys.executable, *shlex.split(command)[1:]], cwd=elsewhere, capture_output=True, text=True, env=env
    )
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert not (elsewhere / "outputs").exists()  # nothing logged to the default store where it was pasted
    parent, (job,) = split_sweep(store)
    assert job.info.status == "FINISHED" and "error_type" not in job.data.tags
    assert parent.info.status == "FINISHED" and "error_type" not in parent.data.tags
    c = client(store)
    assert [p.step for p in c.get_metric_history(job.info.run_id, "curve/loss")] == [0, 1, 2, 3]
    assert {"summary.md", "summary.csv"} <= {a.path for a in c.list_artifacts(parent.info.run_id)}
    assert "config.yaml" in {a.path for a in c.list_artifacts(job.info.run_id)}


def split_sweep(store: str) -> tuple[object, list]:
    all_runs = runs(store)
    (parent,) = [r for r in all_runs if r.data.tags.get("sweep_parent") == "true"]
    return parent, [r for r in all_runs if r.data.tags.get("sweep_parent") != "true"]


@pytest.mark.slow
def test_sigterm_to_a_distributed_job_says_one_line_not_torchs_traceback(tmp_path: Path, store: str):
    """SIGTERM to a DDP job (2 gloo ranks): torch's launcher prints a SignalException traceback as it
    stops its ranks; it stays in worker.log, and the terminal gets the job's own line."""
    proc = start_cli(
        [*TINY, "device=cpu", "compile.mode=eager", "parallel=ddp", "trainer.steps=100000"], tmp_path, store
    )
    try:
        wait_for_job_under_way(tmp_path / "run", store)
        time.sleep(5)  # the ranks are up and measuring
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err and "SignalException" not in out + err, out + err
    assert "interrupted by SIGTERM" in err
    run = only_run(store)
    assert run.info.status == "KILLED" and run.data.tags["error_type"] == "Interrupted"
