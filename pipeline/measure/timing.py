"""Timing variants of a step: warm-up steps (each synced and wall-clocked), timed rounds (boundary
events, no host sync inside), and solo phases (a variant alone on the device, for its memory peaks).

A :class:`Variant` is one way of running the step (compiled, or the paired eager baseline) with its own
weights, optimizer state, batches and record of what was measured; a :class:`Timer` runs variants on
one device and reports progress.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from pipeline.measure.clocks import StepClock, cpu_times, synchronize
from pipeline.measure.memory import Memory, MemoryPeaks
from pipeline.measure.stats import Latency, percentile

ProgressFn = Callable[..., None]  # (variant, phase, done, total)


def quiet(*args: Any, **kwargs: Any) -> None:
    """A progress callback that shows nothing (for the eager memory probe)."""


@dataclass
class Variant:
    """One way of running the step, with its own state and what was measured of it."""

    name: str
    step: Callable[[Any], torch.Tensor]
    batches: Iterator[Any]
    losses: torch.Tensor  # one slot per step, on the device
    setup_s: float = 0.0  # the torch.compile call(s) that made this variant's step
    keep_outputs: bool = True  # copy each step's output into `losses` (training: the loss curve)
    done: int = 0
    warmup_s: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    round_p50_ms: list[float] = field(default_factory=list)
    cpu_jiffies: int = 0  # all CPUs' time over the measured steps, and the part stolen from this VM
    steal_jiffies: int = 0
    peaks: MemoryPeaks = field(default_factory=MemoryPeaks)

    def run_step(self, record: bool = True) -> None:
        loss = self.step(next(self.batches))
        if record and not self.keep_outputs:
            self.done += 1
        elif record:  # extra diagnostic steps after the measurement are not recorded
            # Copy the loss out at once: with CUDA graphs the next replay overwrites the step's outputs.
            self.losses[self.done].copy_(loss)
            self.done += 1

    def latency(self) -> Latency:
        return Latency.from_values(self.step_ms)

    @property
    def cpu_steal_pct(self) -> float | None:
        return 100 * self.steal_jiffies / self.cpu_jiffies if self.cpu_jiffies > 0 else None


def split_rounds(total: int, rounds: int) -> list[int]:
    """`total` measured steps split into `rounds` near-equal rounds (no empty round)."""
    rounds = max(1, min(rounds, total))
    return [total // rounds + (1 if r < total % rounds else 0) for r in range(rounds)]


class Timer:
    """Runs variants' steps on one device: warm-up, timed rounds, solo phases."""

    def __init__(
        self, *, device: torch.device, progress: ProgressFn, measured_total: int, progress_every: int = 0
    ):
        self.device = device
        self.memory = Memory(device)
        self.progress = progress
        self.measured_total = measured_total  # measured steps per variant, over all rounds
        self.progress_every = progress_every or max(1, measured_total // 50)

    def warm_up(self, variant: Variant, steps: int, *, show: bool = True) -> None:
        """Run warm-up steps one at a time, each timed by a wall clock after a sync."""
        for i in range(steps):
            start = time.perf_counter()
            variant.run_step()
            synchronize(self.device)
            variant.warmup_s.append(time.perf_counter() - start)
            if show:
                self.progress(variant.name, "warmup", i + 1, steps)

    def timed_round(self, variant: Variant, steps: int, *, show: bool = True) -> list[float]:
        """Run `steps` measured steps with boundary events and no host sync; return their times (ms).
        The host's CPU steal is read before the first and after the last step (outside the timed loop)."""
        clock = StepClock(self.device, steps)
        before = cpu_times()
        clock.mark()
        for i in range(steps):
            variant.run_step()
            clock.mark()
            done = len(variant.step_ms) + i + 1
            if show and ((i + 1) % self.progress_every == 0 or i + 1 == steps):
                self.progress(variant.name, "measure", done, self.measured_total)
        times = clock.durations_ms()
        after = cpu_times()
        if before is not None and after is not None:
            variant.steal_jiffies += after[0] - before[0]
            variant.cpu_jiffies += after[1] - before[1]
        variant.step_ms.extend(times)
        variant.round_p50_ms.append(percentile(sorted(times), 0.5))
        return times

    def solo_phase(self, variant: Variant, *, warmup: int, steps: int, show: bool = True) -> None:
        """Warm-up, then one timed round, with nothing else on the device: the variant's memory peaks
        over the warm-up (compilation included) and over measured steps are its own."""
        memory, peaks = self.memory, variant.peaks
        memory.reset_peak()
        self.warm_up(variant, warmup, show=show)
        peaks.job_allocated, peaks.job_reserved = memory.peak_allocated(), memory.peak_reserved()
        memory.reset_peak()
        self.timed_round(variant, steps, show=show)
        peaks.allocated, peaks.reserved = memory.peak_allocated(), memory.peak_reserved()
        peaks.job_allocated = max(peaks.job_allocated, peaks.allocated)
        peaks.job_reserved = max(peaks.job_reserved, peaks.reserved)

    def release(self, variant: Variant, baseline: int) -> int:
        """Free a variant's device memory (weights, optimizer state, batches) and return how many bytes
        stayed allocated above `baseline` (allocated before it was built): ~0 unless something leaked."""
        variant.step = variant.batches = None  # type: ignore[assignment]
        variant.losses = torch.empty(0)
        gc.collect()
        if self.memory.cuda:
            torch.cuda.empty_cache()
        return max(0, self.memory.allocated() - baseline)
