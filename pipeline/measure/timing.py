"""Timing a unit of work (a training step, a call, a generation): a :class:`Variant` is one way of running
it (compiled, or the paired eager copy) with the laps it marked, by label; a :class:`Timer` runs variants
through warm-up units (synced, wall-clocked), timed rounds (boundary events, no host sync inside) and solo
phases (alone on the device, for memory peaks)."""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pipeline.measure.clocks import (
    Laps,
    OthersCpu,
    cpu_and_wait_between,
    cpu_ticks,
    synchronize,
    thread_cpu_and_wait_ns,
)
from pipeline.measure.host import HostCheck
from pipeline.measure.memory import Memory, MemoryPeaks
from pipeline.measure.stats import Latency, percentile

STEP = "step"  # the lap of a one-lap unit
LATENCY = "latency"  # a unit alone, synchronized before and after: what one request sees


class Variant:
    """One way of running the unit, with its own state and what was measured of it. Subclasses set
    `primary` (the lap label of the headline figure) and `marks_per_unit`, and implement `run_unit`."""

    primary: str = STEP
    marks_per_unit: int = 1
    starts_idle: bool = False  # its timed unit drains the device itself first (a generation's first token)

    def __init__(self, name: str, *, setup_s: float = 0.0):
        self.name = name
        self.setup_s = setup_s  # the torch.compile call(s) that made this variant
        self.done = 0  # units recorded (warm-up included)
        self.measured = 0  # units timed and read
        self.queued = 0  # units timed, their laps not read yet (Timer.flush)
        self.warmup_s: list[float] = []
        self.laps: dict[str, list[float]] = {}  # label -> ms, over every timed round
        self.round_sizes: dict[str, list[int]] = {}  # label -> laps per timed round
        self.cpu_jiffies = 0  # all CPUs' time over the timed rounds, and the part stolen from this VM
        self.steal_jiffies = 0
        self.thread_run_ns = 0  # this process's threads over the timed rounds: on a CPU, and waiting for one
        self.thread_wait_ns = 0
        self.others_cpu = OthersCpu()  # other processes' use of this process's CPUs over the timed rounds
        self.peaks = MemoryPeaks()

    def run_unit(self, laps: Laps | None, *, record: bool = True) -> None:
        """One unit; marks its laps on `laps` when timed. `record=False`: a diagnostic unit after the
        measurement (not counted, outputs not kept)."""
        raise NotImplementedError

    def release(self) -> None:
        """Drop what holds device memory (weights, optimizer state, inputs)."""

    # ------------------------------------------------------------------------ what was measured
    def add_round(self, laps: dict[str, list[float]], units: int) -> None:
        for label, values in laps.items():
            self.laps.setdefault(label, []).extend(values)
            self.round_sizes.setdefault(label, []).append(len(values))
        self.measured += units

    @property
    def step_ms(self) -> list[float]:
        """The headline laps (the primary label's), in order."""
        return self.laps.get(self.primary, [])

    @step_ms.setter
    def step_ms(self, values: list[float]) -> None:  # a distributed job's slowest-rank times
        self.laps[self.primary] = list(values)

    def latency(self, label: str | None = None, confidence: float = 0.95) -> Latency:
        return Latency.from_values(self.laps[label or self.primary], confidence)

    def round_laps(self, label: str | None = None) -> list[list[float]]:
        """A label's laps, one list per timed round, in order."""
        label = label or self.primary
        values, sizes = self.laps.get(label, []), self.round_sizes.get(label, [])
        return [values[end - n : end] for n, end in zip(sizes, itertools.accumulate(sizes), strict=True)]

    def block_p50_ms(self, blocks: int = 3) -> list[float]:
        """Medians of the headline laps cut in order into `blocks` near-equal parts: how far the variant
        drifted from the start of its measurement to its end (its rounds are too short to say)."""
        values = self.step_ms
        if len(values) < blocks:
            return []
        size = len(values) / blocks
        return [
            percentile(sorted(values[round(b * size) : round((b + 1) * size)]), 0.5) for b in range(blocks)
        ]

    def unit_s(self) -> float:
        """One unit's time in seconds as the warm-up saw it (each unit synced): the median of the warm-up
        units after the first (which compiles), or the first when it was the only one."""
        later = self.warmup_s[1:] or self.warmup_s
        return percentile(sorted(later), 0.5) if later else 0.0

    def reserve(self, units: int) -> None:
        """Make room for `units` recorded units' outputs (called between rounds, outside their time)."""

    def unit_ms(self) -> float:
        """A steady unit's device time, back to back: each label's median lap times its laps per unit."""
        if not self.measured:
            return 0.0
        return sum(
            percentile(sorted(v), 0.5) * len(v) / self.measured for k, v in self.laps.items() if k != LATENCY
        )

    @property
    def cpu_steal_pct(self) -> float | None:
        return 100 * self.steal_jiffies / self.cpu_jiffies if self.cpu_jiffies > 0 else None

    @property
    def cpu_wait_pct(self) -> float | None:
        """Of the time this process's threads wanted a CPU over the timed rounds, the share they waited."""
        wanted = self.thread_run_ns + self.thread_wait_ns
        return 100 * self.thread_wait_ns / wanted if wanted > 0 else None

    @property
    def others_cpu_pct(self) -> float | None:
        """Other processes' share of the time of this process's CPUs over the timed rounds."""
        return self.others_cpu.pct


