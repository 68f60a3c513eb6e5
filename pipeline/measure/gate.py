"""One job measures at a time on a device, while another may compile (`benchmark.overlap`).

With overlap, two jobs share a GPU (pipeline.job.gpu_pool hands each GPU to two jobs, each pinned to
its own CPU cores): one compiles while the other measures. Everything a worker runs on the device
after its compilation (warm-up, timed rounds, the paired eager copy, latency rounds, diagnostics), and
its eager memory probe before it, runs while the worker holds the device's measure lock: an
exclusive `flock` on the file its job's parent names in PIPELINE_MEASURE_LOCK. Only the compiling
job's first unit (tracing, code generation, and the compiled code's first run) can overlap another
job's measurement. Without overlap the variable is unset and the gate does nothing.

Each hold is recorded (`spans`, wall-clock times, comparable across processes) in the run's
`run_info.json` (`measure_gate`), so that a reader, or a test, can check that no two measurements
overlapped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

MEASURE_LOCK_ENV = "PIPELINE_MEASURE_LOCK"


class MeasureGate:
    """The device's measure lock, held by this worker from `acquire` to `release` (re-entrant: a
    second acquire while held does nothing)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.spans: list[dict[str, Any]] = []  # one per hold: why, waited_s, held_from, held_to
        self._handle: IO[str] | None = None

    @classmethod
    def from_env(cls) -> MeasureGate:
        path = os.environ.get(MEASURE_LOCK_ENV)
        return cls(Path(path) if path else None)

    @property
    def active(self) -> bool:
        return self.path is not None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def acquire(self, why: str) -> None:
        """Wait until no other job measures on this device, then hold the lock."""
        if self.path is None or self._handle is not None:
            return
        asked = time.time()
        handle = open(self.path, "a")  # noqa: SIM115 - held until release()
        fcntl.flock(handle, fcntl.LOCK_EX)
        now = time.time()
        self._handle = handle
        self.spans.append({"why": why, "waited_s": round(now - asked, 3), "held_from": now, "held_to": None})

    def release(self) -> None:
        if self._handle is None:
            return
        self.spans[-1]["held_to"] = time.time()
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    @contextlib.contextmanager
    def hold(self, why: str) -> Iterator[None]:
        """Hold the lock for the block (and release it after, unless it was held before)."""
        was_held = self.held
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
