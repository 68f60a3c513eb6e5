"""Clocks: laps without a host sync (CUDA events, or perf_counter on the CPU), device syncs, and the
kernel's CPU time counters (the host's steal, this process's threads' run and wait, others' use)."""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


class Laps:
    """The marks of one timed round, with no host sync until it is read: CUDA events on the current stream
    (created up front, outside the timed loop), or perf_counter on the CPU. Each mark ends a lap carrying
    its label; a lap labelled None (host work between units) is not counted."""

    def __init__(self, device: torch.device, capacity: int):
        self.cuda = device.type == "cuda"
        self.marks: list[Any] = []
        self.labels: list[str | None] = []
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(capacity)] if self.cuda else []

    def mark(self, label: str | None) -> None:
        if self.cuda:
            event = self.events[len(self.marks)]
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter_ns())
        self.labels.append(label)

    def read(self) -> dict[str, list[float]]:
        """Each label's laps in ms, in order; syncs once (after the timed loop)."""
        if self.cuda:
            self.marks[-1].synchronize()
            durations = [a.elapsed_time(b) for a, b in itertools.pairwise(self.marks)]
        else:
            durations = [(b - a) / 1e6 for a, b in itertools.pairwise(self.marks)]
        laps: dict[str, list[float]] = {}
        for label, ms in zip(self.labels[1:], durations, strict=True):
            if label is not None:
                laps.setdefault(label, []).append(ms)
        return laps


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class CpuTicks:
    """One reading of /proc/stat, in clock ticks: all CPUs' steal and total time, and the busy (not idle,
    I/O wait or steal) and total time of the CPUs this process may run on (None without affinity)."""

    steal: int
    total: int
    affine: tuple[int, int] | None


def cpu_ticks() -> CpuTicks | None:
    """/proc/stat read once, or None where there is none."""
    try:
        with open("/proc/stat") as f:
            lines = [line.split() for line in f if line.startswith("cpu")]
    except OSError:
        return None
    if not lines or lines[0][0] != "cpu" or len(lines[0]) < 9:
        return None
    try:
        allowed = os.sched_getaffinity(0)
    except (OSError, AttributeError):
        allowed = set()
    busy = affine_total = 0
    for fields in lines[1:]:
        if len(fields) < 9 or not fields[0][3:].isdigit() or int(fields[0][3:]) not in allowed:
            continue
        user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
        affine_total += user + nice + system + idle + iowait + irq + softirq + steal
        busy += user + nice + system + irq + softirq
    steal, total = int(lines[0][8]), sum(int(x) for x in lines[0][1:9])
    return CpuTicks(steal=steal, total=total, affine=(busy, affine_total) if affine_total > 0 else None)


def thread_cpu_and_wait_ns() -> dict[int, tuple[int, int]] | None:
    """Per thread of this process: (time on a CPU, time runnable but waiting for one) in ns, from the
    scheduler's own accounts (/proc/self/task/*/schedstat); None where the kernel keeps none."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    threads = {}
    for tid in tasks:
        try:
            fields = Path(f"/proc/self/task/{tid}/schedstat").read_text().split()
        except OSError:  # a thread that ended meanwhile, or no schedstat here
            continue
        if len(fields) >= 2:
            threads[int(tid)] = (int(fields[0]), int(fields[1]))
    return threads if any(run > 0 for run, _ in threads.values()) else None


def cpu_and_wait_between(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]
) -> tuple[int, int]:
    """(time on a CPU, time waiting for one) in ns of this process's threads between two readings, thread
    by thread: a thread started in between counts whole; one that ended is lost without the others' time."""
    run = wait = 0
    for tid, (run_after, wait_after) in after.items():
        run_before, wait_before = before.get(tid, (0, 0))
        run += max(0, run_after - run_before)
        wait += max(0, wait_after - wait_before)
    return run, wait


def descendants_cpu_ticks() -> dict[int, int]:
    """User + system CPU time in clock ticks of each process descended from this one, or empty where the
    kernel lists no children (/proc/<pid>/task/*/children)."""
    ticks: dict[int, int] = {}
    todo = [os.getpid()]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                children = [int(c) for c in Path(f"/proc/{parent}/task/{tid}/children").read_text().split()]
            except OSError:
                continue
            for child in children:
                try:
                    fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:  # ended meanwhile
                    continue
                ticks[child] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
                todo.append(child)
    return ticks


class OthersCpu:
    """How much of this process's CPUs other processes used between `start` and `stop`: their busy time
    less this process's threads' and its descendants' (its loader workers are its work, not interference)."""

    TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")

    def __init__(self) -> None:
        self.others_ticks = 0.0  # others' busy time on this process's CPUs over every start/stop
        self.capacity_ticks = 0  # those CPUs' time over the same spans
        self._cpus: tuple[int, int] | None = None
        self._children: dict[int, int] = {}

    def start(self, ticks: CpuTicks | None) -> None:
        self._cpus = ticks.affine if ticks is not None else None
        self._children = descendants_cpu_ticks()

    def stop(self, ticks: CpuTicks | None, *, own_threads_ns: int) -> None:
        """End the span at `ticks`; `own_threads_ns`: this process's threads' time on a CPU over it."""
        cpus = ticks.affine if ticks is not None else None
        if self._cpus is None or cpus is None:
            return
        children = descendants_cpu_ticks()
        children_ticks = sum(max(0, t - self._children.get(pid, 0)) for pid, t in children.items())
        busy, total = cpus[0] - self._cpus[0], cpus[1] - self._cpus[1]
        # Signed: /proc/stat counts sampled whole ticks, so a short span reads a tick more or less; clipping
        # span by span would add up every over-read and none of the under-reads.
        self.others_ticks += busy - own_threads_ns / self.TICK_NS - children_ticks
        self.capacity_ticks += total

    @property
    def pct(self) -> float | None:
        """Others' share of this process's CPUs' time, %: a few on a quiet host."""
        return 100 * max(0.0, self.others_ticks) / self.capacity_ticks if self.capacity_ticks > 0 else None
