"""Clocks: step boundaries without a host sync (CUDA events, or perf_counter on the CPU), device
syncs, and the host's CPU time counters (for CPU steal)."""

from __future__ import annotations

import time
from typing import Any

import torch


class StepClock:
    """Marks step boundaries without a host sync: CUDA events on the current stream, or perf_counter on
    the CPU (where ops are synchronous). Events are created up front, outside the timed loop."""

    def __init__(self, device: torch.device, steps: int):
        self.cuda = device.type == "cuda"
        self.marks: list[Any] = []
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)] if self.cuda else []

    def mark(self) -> None:
        if self.cuda:
            event = self.events[len(self.marks)]
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter_ns())

    def durations_ms(self) -> list[float]:
        """Per-step times; syncs once (after the timed loop)."""
        if self.cuda:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [(b - a) / 1e6 for a, b in zip(self.marks, self.marks[1:], strict=False)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs since boot, from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return steal, user + nice + system + idle + iowait + irq + softirq + steal
