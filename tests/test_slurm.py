"""A sweep through SLURM, end to end: scripts/slurm-up.sh brings up a one-node cluster on this machine,
a real MLflow server takes the runs, and `hydra/launcher=slurm` submits the jobs with sbatch.

Needs root (it installs slurm-wlm, munge and mariadb-server with apt-get when missing and starts
their daemons); skipped only where it cannot run at all (not root, or neither SLURM nor apt-get).
If the cluster does not come up, the test fails with the script's output.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, SLEEPY, TINY, client, output, run_cli, runs, with_host_check
from tests.mlflow_server import start_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The jobs that run for ages sleep through their steps (SLEEPY) rather than train flat out on a core that the
# other tests need: slurmd's processes are no test's children, so their CPU time shows in no test's figures.

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


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory):
    """A real MLflow server started by the project's script, on a free loopback port."""
    server = start_server(tmp_path_factory.mktemp("mlflow-server"))
    yield server.url
    server.stop()


def make_sweep(
    args: list[str], tmp_path: Path, url: str, timeout: float = 1200
) -> subprocess.CompletedProcess:
    """`make sweep ARGS=...` as a user runs it, logging to the server through MLFLOW_TRACKING_URI."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": url, "PYTHONUNBUFFERED": "1"}
    make_args = " ".join([*with_host_check(args), f"hydra.sweep.dir={tmp_path}/multirun"])
    return subprocess.run(
        ["make", "--no-print-directory", "sweep", f"ARGS={make_args}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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
        *NO_GPU_SMALL_NODE,
        f"hydra.launcher.name={name}",
        f"sweep.id={name}",
        "hydra.launcher.timeout_min=20",
        *TINY,
        "compile.mode=eager",
        "precision=amp,fp32",
    ]
    try:
        proc = make_sweep(args, tmp_path, mlflow_server)
    finally:
        _sh("scancel", "--name", name)  # nothing left behind if the sweep failed or timed out
    sinfo = _sh("sinfo").stdout
    jobs = _sh("sacct", "-X", "-P", "--name", name, "-o", "JobID,JobIDRaw,State,Elapsed,NodeList").stdout
    with capsys.disabled():  # in the CI log even when the test passes
        print(f"\n--- slurm-up.sh ({slurm_cluster['seconds']:.0f} s)\n{slurm_cluster['log'].strip()}")
        print(f"--- sinfo\n{sinfo.strip()}\n--- sacct --name {name}\n{jobs.strip()}")
    assert proc.returncode == 0, output(proc)
    assert "jobs done" in proc.stdout  # progress while the array ran
    assert "verdict: " in proc.stdout  # the summary, printed at the end

    parent, by_status = _sweep_runs(mlflow_server, name)
    assert parent.info.status == "FINISHED" and set(by_status) == {"FINISHED"}
    artifacts = {a.path for a in client(mlflow_server).list_artifacts(parent.info.run_id)}
    assert {"summary.md", "summary.csv", "plots"} <= artifacts  # the parent run holds the summary
    children = by_status["FINISHED"]
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


def _wait_running(name: str, task: str, timeout: float = 600) -> tuple[str, str]:
    """Array task `task` of the sweep named `name`, once it runs: its array id (`21_1`, what scancel
    takes: the raw job id of the array's last task is the array's own id, so scancel of it would
    cancel every task) and its raw SLURM job id (what the job sees in SLURM_JOB_ID)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in _sh("squeue", "-h", "--name", name, "-o", "%i %T %A").stdout.splitlines():
            array_task, state, job_id = line.split()
            if array_task.endswith(f"_{task}") and state == "RUNNING":
                return array_task, job_id
        time.sleep(1)
    raise AssertionError(f"array task {task} of {name} never ran: {_sh('squeue').stdout}")


def _long_and_short_sweep(
    tmp_path: Path, url: str, launcher: list[str], during=None
) -> tuple[str, subprocess.CompletedProcess]:
    """A two-job sweep: task 0 trains 4 steps, task 1 for ages; `during(name)` runs meanwhile."""
    name = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    args = [
        *NO_GPU_SMALL_NODE,
        f"hydra.launcher.name={name}",
        *launcher,
        f"sweep.id={name}",
        *TINY,
        *SLEEPY,
        "compile.mode=eager",
        "trainer.steps=4,1000000",
    ]
    helper = threading.Thread(target=during, args=(name,), daemon=True) if during else None
    if helper:
        helper.start()
    try:
        proc = make_sweep(args, tmp_path, url, timeout=900)
    finally:
        _sh("scancel", "--name", name)
    if helper:
        helper.join(timeout=5)
    return name, proc


