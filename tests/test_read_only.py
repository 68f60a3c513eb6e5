"""Read-only commands on read-only stores and folders, and a job asking for what the host lacks (issue
41, item 7): `report --list` and `--sweep` read a store on a read-only filesystem (nothing probed for
writing), `report --results` prints its summary and says in one line what it could not write, and
`device=cuda` without a GPU is one line, exit 2, before any worker starts."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.tracking import Tracker
from tests.conftest import TINY, one_line_errors, output, run_cli, run_report, runs, sqlite_uri

EAGER = [*TINY, "compile.mode=eager"]


@pytest.fixture
def read_only_copy(tmp_path: Path):
    """`copy(paths)`: the files and folders copied into a folder nothing can then write (a tmpfs
    remounted read-only where the tests run as root, who writes through permissions; else the copies
    made read-only)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    mounted = os.geteuid() == 0
    if mounted:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(folder)], check=True)

    def copy(paths: list[Path]) -> Path:
        for path in paths:
            if path.is_dir():
                shutil.copytree(path, folder / path.name)
            else:
                shutil.copy2(path, folder / path.name)
        if mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        else:
            for path in [*folder.rglob("*"), folder]:
                path.chmod(0o555 if path.is_dir() else 0o444)
        return folder

    yield copy
    if mounted:
        subprocess.run(["umount", str(folder)], check=False)
    else:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755)


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
def test_report_list_and_sweep_read_a_store_on_a_read_only_filesystem(store: str, read_only_copy):
    """Issue 41: `report --list` and `--sweep` refused a read-only store (`cannot write ...`): they
    probed it for writing as a job does. They only read it now."""
    tracker = Tracker(store, "compile-sweeps")
    parent = tracker.start_run("sweep ro", {"sweep_id": "ro", "sweep_parent": "true", "jobs": "1"})
    tracker.end_run(parent, "FINISHED")
    child = tracker.start_run(
        "vit_tiny·amp·eager", {"sweep_id": "ro", "mode": "eager", "config_hash": "h"}, parent
    )
    tracker.log_metrics(
        child, {"step/p50_ms": 12.5, "step/p50_ci95_low_ms": 12.0, "step/p50_ci95_high_ms": 13.0}
    )
    tracker.end_run(child, "FINISHED")
    db = Path(store.removeprefix("sqlite:///"))
    folder = read_only_copy([db])
    read_only = sqlite_uri(folder / db.name)

    listed = run_report("--tracking-uri", read_only, "--list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    (line,) = listed.stdout.splitlines()
    assert line.startswith("ro  FINISHED") and "jobs=1" in line, line
    summary = run_report("--tracking-uri", read_only, "--sweep", "ro")
    assert summary.returncode == 0, summary.stdout + summary.stderr
    assert "12.5 " in summary.stdout and "Traceback" not in summary.stderr, summary.stdout
    missing = run_report("--tracking-uri", read_only, "--sweep", "nope")
    assert missing.returncode == 1 and "no sweep with sweep_id='nope'" in missing.stderr
    assert sorted(p.name for p in folder.iterdir()) == [db.name]  # nothing written beside it


def test_report_results_says_in_one_line_what_it_could_not_write(tmp_path: Path, store: str, read_only_copy):
    """Issue 41: `report --results` on a folder it cannot write printed the summary, then a traceback."""
    proc = run_cli(EAGER, tmp_path, store)
    assert proc.returncode == 0, output(proc)
    folder = read_only_copy([tmp_path / "run"])
    results = run_report("--results", str(folder / "run"))
    assert results.returncode == 1, results.stdout + results.stderr
    assert "vit_tiny" in results.stdout  # the summary is printed
    (line,) = one_line_errors(results, "results error:")
    assert (
        line.startswith(f"results error: could not write the summary files in {folder / 'run'} (")
        and "--out" in line
    )


def test_device_cuda_without_a_gpu_is_one_line_before_anything_starts(tmp_path: Path, store: str):
    """Issue 41: `device=cuda` on a host without a GPU started a worker and recorded a FAILED run."""
    hidden = {"CUDA_VISIBLE_DEVICES": ""}  # no GPU for this job, on any host
    for multirun, args in (
        (False, [*EAGER, "device=cuda"]),
        (True, [*EAGER, "device=cuda", "trainer.seed=0,1"]),
    ):
        proc = run_cli(args, tmp_path / str(multirun), store, multirun=multirun, env=hidden)
        assert proc.returncode == 2, output(proc)
        (line,) = one_line_errors(proc, "config error:")
        assert line.startswith(
            "config error: device='cuda' is not allowed: a CUDA GPU, and CUDA_VISIBLE_DEVICES=''"
        ), line
        assert "device=cpu" in line, line
    assert runs(store) == [] and not list(tmp_path.rglob("worker.log"))


def test_sync_over_a_sweep_file_it_cannot_read_says_so_in_one_line(tmp_path: Path, store: str):
    """`report --sync` over a sweep folder whose sweep.json is not one it wrote: a line naming the
    folder and exit 1, not a traceback."""
    folder = tmp_path / "multirun" / "broken"
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text("{not json")
    sync = run_report("--tracking-uri", store, "--sync", str(tmp_path / "multirun"))
    assert sync.returncode == 1 and "Traceback" not in sync.stderr, sync.stdout + sync.stderr
    assert f"could not finish the sweep in {folder}: sweep.json cannot be read (" in sync.stdout