class StepVariant(Variant):
    """A one-lap unit: the scenario's step on the next batch. With `outputs` (one slot per unit, on the
    device) each recorded unit's output is copied there (training: the loss curve)."""

    def __init__(
        self,
        name: str,
        step: Callable[[Any], torch.Tensor],
        batches: Iterator[Any],
        *,
        outputs: torch.Tensor | None = None,
        setup_s: float = 0.0,
    ):
        super().__init__(name, setup_s=setup_s)
        self.step = step
        self.batches = batches
        self.outputs = outputs

    def run_unit(self, laps: Laps | None, *, record: bool = True) -> None:
        out = self.step(next(self.batches))
        if record and self.outputs is not None:
            # Copy the output out at once: with CUDA graphs the next replay overwrites it.
            self.outputs[self.done].copy_(out)
        if laps is not None:
            laps.mark(STEP)
        if record:
            self.done += 1

    def run_step(self, record: bool = True) -> None:
        self.run_unit(None, record=record)

    def reserve(self, units: int) -> None:
        if self.outputs is not None and units > len(self.outputs):
            grow = max(units, 2 * len(self.outputs)) - len(self.outputs)
            self.outputs = torch.cat([self.outputs, self.outputs.new_zeros(grow)])

    def recorded_outputs(self) -> list[float]:
        """The recorded units' outputs, in order (the loss curve)."""
        return [] if self.outputs is None else self.outputs[: self.done].tolist()

    def release(self) -> None:
        self.step = self.batches = None  # type: ignore[assignment]
        self.outputs = torch.empty(0)


def units_per_round(round_s: float, unit_s: float) -> int:
    """How many units make a round of about `round_s` seconds (at least one)."""
    return max(1, round(round_s / unit_s)) if unit_s > 0 else 1


