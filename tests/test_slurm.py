"""A sweep through SLURM, end to end: scripts/slurm-up.sh brings up a one-node cluster on this machine,
a real MLflow server takes the runs, and `hydra/launcher=slurm` submits the jobs with sbatch.

Needs root (it installs slurm-wlm, munge and mariadb-server with apt-get when missing and starts
their daemons); skipped only where it cannot run at all (not root, or neither SLURM nor apt-get).
If the cluster does not come up, the test fails with the script's output.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY, output, run_cli, runs

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The local cluster declares no GPUs and has few CPUs: what the sweep overrides in the launcher.
NO_GPU_SMALL_NODE = ["hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1"]


def _sh(*cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)


def _cluster_answers() -> bool:
    return shutil.which("scontrol") is not None and "is UP" in _sh("scontrol", "ping").stdout


@pytest.fixture(scope="module")
def slurm_cluster():
    """The single-node cluster of scripts/slurm-up.sh; stopped at the end if this test started it."""
    if os.geteuid() != 0:
        pytest.skip("SLURM integration test: needs root (slurm-up.sh installs packages, starts daemons)")
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        pytest.skip("SLURM integration test: no SLURM installed and no apt-get to install it")
    was_up = _cluster_answers()
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm-up.sh")],
        capture_output=True,
        text=True,
        timeout=1200,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    took = time.monotonic() - started
    assert proc.returncode == 0, f"scripts/slurm-up.sh failed after {took:.0f} s\n{output(proc)}"
    yield {"log": proc.stdout, "seconds": took}
    if not was_up:
        subprocess.run(["bash", str(ROOT / "scripts" / "slurm-down.sh")], timeout=300, check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory):
    """A real `mlflow server` on a free loopback port, over a sqlite store; killed at the end."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        # mlflow 3's server starts job-runner processes by default: slow on small machines, unused here.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    log = open(root / "server.log", "w")  # noqa: SIM115 (open for the server's lifetime)
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    cmd += ["--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}"]
    cmd += ["--artifacts-destination", str(root / "artifacts")]
    server = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # its own process group: uvicorn and its workers end with it
    )
    try:
        deadline = time.monotonic() + 300
        while not _healthy(url):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"mlflow server did not come up on {url}:\n{(root / 'server.log').read_text()[-4000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(server.pid, sig)
            except ProcessLookupError:
                break
            try:
                server.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()


def _sacct(job_id: str) -> list[str] | None:
    """sacct's record of the job whose SLURM_JOB_ID is job_id: [JobID, JobIDRaw, State, ExitCode, NodeList].
    (`sacct -j <id>` of the array's first id lists the whole array: pick the row by JobIDRaw.)"""
    proc = _sh("sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,JobIDRaw,State,ExitCode,NodeList")
    assert proc.returncode == 0, f"sacct -j {job_id}: {proc.stderr}"
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return next((row for row in rows if row[1] == job_id), None)


def test_sweep_runs_as_slurm_jobs(slurm_cluster, mlflow_server: str, tmp_path: Path, capsys):
    name = f"pytest-slurm-{uuid.uuid4().hex[:6]}"  # to find (and cancel) this test's jobs
    args = [
        "hydra/launcher=slurm",
        *NO_GPU_SMALL_NODE,
        f"hydra.launcher.name={name}",
        "hydra.launcher.timeout_min=20",
        *TINY,
        "compile.mode=eager",
        "precision=amp,fp32",
    ]
    try:
        proc = run_cli(args, tmp_path, mlflow_server, multirun=True, timeout=1200)
    finally:
        _sh("scancel", "--name", name)  # nothing left behind if the sweep failed or timed out
    sinfo = _sh("sinfo").stdout
    jobs = _sh("sacct", "-X", "-P", "--name", name, "-o", "JobID,JobIDRaw,State,Elapsed,NodeList").stdout
    with capsys.disabled():  # in the CI log even when the test passes
        print(f"\n--- slurm-up.sh ({slurm_cluster['seconds']:.0f} s)\n{slurm_cluster['log'].strip()}")
        print(f"--- sinfo\n{sinfo.strip()}\n--- sacct --name {name}\n{jobs.strip()}")
    assert proc.returncode == 0, output(proc)

    all_runs = runs(mlflow_server)
    parents = [r for r in all_runs if r.data.tags.get("sweep_parent") == "true"]
    assert len(parents) == 1, [r.info.run_name for r in parents]
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    children = [r for r in all_runs if r.data.tags.get("sweep_parent") != "true"]
    assert sorted(r.data.tags["precision"] for r in children) == ["amp", "fp32"]

    seen = set()
    for run in children:
        tags = run.data.tags
        assert run.info.status == "FINISHED", (run.info.run_name, tags.get("error_message"))
        assert tags.get("mlflow.parentRunId") == parent.info.run_id
        assert tags.get("sweep_id") == parent.data.tags["sweep_id"]
        job_id = tags.get("slurm_job_id")
        assert job_id, f"{run.info.run_name}: no slurm_job_id tag: {sorted(tags)}"
        # SLURM_JOB_ID of an array task is its own id; sacct shows it as <array id>_<task id>.
        array_name = f"{tags['slurm_array_job_id']}_{tags['slurm_array_task_id']}"
        deadline = time.monotonic() + 60  # slurmctld hands finished jobs to slurmdbd asynchronously
        while (row := _sacct(job_id)) is None or row[2] != "COMPLETED":
            assert time.monotonic() < deadline, f"sacct -j {job_id}: {row}"
            time.sleep(1)
        assert row[0] == array_name, row
        seen.add(job_id)
        with capsys.disabled():
            print(f"run {run.info.run_name}: slurm_job_id {job_id} = {array_name}, sacct {row}")
    assert len(seen) == 2  # two distinct SLURM jobs
    array_ids = {r.data.tags["slurm_array_job_id"] for r in children}
    assert len(array_ids) == 1, array_ids  # one job array for the sweep