def _check_one_killed(url: str, name: str, proc: subprocess.CompletedProcess, capsys, *reason: str) -> dict:
    with capsys.disabled():
        print(
            f"\n--- sacct --name {name}\n"
            + _sh("sacct", "-X", "-P", "--name", name, "-o", "JobID,JobIDRaw,State,Elapsed").stdout.strip()
        )
    parent, by_status = _sweep_runs(url, name)
    assert parent.info.status == "FINISHED", output(proc)  # the sweep finished and closed its parent
    assert set(by_status) == {"FINISHED", "KILLED"}, output(proc)
    assert [r.data.params["trainer.steps"] for r in by_status["FINISHED"]] == ["4"]
    (killed,) = by_status["KILLED"]
    assert killed.data.params["trainer.steps"] == "1000000"
    for word in reason:
        assert word in killed.data.tags["error_message"], killed.data.tags["error_message"]
    return killed.data.tags


def test_scancel_ends_that_run_killed_and_the_sweep_finishes(
    slurm_cluster, mlflow_server: str, tmp_path: Path, capsys
):
    cancelled: dict[str, str] = {}

    def cancel_the_long_one(name: str) -> None:
        array_task, cancelled["job"] = _wait_running(name, "1")
        time.sleep(5)
        _sh("scancel", array_task)

    name, proc = _long_and_short_sweep(
        tmp_path, mlflow_server, ["hydra.launcher.timeout_min=20"], during=cancel_the_long_one
    )
    tags = _check_one_killed(mlflow_server, name, proc, capsys, "SIGTERM", "scancel")
    assert tags["slurm_job_id"] == cancelled["job"]


def test_time_limit_ends_that_run_killed_and_the_sweep_finishes(
    slurm_cluster, mlflow_server: str, tmp_path: Path, capsys
):
    """SLURM warns (SIGUSR2) `signal_delay_s` before a job's time limit: the job ends its run KILLED."""
    name, proc = _long_and_short_sweep(
        tmp_path, mlflow_server, ["hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=45"]
    )
    _check_one_killed(mlflow_server, name, proc, capsys, "SIGUSR2", "time limit")


def _job_runs(url: str, sweep_id: str) -> dict[str, str]:
    """Array task -> status of the sweep's job runs (each task has one run)."""
    _, by_status = _sweep_runs(url, sweep_id)
    tasks = [(r.data.tags["slurm_array_task_id"], status) for status, rs in by_status.items() for r in rs]
    assert len({task for task, _ in tasks}) == len(tasks), tasks
    return dict(tasks)


def _sweep_runs(url: str, sweep_id: str) -> tuple[object, dict[str, list]]:
    """The parent and the children by status of one sweep (the module's server holds several)."""
    all_runs = [r for r in runs(url) if r.data.tags.get("sweep_id") == sweep_id]
    parents = [r for r in all_runs if r.data.tags.get("sweep_parent") == "true"]
    assert len(parents) == 1, [r.info.run_name for r in parents]
    by_status: dict[str, list] = {}
    for r in all_runs:
        if r.data.tags.get("sweep_parent") != "true":
            by_status.setdefault(r.info.status, []).append(r)
    return parents[0], by_status