class Timer:
    """Runs variants' units on one device: warm-up, timed rounds, solo phases."""

    def __init__(
        self,
        *,
        device: torch.device,
        progress: Callable[..., None],  # (variant, phase, done, total)
        measured_total: int,
        host: HostCheck | None = None,
    ):
        self.device = device
        self.memory = Memory(device)
        self.progress = progress
        self.measured_total = measured_total  # measured units per variant by the next look (progress)
        self.host = host if host is not None else HostCheck(burst_s=0.0)  # the host's speed before each round
        self.pending: list[tuple[Variant, Laps, int]] = []  # timed rounds not read yet (flush)

    def lead_in_units(self, variant: Variant) -> int:
        """Untimed units before each timed round, so it starts in the variant's own steady state: one on a
        GPU; none on a CPU (synchronous ops) or for a unit that drains the device itself."""
        return 1 if self.device.type == "cuda" and not variant.starts_idle else 0

    def warm_up(
        self,
        variant: Variant,
        units: int,
        *,
        show: bool = True,
        after_first: Callable[[], None] | None = None,
    ) -> None:
        """Run warm-up units one at a time, each timed by a wall clock after a sync; `after_first` runs
        after the first unit (its compilation) and outside every unit's time."""
        for i in range(units):
            start = time.perf_counter()
            variant.run_unit(None)
            synchronize(self.device)
            variant.warmup_s.append(time.perf_counter() - start)
            if i == 0 and after_first is not None:
                after_first()
            if show:
                self.progress(variant.name, "warmup", i + 1, units)

    def timed_round(self, variant: Variant, units: int, *, show: bool = True) -> None:
        """Run `units` measured units with boundary events and no host sync inside; their laps are read at the
        next `flush`. Before the round the device drains and a lead-in unit runs untimed, so each unit's host
        preamble overlaps only its own variant's queued work (another variant's queue would hide its
        launches; an idle device would add a cold start). Nothing runs on the host between the lead-in and
        the first timed unit: a launch-bound unit's device would idle through it, inside the first lap. The
        CPU counters are read outside that span (the lead-in inside their window)."""
        self.host.sample()
        variant.reserve(variant.done + units)
        every = max(1, self.measured_total // 50)  # about 50 progress events by the next look
        laps = Laps(self.device, 1 + units * variant.marks_per_unit)
        before = cpu_ticks()
        variant.others_cpu.start(before)
        threads_before = thread_cpu_and_wait_ns()
        if self.lead_in_units(variant):
            synchronize(self.device)
            variant.run_unit(None, record=False)
        laps.mark(None)
        for i in range(units):
            variant.run_unit(laps)
            done = variant.measured + variant.queued + i + 1
            if show and (done % every == 0 or i + 1 == units):
                self.progress(variant.name, "measure", done, self.measured_total)
        threads_after = thread_cpu_and_wait_ns()
        after = cpu_ticks()
        if before is not None and after is not None:
            variant.steal_jiffies += after.steal - before.steal
            variant.cpu_jiffies += after.total - before.total
        if threads_before is not None and threads_after is not None:
            run_ns, wait_ns = cpu_and_wait_between(threads_before, threads_after)
            variant.thread_run_ns += run_ns
            variant.thread_wait_ns += wait_ns
            variant.others_cpu.stop(after, own_threads_ns=run_ns)
        variant.queued += units
        self.pending.append((variant, laps, units))

    def flush(self) -> None:
        """Read the rounds timed since the last flush (one sync) into their variants, in order."""
        for variant, laps, units in self.pending:
            variant.add_round(laps.read(), units)
            variant.queued -= units
        self.pending.clear()

    def latency_round(self, variant: Variant, units: int) -> None:
        """Run `units` units one at a time, each synchronized before and after and timed by the host's
        clock: the latency a request sees (its launch included), not the time per unit of a busy queue."""
        self.flush()  # its syncs end the rounds before it: read them in order
        times = []
        for _ in range(units):
            synchronize(self.device)
            start = time.perf_counter()
            variant.run_unit(None, record=False)
            synchronize(self.device)
            times.append((time.perf_counter() - start) * 1000)
        variant.add_round({LATENCY: times}, 0)

    def solo_phase(
        self,
        variant: Variant,
        *,
        warmup: int,
        units: Callable[[], int],
        show: bool = True,
        after_first: Callable[[], None] | None = None,
    ) -> None:
        """Warm-up, then one timed round of `units()` units, nothing else on the device: the memory peaks
        over the warm-up (compilation included) and the measured units are the variant's own. `after_first`
        runs after the first warm-up unit (or before the round when there is no warm-up)."""
        memory, peaks = self.memory, variant.peaks
        memory.reset_peak()
        self.warm_up(variant, warmup, show=show, after_first=after_first)
        if warmup == 0 and after_first is not None:
            after_first()
        peaks.job_allocated, peaks.job_reserved = memory.peak_allocated(), memory.peak_reserved()
        memory.reset_peak()
        self.timed_round(variant, units(), show=show)
        self.flush()
        peaks.allocated, peaks.reserved = memory.peak_allocated(), memory.peak_reserved()
        peaks.job_allocated = max(peaks.job_allocated, peaks.allocated)
        peaks.job_reserved = max(peaks.job_reserved, peaks.reserved)

    def release(self, variant: Variant, baseline: int) -> int:
        """Free a variant's device memory and return how many bytes stayed allocated above `baseline`
        (allocated before it was built): ~0 unless something leaked."""
        variant.release()
        gc.collect()
        if self.memory.cuda:
            torch.cuda.empty_cache()
        return max(0, self.memory.allocated() - baseline)
