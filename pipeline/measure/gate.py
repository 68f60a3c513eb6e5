"""One job measures at a time on a device while another may compile (`benchmark.overlap`): the device's
measure lock (an exclusive `flock` on PIPELINE_MEASURE_LOCK; unset without overlap), whose holder pauses
the GPU's other registered workers (SIGSTOP to their process groups, compile processes included) and runs
on all of the GPU's CPU cores until it lets go. Each hold goes into run_info.json (docs/launchers.md)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pipeline.redaction import write_atomic

MEASURE_LOCK_ENV = "PIPELINE_MEASURE_LOCK"
SLOT_ENV = "PIPELINE_GPU_SLOT"  # set by pipeline.job.gpu_pool with the lock
GPU_CPUS_ENV = "PIPELINE_GPU_CPUS"  # every slot's CPU cores of this GPU (`0,1,2,3`), set with the lock


def start_time(pid: int) -> str | None:
    """The process's start time since boot (/proc/<pid>/stat, field 22): with the pid, it names one process,
    never a later one that reuses the pid. None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # fields after the command's name start at field 3


def register_worker() -> None:
    """Say beside the GPU's measure lock that this process is its slot's worker, so that a holder pauses it;
    called at the worker's start. Nothing without overlap."""
    lock, slot = os.environ.get(MEASURE_LOCK_ENV), os.environ.get(SLOT_ENV)
    if not lock or slot is None:
        return
    write_atomic(
        Path(f"{lock}.slot{slot}.worker"), f"{os.getpid()} {start_time(os.getpid())}\n", make_parents=False
    )


def registered_workers(lock: Path) -> list[int]:
    """The pids of the living workers registered beside the lock, this one's excepted."""
    pids = []
    for path in sorted(lock.parent.glob(f"{lock.name}.slot*.worker")):
        try:
            pid_text, started = path.read_text().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and start_time(pid) == started:
            pids.append(pid)
    return pids


def signal_workers(pids: list[int], signum: int) -> None:
    """Signal each worker's process group (a worker leads its own, its compile processes in it, so none
    escapes); a process that leads no group is signalled alone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)


def parse_cpus(spec: str) -> set[int]:
    """`0,1,2` -> {0, 1, 2}; "" -> set()."""
    return {int(c) for c in spec.split(",") if c.strip()}


def run_on_cpus(cpus: set[int]) -> None:
    """Every thread of this process on `cpus` (sched_setaffinity sets one thread; a new one takes its
    starter's)."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), cpus)


def resume_all(lock: Path) -> None:
    """Let every worker registered beside the lock go on, after a holder that paused them died."""
    signal_workers(registered_workers(lock), signal.SIGCONT)


class MeasureGate:
    """The device's measure lock, held by this worker from `acquire` to `release` (re-entrant: a
    second acquire while held does nothing)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.spans: list[dict[str, Any]] = []  # one per hold: why, waited_s, held_from, held_to, paused
        self.paused: list[int] = []  # other workers' process groups, stopped while this one holds it
        self.gpu_cpus = parse_cpus(os.environ.get(GPU_CPUS_ENV, ""))  # run on these while holding it
        self._own_cpus: set[int] = set()  # the slot's cores, run on again after
        self._handle: IO[str] | None = None

    @classmethod
    def from_env(cls) -> MeasureGate:
        path = os.environ.get(MEASURE_LOCK_ENV)
        return cls(Path(path) if path else None)

    @property
    def active(self) -> bool:
        return self.path is not None

    def acquire(self, why: str) -> None:
        """Wait until no other job measures on this device, then hold the lock."""
        if self.path is None or self._handle is not None:
            return
        asked = time.time()
        handle = open(self.path, "a")  # noqa: SIM115 - held until release()
        fcntl.flock(handle, fcntl.LOCK_EX)
        now = time.time()
        self._handle = handle
        self.paused = registered_workers(self.path)
        signal_workers(self.paused, signal.SIGSTOP)
        if self.gpu_cpus:
            self._own_cpus = os.sched_getaffinity(0)
            run_on_cpus(self.gpu_cpus)
        self.spans.append(
            {
                "why": why,
                "waited_s": round(now - asked, 3),
                "held_from": now,
                "held_to": None,
                "paused": list(self.paused),
                "cpus": sorted(os.sched_getaffinity(0)),
            }
        )

    def release(self) -> None:
        if self._handle is None:
            return
        if self.gpu_cpus:  # back on the slot's own cores before the others run again
            run_on_cpus(self._own_cpus)
        signal_workers(self.paused, signal.SIGCONT)
        self.paused = []
        self.spans[-1]["held_to"] = time.time()
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    @contextlib.contextmanager
    def hold(self, why: str) -> Iterator[None]:
        """Hold the lock for the block (and release it after, unless it was held before)."""
        was_held = self._handle is not None
        self.acquire(why)
        try:
            yield
        finally:
            if not was_held:
                self.release()

    def record(self) -> dict[str, Any]:
        """What run_info.json keeps: the lock's file and every hold."""
        return {
            "lock": str(self.path),
            "spans": self.spans,
            "waited_s": round(sum(s["waited_s"] for s in self.spans), 3),
        }