def start_make_sweep(args: list[str], sweep_dir: Path, url: str) -> subprocess.Popen:
    """make_sweep, in the background and in a session of its own (a test can kill the whole driver)."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": url, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [
            "make",
            "--no-print-directory",
            "sweep",
            f"ARGS={' '.join([*with_host_check(args), f'hydra.sweep.dir={sweep_dir}'])}",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _wait_for_run(url: str, sweep_id: str, task: str, timeout: float = 600) -> None:
    """Until array task `task` of the sweep has opened its run (its worker is started by then)."""
    deadline = time.monotonic() + timeout
    while not any(
        r.data.tags.get("sweep_id") == sweep_id and r.data.tags.get("slurm_array_task_id") == task
        for r in runs(url)
    ):
        assert time.monotonic() < deadline, f"task {task} never opened its run: {_sh('squeue').stdout}"
        time.sleep(0.5)


def test_the_readme_sweep_example_finishes_on_the_test_cluster(
    slurm_cluster, mlflow_server: str, tmp_path: Path, capsys
):
    """The README's `make sweep` line, as written, on the cluster `make slurm-up` makes (no GPUs, a
    2-CPU node): the request is fitted to the cluster, the CPU preset runs, every run FINISHED."""
    example = re.search(r'make sweep ARGS="([^"]*)"', (ROOT / "README.md").read_text())
    assert example is not None, "README.md has no `make sweep ARGS=...` example"
    try:
        proc = make_sweep(example[1].split(), tmp_path, mlflow_server, timeout=1500)
    finally:
        arrays = tmp_path / "multirun" / ".slurm_arrays"
        if arrays.exists():
            _sh("scancel", *arrays.read_text().split())
    with capsys.disabled():
        print(f"\n--- make sweep ARGS={example[1]!r}\n{proc.stdout[-3000:]}")
    assert proc.returncode == 0, output(proc)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "slurm: the cluster declares no GPUs" in proc.stdout and "CPU smoke preset" in proc.stdout
    (parent,) = [
        r
        for r in runs(mlflow_server)
        if r.data.tags.get("sweep_dir") == str((tmp_path / "multirun").resolve())
    ]
    _, by_status = _sweep_runs(mlflow_server, parent.data.tags["sweep_id"])
    assert parent.info.status == "FINISHED" and set(by_status) == {"FINISHED"}
    assert sorted(r.data.tags["mode"] for r in by_status["FINISHED"]) == ["default", "max-autotune"]


def test_an_sbatch_refusal_is_one_line_and_closes_the_parent_run(
    slurm_cluster, mlflow_server: str, tmp_path: Path
):
    """sbatch refuses the array (a partition the cluster lacks): one line, exit 1, the parent closed."""
    name = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    args = ["hydra/launcher=slurm", f"hydra.launcher.name={name}", "hydra.launcher.partition=nope"]
    args += [f"sweep.id={name}", *TINY, "compile.mode=eager", "trainer.seed=0,1"]
    proc = run_cli(args, tmp_path, mlflow_server, multirun=True, timeout=300)
    assert proc.returncode == 1, output(proc)
    assert "Traceback" not in proc.stdout + proc.stderr, output(proc)
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("slurm error:")]
    assert "invalid partition" in line.lower(), line
    parent, by_status = _sweep_runs(mlflow_server, name)
    assert parent.info.status == "FAILED" and "invalid partition" in parent.data.tags["error_message"].lower()
    assert by_status == {}


def test_a_task_killed_outright_records_its_own_slurm_state(
    slurm_cluster, mlflow_server: str, tmp_path: Path, capsys
):
    """The job process of the array's last task (whose SLURM_JOB_ID is the array's id) is killed
    outright: its run is closed KILLED with sacct's state of that task, `<array>_1`, not of task 0."""

    def kill_the_long_ones_job(name: str) -> None:
        _wait_running(name, "1")
        _wait_for_run(mlflow_server, name, "1")
        worker = int((tmp_path / "multirun" / "1" / "worker.pid").read_text())
        job = int(Path(f"/proc/{worker}/stat").read_text().split(")")[1].split()[1])  # the worker's parent
        for pid in (job, worker):  # both, as the OOM killer or a node failure would
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    name, proc = _long_and_short_sweep(
        tmp_path, mlflow_server, ["hydra.launcher.timeout_min=20"], during=kill_the_long_ones_job
    )
    parent, by_status = _sweep_runs(mlflow_server, name)
    assert parent.info.status == "FINISHED", output(proc)
    (lost,) = by_status["KILLED"]
    tags = lost.data.tags
    array, task = tags["slurm_array_job_id"], tags["slurm_array_task_id"]
    assert task == "1" and tags["slurm_job_id"] == array  # the task sacct -j <array id> mistakes for all
    with capsys.disabled():
        print(f"\n--- the lost task's run: {tags['error_message']}")
    assert tags["error_type"] == "JobLost"
    assert f"SLURM job {array}_1: " in tags["error_message"]
    assert "COMPLETED" not in tags["error_message"]  # task 0's state


def test_resuming_while_the_sweeps_array_still_runs_is_refused(
    slurm_cluster, mlflow_server: str, tmp_path: Path
):
    """The driver is killed (kill -9 of `make sweep`) while its array runs on: resuming the sweep then
    is refused in one line saying what to do, and nothing runs twice."""
    name = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    args = [
        *NO_GPU_SMALL_NODE,
        f"hydra.launcher.name={name}",
        "hydra.launcher.timeout_min=20",
        f"sweep.id={name}",
        *TINY,
        *SLEEPY,
        "compile.mode=eager",
        "trainer.steps=4,1000000",
    ]
    driver = start_make_sweep(args, tmp_path / "first", mlflow_server)
    try:
        _wait_running(name, "1")
        for task in ("0", "1"):  # both tasks' runs are open (task 0's may open after task 1's)
            _wait_for_run(mlflow_server, name, task)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver dies; the array runs on
        driver.wait()
        before = _job_runs(mlflow_server, name)
        # its own command: `make sweep` added the CPU preset (the cluster has no GPUs); a resumption
        # without it would change the jobs' work, and is refused
        again = [
            "hydra/launcher=slurm",
            "experiment=cpu_smoke",
            *args,
            "sweep.resume=true",
        ]  # exit codes: pipeline.run's, not make's
        resume = run_cli(again, tmp_path / "again", mlflow_server, multirun=True, timeout=300)
        assert resume.returncode == 1, output(resume)
        (line,) = [ln for ln in resume.stderr.splitlines() if ln.startswith("sweep error:")]
        assert f"sweep {name} is still running" in line and "scancel" in line, line
        assert "Traceback" not in resume.stdout + resume.stderr
        after = _job_runs(mlflow_server, name)
        assert set(after) == set(before), (before, after)  # no job ran a second time
        assert after["1"] == "RUNNING" and set(after.values()) <= {
            "RUNNING",
            "FINISHED",
        }  # none closed as lost
    finally:
        _sh("scancel", "--name", name)
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)


