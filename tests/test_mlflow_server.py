"""The project's MLflow server script: loopback by default, a real server the pipeline logs to."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.mlflow_server import SCRIPT, free_port


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.add(address)
    return found


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
@pytest.mark.integration
def test_server_binds_to_loopback_unless_told_otherwise(tmp_path: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("HOST", "MLFLOW_TRACKING_URI")}
    env.update(
        MLFLOW_BACKEND_STORE_URI=f"sqlite:///{tmp_path / 'm.db'}",
        MLFLOW_ARTIFACTS_DESTINATION=str(tmp_path / "art"),
        MLFLOW_SERVER_STATE_DIR=str(tmp_path),
    )
    started = subprocess.run(
        [str(SCRIPT), "--background", "--port", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        addresses = listening_addresses(port)
        assert addresses == {"0100007F"}, addresses  # 127.0.0.1 only: nothing on 0.0.0.0 or ::
    finally:
        subprocess.run(
            [str(SCRIPT), "stop", "--port", str(port)], env=env, capture_output=True, text=True, timeout=120
        )


def ui_recipe(port: int, base: Path) -> str:
    """What `make ui` runs, read from the Makefile by a dry run (nothing is installed or started), with
    its port, store and artifacts under `base`."""
    places = [f"UI_PORT={port}", f"UI_STORE=sqlite:///{base / 'ui.db'}", f"UI_ARTIFACTS={base / 'artifacts'}"]
    dry = subprocess.run(
        ["make", "-n", "-s", "-o", ".venv/.installed", "ui", *places],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return dry.stdout


def server_processes(port: int) -> list[str]:
    """The processes serving `port` (`mlflow server` and uvicorn: scripts/ui.sh starts them in a session
    of their own), by their command lines."""
    ps = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True)
    return [
        line.strip()
        for line in ps.stdout.splitlines()
        if f"--port {port}" in line and ("mlflow" in line or "uvicorn" in line)
    ]


def wait_for_health(url: str, proc: subprocess.Popen, timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        assert proc.poll() is None, f"the server exited with {proc.returncode}"
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            if response.status == 200:
                return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"{url}/health did not answer within {timeout_s} s")


def start_ui(port: int, base: Path, *, sigint: Any = signal.SIG_DFL) -> subprocess.Popen:
    """`make ui`'s command, run as make runs it (bash -c), in a session of its own as a terminal's
    foreground group; SIGINT at its default (a shell that started pytest in the background may ignore
    it), or ignored (`sigint=signal.SIG_IGN`) as a script's `make ui &` starts it."""
    recipe = ui_recipe(port, base)
    assert "scripts/ui.sh" in recipe
    with open(base / "ui.log", "w") as log:
        return subprocess.Popen(
            ["bash", "-c", recipe],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
        )


def stop_leftovers(port: int) -> None:
    for line in server_processes(port):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
@pytest.mark.integration
def test_make_ui_answers_in_seconds_and_one_sigterm_stops_all_of_it(tmp_path: Path):
    """`make ui` (scripts/ui.sh): one server process with one worker, no job runner, and nothing left
    after one SIGTERM (make passes it on)."""
    script = (ROOT / "scripts" / "ui.sh").read_text()
    assert "MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false" in script and "--workers 1" in script
    port = free_port()
    proc = start_ui(port, tmp_path)
    try:
        up_s = wait_for_health(f"http://127.0.0.1:{port}", proc, timeout_s=120)
        processes = server_processes(port)
        assert len(processes) <= 2, processes  # `mlflow server` and uvicorn: no huey job consumers
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        stop_s = time.monotonic() - signalled
        deadline = time.monotonic() + 10
        while server_processes(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server_processes(port) == [], (tmp_path / "ui.log").read_text()[-3000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stop_leftovers(port)
    print(
        f"\nmake ui: /health answered after {up_s:.1f} s ({len(processes)} processes); one SIGTERM stopped it in {stop_s:.1f} s"
    )


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
@pytest.mark.integration
def test_make_ui_is_quiet_and_one_ctrl_c_stops_it_cleanly(tmp_path: Path):
    """A terminal's Ctrl-C (SIGINT to the whole foreground group) after the UI served pages: the
    output is the address and the stop, with no access-log line per request, no deprecation warning, no
    database set-up lines and no traceback. Started as a script's `make ui &` starts it (SIGINT ignored,
    which bash can neither trap nor reset: the script starts itself again with it at its default)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_ui(port, tmp_path, sigint=signal.SIG_IGN)
    try:
        up_s = wait_for_health(url, proc, timeout_s=120)
        # as a user does: browse once the script says where (its own probe may answer a moment later)
        deadline = time.monotonic() + 60
        while f"ui: {url} " not in (tmp_path / "ui.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        started = time.monotonic()
        for _ in range(5):
            for path in ("/", "/ajax-api/2.0/mlflow/experiments/search?max_results=10"):
                with urllib.request.urlopen(url + path, timeout=30) as response:
                    assert response.status == 200
        served_s = (time.monotonic() - started) / 10
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while server_processes(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server_processes(port) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stop_leftovers(port)
    output = (tmp_path / "ui.log").read_text()
    assert f"ui: {url} " in output and "Ctrl-C stops it" in output, output
    for noise in ("GET /", '" 200', "Deprecat", "Traceback", "CancelledError", "database tables"):
        assert noise not in output, f"{noise!r} in make ui's output:\n{output}"
    assert len(output.splitlines()) <= 4, output
    print(
        f"\nmake ui: up in {up_s:.1f} s, a request answered in {served_s * 1000:.0f} ms on average; output:\n{output}"
    )
