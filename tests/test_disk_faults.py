"""A sweep's folder that stops taking files mid-sweep (issue 28, item 5), for real: a tmpfs of fixed
size filled up while a job runs, or the folder remounted read-only. No traceback, no 0-byte result
file, nothing RUNNING, the parent FAILED (not "Interrupted"), exit 1; `--sync` then never calls the
sweep FINISHED, since a job never ran. Root only (mounts)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TINY, finish, popen_cli, run_report, runs, stop_group, unmount

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path):
    """The sweep's folder (`<tmp_path>/disk/multirun`, as popen_cli names it) on a 16 MiB tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("a full or read-only filesystem needs a mount: root only")
    disk = tmp_path / "disk" / "multirun"
    disk.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], check=True)
    yield disk
    unmount(disk)  # the read-only bind mount over the tmpfs, then the tmpfs


def fill(disk: Path) -> None:
    try:
        with open(disk / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
    except OSError:
        pass


def read_only(disk: Path) -> None:
    """The folder remounted read-only (a bind mount over it: its open files keep it busy)."""
    subprocess.run(["mount", "--bind", str(disk), str(disk)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(disk)], check=True)


@pytest.mark.parametrize("fault", [fill, read_only], ids=["full", "read-only"])
def test_a_sweep_folder_that_stops_taking_files_mid_sweep(
    tmp_path: Path, store: str, small_disk: Path, fault
):
    args = [
        *(a for a in TINY if not a.startswith("trainer.steps=")),
        "compile.mode=eager",
        "trainer.steps=4,1000,1001",  # job 0 done at once; job 1 still measures when its folder stops taking files
    ]
    proc = popen_cli(args, small_disk.parent, store, multirun=True, stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("job 1 "):  # job 1's run is open, its worker runs
                break
        fault(small_disk)
        done = finish(proc, timeout=300)
    finally:
        stop_group(proc)
    text = "".join(seen) + done.stdout
    assert done.returncode == 1, text
    assert "Traceback" not in text and "Exception in thread" not in text, text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("sweep error: ")]
    assert "the sweep cannot go on: OSError" in line and "sweep.resume=true" in line, line
    statuses = {r.data.tags.get("job_num", "parent"): r for r in runs(store)}
    assert statuses["0"].info.status == "FINISHED"
    job = statuses["1"]
    assert job.info.status == "FAILED", job.data.tags
    cause = "No space left on device" if fault is fill else "Read-only file system"
    assert cause in job.data.tags["error_message"], job.data.tags
    parent = statuses["parent"]
    assert parent.info.status == "FAILED" and parent.data.tags["error_type"] == "SweepFailed"
    assert "RUNNING" not in {r.info.status for r in runs(store)}
    assert not list(small_disk.rglob(".result-*"))  # no 0-byte leftovers

    if fault is fill:
        (small_disk / "filler").unlink()
    else:
        subprocess.run(["umount", str(small_disk)], check=True)  # the bind mount: writable again
    sync = run_report("--tracking-uri", store, "--sync", str(small_disk))
    assert sync.returncode == 1, sync.stdout + sync.stderr
    assert "is incomplete: 1 of the 3 planned jobs left no run in MLflow (job 2" in sync.stdout, sync.stdout
    parent = next(r for r in runs(store) if r.data.tags.get("sweep_parent") == "true")
    assert parent.info.status == "FAILED" and parent.data.tags["jobs_missing"] == "2"