def test_a_ddp_sweep_runs_its_ranks_inside_one_slurm_task(slurm_cluster, mlflow_server: str, tmp_path: Path):
    """parallel=ddp through SLURM: the array asks for the ranks' CPUs (nproc x cpus_per_task, fitted to
    the node), one task per job runs torchrun inside its allocation, and the job logs both ranks."""
    name = f"pytest-slurm-ddp-{uuid.uuid4().hex[:6]}"
    args = [
        *NO_GPU_SMALL_NODE,
        f"hydra.launcher.name={name}",
        f"sweep.id={name}",
        "hydra.launcher.timeout_min=20",
        *TINY,
        "device=cpu",
        "compile.mode=eager",
        "parallel=ddp",
        "trainer.seed=0,1",
    ]
    try:
        proc = make_sweep(args, tmp_path, mlflow_server)
    finally:
        _sh("scancel", "--name", name)
    assert proc.returncode == 0, output(proc)
    assert "parallel.nproc=2: asking for cpus_per_task=2" in proc.stdout, output(proc)
    parent, by_status = _sweep_runs(mlflow_server, name)
    assert parent.info.status == "FINISHED" and set(by_status) == {"FINISHED"}, by_status
    for run in by_status["FINISHED"]:
        assert run.data.tags["world_size"] == "2" and run.data.metrics["parallel/world_size"] == 2.0
        assert run.data.tags.get("slurm_job_id")


def test_resuming_after_a_killed_driver_submits_only_what_did_not_finish(
    slurm_cluster, mlflow_server: str, tmp_path: Path
):
    """The driver is killed (kill -9 of `make sweep`) once its array is submitted; the tasks finish on
    their own. Resuming then submits no array (every job already FINISHED: each gets its SKIPPED
    result), ends the sweep FINISHED, and counts the first session's time up to its last job's end."""
    name = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    args = [
        *NO_GPU_SMALL_NODE,
        f"hydra.launcher.name={name}",
        "hydra.launcher.timeout_min=20",
        f"sweep.id={name}",
        *TINY,
        "compile.mode=eager",
        "trainer.seed=0,1",
    ]
    driver = start_make_sweep(args, tmp_path / "first" / "multirun", mlflow_server)
    try:
        assert driver.stdout is not None
        for line in driver.stdout:
            if line.startswith("submitted 2 jobs"):
                break
        os.killpg(driver.pid, signal.SIGKILL)  # the driver dies; the array runs on
        driver.wait()
        deadline = time.monotonic() + 900
        while _sh("squeue", "-h", "--name", name).stdout.strip() or set(
            _job_runs(mlflow_server, name).values()
        ) != {"FINISHED"}:
            assert time.monotonic() < deadline, _sh("squeue").stdout
            time.sleep(2)
        parent, _ = _sweep_runs(mlflow_server, name)
        assert parent.info.status == "RUNNING"  # its driver never ended it
        # its own command: `make sweep` added the CPU preset (the cluster has no GPUs); a resumption
        # without it would change the jobs' work, and is refused
        again = ["hydra/launcher=slurm", "experiment=cpu_smoke", *args, "sweep.resume=true"]
        resume = run_cli(again, tmp_path / "again", mlflow_server, multirun=True, timeout=600)
    finally:
        _sh("scancel", "--name", name)
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert resume.returncode == 0, output(resume)
    assert "every job of this resumed sweep already FINISHED: nothing submitted" in resume.stdout
    assert not (tmp_path / "again" / "multirun" / ".slurm_arrays").exists()
    parent, by_status = _sweep_runs(mlflow_server, name)
    assert (
        parent.info.status == "FINISHED"
        and set(by_status) == {"FINISHED"}
        and len(by_status["FINISHED"]) == 2
    )
    last_end = max(r.info.end_time for r in by_status["FINISHED"])
    assert parent.data.metrics["sweep/wall_s"] >= (last_end - parent.info.start_time) / 1000
