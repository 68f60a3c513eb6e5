"""Every command the tool prints for pasting (resumption, `--sync`, stopping a sweep, a locked store)
is built from its words with `shlex`, never by joining or splitting on spaces: pasted into a shell it
runs that command and nothing else, whatever the sweep's id and folder hold (issue 41, item 6)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from pipeline.job.result import refuse_overwrite
from pipeline.provenance import command_line, sync_command
from pipeline.sweep import callbacks
from pipeline.sweep.finish import resume_hint
from pipeline.sweep.state import hydra_value
from pipeline.sweep_context import SweepContext
from pipeline.tracking.store import locked_line
from tests.conftest import ROOT, TINY, one_line_errors, output, with_host_check

HOSTILE_ID = "c;id>pwned"
INJECTED = ("PWNED", "pwned", "pwned2")  # what the hostile values make when run as shell


def commands_in(line: str) -> list[str]:
    """The commands a line gives for pasting (between backquotes)."""
    return re.findall(r"`([^`]+)`", line)


def pasted(command: str, cwd: Path) -> list[str]:
    """The words bash makes of a pasted command, running nothing but printf on them."""
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {command}"], cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.split("\0")[:-1]


def injected(folder: Path) -> list[Path]:
    return [p for name in INJECTED for p in folder.rglob(name)]


def test_every_printed_command_pastes_as_its_own_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Issue 41: a resume hint built by splitting the `command` tag on spaces, and the interrupt's
    `--sync` hint, ran injected shell when pasted (`sweep.id='c;id>pwned'`, a folder with `$(...)`)."""
    folder = tmp_path / "a $(touch PWNED) b;id>pwned2"
    argv = [
        str(ROOT / "pipeline" / "run.py"),
        "-m",
        "model=vit_tiny",
        "trainer.seed=0,1",
        f"hydra.sweep.dir='{folder}'",
        f"sweep.id={hydra_value(HOSTILE_ID)}",
    ]
    sweep = SweepContext(
        sweep_id=HOSTILE_ID,
        parent_run_id="p",
        sweep_dir=str(folder),
        tracking_uri=f"sqlite:///{folder}/mlflow.db",
        experiment="e",
        command=command_line(argv),
    )
    monkeypatch.setattr(callbacks, "ACTIVE_SWEEP", sweep)
    resumed = [
        "python",
        "-m",
        "pipeline.run",
        *argv[1:5],
        f"sweep.id={hydra_value(HOSTILE_ID)}",
        "sweep.resume=true",
    ]
    sync = ["python", "-m", "pipeline.report", "--sync", str(folder)]
    expected = {
        resume_hint(sweep): [resumed],
        callbacks.after_interrupt(): [sync, resumed],
        callbacks.resume_later(): [resumed],
        refuse_overwrite("hydra.sweep.dir", folder, [folder / "0" / "result.json"]): [sync],
        f"`{sync_command([folder])}`": [sync],
        locked_line(f"sqlite:///{folder}/mlflow.db", 60): [["fuser", f"{folder}/mlflow.db"]],
    }
    for line, words in expected.items():
        commands = commands_in(line)
        assert len(commands) == len(words), line
        for command, want in zip(commands, words, strict=True):
            assert pasted(command, tmp_path) == want, (line, command)
    assert injected(tmp_path) == []
    # and Hydra reads the id back as it was
    (override,) = OverridesParser.create().parse_overrides([resumed[-2]])
    assert override.value() == HOSTILE_ID


@pytest.mark.slow
def test_pasting_a_hostile_sweeps_own_commands_resumes_and_syncs_it(tmp_path: Path, store: str):
    """A real sweep in a folder holding `$(...)` and spaces, with `sweep.id='c;id>pwned'`: the command a
    refused resumption gives, pasted into bash, resumes it (every job already FINISHED); the `--sync` a
    reused folder's refusal gives, pasted, uploads what MLflow lacks; neither runs injected shell."""
    sweep_dir = tmp_path / "sweeps $(touch PWNED) x" / "multirun"
    base = [
        sys.executable,
        "-m",
        "pipeline.run",
        "-m",
        *with_host_check([*TINY, "compile.mode=eager", "trainer.seed=0"]),
        f"mlflow.tracking_uri={store}",
    ]
    env = {
        **{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # `python` is this one
    }

    def run(args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)

    first = run([*base, f"sweep.id={hydra_value(HOSTILE_ID)}", f"hydra.sweep.dir='{sweep_dir}'"])
    assert first.returncode == 0, output(first)
    refused = run(
        [
            *base,
            "trainer.steps=3",
            f"sweep.id={hydra_value(HOSTILE_ID)}",
            "sweep.resume=true",
            f"hydra.sweep.dir='{tmp_path / 'b'}'",
        ]
    )
    assert refused.returncode == 2, output(refused)
    (line,) = one_line_errors(refused, "config error:")
    (command,) = commands_in(line)
    elsewhere = tmp_path / "paste"
    elsewhere.mkdir()
    resumed = subprocess.run(
        ["bash", "-c", command], cwd=elsewhere, capture_output=True, text=True, timeout=900, env=env
    )
    assert resumed.returncode == 0, output(resumed)
    assert f"already FINISHED in sweep {HOSTILE_ID}" in resumed.stdout

    kept = sweep_dir / "0" / "result.json"
    kept.write_text(kept.read_text().replace('"mlflow_synced": true', '"mlflow_synced": false'))
    reused = run([*base, "sweep.id=another", f"hydra.sweep.dir='{sweep_dir}'"])
    assert reused.returncode == 2, output(reused)
    (line,) = one_line_errors(reused, "config error:")
    (sync,) = commands_in(line)
    # pasted as printed, elsewhere: the job's own store, never the default one of where it is pasted
    synced = subprocess.run(
        ["bash", "-c", sync], cwd=elsewhere, capture_output=True, text=True, timeout=600, env=env
    )
    assert synced.returncode == 0, output(synced)
    assert "kept: the run is FINISHED in MLflow" in synced.stdout, output(synced)
    assert '"mlflow_synced": true' in kept.read_text() and not (elsewhere / "outputs").exists()
    assert injected(tmp_path) == [] and injected(ROOT) == []
    assert shlex.split(command)[:3] == ["python", "-m", "pipeline.run"]
