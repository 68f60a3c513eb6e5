"""Signals a job must survive: Ctrl-C and SIGTERM (the job's run ends KILLED with the reason), SLURM's
SIGTERM and SIGUSR2 under submitit, and the short critical sections where a signal is held until the
job's MLflow run exists, so that the stopped job is always recorded."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGUSR2 during a short critical section, then deliver them to their own
    handlers. Python takes signals in the main thread only; elsewhere (a launcher's thread) nothing is held."""
    caught: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    try:
        with _handled(HELD if main else (), lambda got, _: caught.append(got)):
            yield
    finally:
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


@contextlib.contextmanager
def _handled(signums: Iterable[int], handler: Callable[[int, Any], None]) -> Iterator[None]:
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


# What SLURM's signals mean for a job running under submitit (hydra/launcher=slurm). slurmstepd sends
# them to every process of the job step, the worker included.
SCHEDULER_SIGNALS = {
    signal.SIGTERM: "the scheduler stopped the job (scancel, or its time limit was reached)",
    signal.SIGUSR2: "the scheduler's warning: the job's time limit is near (hydra.launcher.signal_delay_s), or it is preempted",
}


def in_submitit_job() -> bool:
    return bool(os.environ.get("SUBMITIT_EXECUTOR"))


class SchedulerSignal(KeyboardInterrupt):
    """A scheduler's signal stopped the job."""


class SchedulerSignals:
    """SLURM's SIGTERM and SIGUSR2 in a submitit job (submitit itself only logs SIGTERM, and requeues on
    SIGUSR2). A signal is remembered while the job starts or logs its result, and raises SchedulerSignal
    once the worker would start, or at once while it runs: the job then ends its run KILLED within
    SLURM's KillWait. Outside submitit this does nothing: `main` handles SIGTERM."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._armed = False

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received = f"{signal.Signals(signum).name}: {SCHEDULER_SIGNALS[signum]}"
        if self._armed:
            self._armed = False
            raise SchedulerSignal(self.received)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        with _handled(SCHEDULER_SIGNALS if in_submitit_job() else (), self._on_signal):
            yield

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """The worker's span: a signal already received, or one that comes now, raises SchedulerSignal."""
        if self.received:
            raise SchedulerSignal(self.received)
        self._armed = True
        try:
            yield
        finally:
            self._armed = False


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


def stop_once() -> None:
    """Ctrl-C and SIGTERM stop the job or sweep once: the first raises KeyboardInterrupt; any later one
    is ignored with one line, so that closing the runs completes rather than leaving them RUNNING."""
    for signum in INTERRUPTS:
        signal.signal(signum, _first_interrupt)


def _first_interrupt(signum: int, frame: Any) -> None:
    for other in INTERRUPTS:
        signal.signal(other, _already_stopping)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def exiting_after_interrupt() -> None:
    """The process ends now after its interruption: a later Ctrl-C or SIGTERM is ignored for good (in
    Python's finalization it would kill the process by SIGINT, its exit code not 130)."""
    for signum in INTERRUPTS:
        signal.signal(signum, signal.SIG_IGN)


_told: list[int] = []


def _already_stopping(signum: int, frame: Any) -> None:
    if not _told:
        _told.append(signum)
        os.write(
            2,
            f"{signal.Signals(signum).name}: already stopping (closing the runs); `kill -9 {os.getpid()}` ends it at once\n".encode(),
        )
