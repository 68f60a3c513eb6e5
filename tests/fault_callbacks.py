"""Hydra callbacks that inject a fault at a point of a sweep no signal can hit reliably (added on the
command line: `+hydra.callbacks.<name>._target_=tests.fault_callbacks.<Class>`)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback


class StopServerAtSweepEnd(Callback):
    """Kills the MLflow server (the process group its pid file names) once every job of the sweep has
    ended. Hydra calls end callbacks in reverse order, so this one runs before the sweep's own end:
    the sweep then finds its store gone."""

    def __init__(self, pid_file: str):
        self.pid_file = Path(pid_file)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        pid = int(self.pid_file.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # scripts/mlflow-server.sh makes the server a group leader
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)


class InterruptAfterJobs(Callback):
    """Stops the sweep as a Ctrl-C would once `jobs` of its jobs have ended (Hydra's basic launcher runs
    them in the driver): the sweep's later jobs never run, and a resumption with the same command runs
    them."""

    def __init__(self, jobs: int):
        self.jobs, self.ended = jobs, 0

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        self.ended += 1
        if self.ended >= self.jobs:
            raise KeyboardInterrupt(
                f"SIGINT (tests.fault_callbacks.InterruptAfterJobs, after {self.ended} jobs)"
            )


def _alive(pid: int) -> bool:
    try:
        return " Z" not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:3]
    except OSError:
        return False
