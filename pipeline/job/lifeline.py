"""The worker's tie to its job: a worker never outlives the process that owns its run (PR_SET_PDEATHSIG,
a lifeline pipe for a worker forked from the template, and a watchdog thread), and never runs past its
timeout even when that process cannot stop it. Torch-free: the worker installs it before torch."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

PARENT_ENV = "PIPELINE_PARENT_PID"  # set by the supervisor: the pid the worker must not outlive
LIFELINE_FD_ENV = "PIPELINE_LIFELINE_FD"  # set in a forked worker: a pipe whose other end its job holds
START_GATE_ENV = "PIPELINE_START_GATE"  # set by the supervisor: a file that exists once the job's run is open
START_GATE_POLL_S = 0.005
PR_SET_PDEATHSIG = 1
BACKSTOP_GRACE_S = 15.0  # past the parent's deadline (its kill takes up to 10 s)
POLL_S = 0.5


def hold(*, timeout_s: float, on_timeout: Callable[[str], None]) -> None:
    """Tie this process to its parent (the pid in $PIPELINE_PARENT_PID, else the current parent).
    `on_timeout(message)` writes the timeout's result before the group is killed."""
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())
    die_with_parent()
    if not parent_alive(parent):  # the parent died before the kernel was told
        _kill_group()
    deadline = time.monotonic() + timeout_s + BACKSTOP_GRACE_S
    message = (
        f"worker ended itself after trainer.timeout_s={timeout_s:g} s (+{BACKSTOP_GRACE_S:g} s): "
        "its job process did not stop it"
    )
    watch = (parent, deadline, lambda: on_timeout(message))
    threading.Thread(target=_watch, args=watch, daemon=True, name="lifeline").start()


def parent_alive(parent: int | None = None) -> bool:
    """Whether the job that owns this worker still runs: its lifeline pipe is open (a forked worker), or
    its pid (`parent`, else $PIPELINE_PARENT_PID as it is now) is still this process's parent."""
    fd = os.environ.get(LIFELINE_FD_ENV)
    if fd is not None:
        return not _hung_up(int(fd))
    if parent is None and PARENT_ENV not in os.environ:
        return True
    return os.getppid() == (int(os.environ[PARENT_ENV]) if parent is None else parent)


def wait_for_the_job() -> None:
    """Wait until the job's parent has opened its run (the file in $PIPELINE_START_GATE exists), so the
    parent's MLflow work never competes with the job's timed steps for CPUs. No variable, no wait."""
    gate = os.environ.get(START_GATE_ENV)
    while gate and not os.path.exists(gate):
        time.sleep(START_GATE_POLL_S)


def _hung_up(fd: int) -> bool:
    """The pipe's write end is closed everywhere (or the fd is gone)."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        return any(event & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, event in poller.poll(0))
    except (OSError, ValueError):
        return True


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """The kernel sends `signum` when this process's parent ends. Linux only; elsewhere the watchdog alone."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)


def _watch(parent: int, deadline: float, on_timeout: Callable[[], None]) -> None:
    """Kill the group (without a result: no one would log it) once the parent is gone; past the
    deadline, write the timeout's result first."""
    while True:
        time.sleep(POLL_S)
        if not parent_alive(parent):
            _kill_group()
        if time.monotonic() > deadline:
            try:
                on_timeout()
            finally:
                _kill_group()


def _kill_group() -> None:
    """SIGKILL this process's group when it leads one (a worker's: its DataLoader and compile workers),
    else itself. Nothing is flushed first: a stopped parent's full output pipe would block a write."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
