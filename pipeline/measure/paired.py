"""The paired eager baseline: speedup, memory ratio and loss parity of the compiled variant against an
eager copy run in the same worker, on the same weights and batches, in alternating rounds."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from pipeline.measure.memory import MemoryPeaks, gib
from pipeline.measure.parity import LossParity, loss_divergence
from pipeline.measure.sequential import speedup_interval
from pipeline.measure.stats import PAIRED, Latency
from pipeline.measure.timing import Variant


@dataclass(frozen=True, kw_only=True)
class PairedComparison:
    """The compiled variant against its paired eager copy on one figure (the headline laps, or the latency
    of synchronized calls); the eager copy's statistics are logged under `eager_prefix`."""

    eager: Latency
    speedup: float  # the adjacent rounds' ratios' Hodges-Lehmann estimate (pipeline/measure/sequential.py)
    round_speedups: list[float]  # per pair of adjacent rounds: eager round median / compiled round median
    ci95: tuple[float, float]  # its interval: 95% over all of the job's looks
    eager_peaks: MemoryPeaks | None  # the eager probe's, alone on the device (CUDA only)
    memory_ratio: float | None  # compiled / eager reserved peak over the measured steps (CUDA only)
    parity: LossParity | None  # training: loss curves compared (other scenarios judge their outputs)
    eager_prefix: str = "eager/"  # `eager/latency_` for the latency of synchronized calls

    def metrics(self) -> dict[str, float]:
        m = {
            **self.eager.metrics(self.eager_prefix, PAIRED),
            "speedup/vs_eager": self.speedup,
            "speedup/ci95_low": self.ci95[0],
            "speedup/ci95_high": self.ci95[1],
            "speedup/round_min": min(self.round_speedups),
            "speedup/round_max": max(self.round_speedups),
        }
        if self.eager_peaks is not None and self.memory_ratio is not None:
            m["eager/peak_allocated_gib"] = gib(self.eager_peaks.allocated)
            m["eager/peak_reserved_gib"] = gib(self.eager_peaks.reserved)
            m["memory/ratio_vs_eager"] = self.memory_ratio
        return {**m, **(self.parity.metrics() if self.parity is not None else {})}


def pair_log_ratios(main: Variant, eager: Variant, label: str | None = None) -> list[float]:
    """log(eager round median / compiled round median) for each pair of adjacent rounds, in order. The
    compiled variant's first round ran alone (its memory phase) before the eager copy existed, so rounds
    are paired from the end."""
    compiled_rounds, eager_rounds = main.round_laps(label), eager.round_laps(label)
    pairs = min(len(compiled_rounds), len(eager_rounds))
    return [
        math.log(statistics.median(e) / statistics.median(c))
        for e, c in zip(eager_rounds[-pairs:], compiled_rounds[-pairs:], strict=True)
    ]


def compare(
    main: Variant,
    eager: Variant,
    probe: Variant | None,
    *,
    cuda: bool,
    losses: tuple[list[float], list[float]] | None = None,
    loss_rtol: float = 0.05,
    parity_steps: int = 3,
    label: str | None = None,
    eager_prefix: str = "eager/",
    confidence: float = 0.95,
) -> PairedComparison:
    """The paired speedup of a figure (the headline laps, or `label`'s) with its interval at `confidence`,
    the memory ratio (solo reserved peaks), and loss parity when `losses` (compiled, eager) are given."""
    logs = pair_log_ratios(main, eager, label)
    low, speedup, high = speedup_interval(logs, confidence)
    probe_peaks = probe.peaks if cuda and probe is not None and probe.peaks.reserved else None
    return PairedComparison(
        eager=eager.latency(label, confidence),
        speedup=speedup,
        ci95=(low, high),
        round_speedups=[math.exp(x) for x in logs],
        eager_peaks=probe_peaks,
        memory_ratio=main.peaks.reserved / probe_peaks.reserved if probe_peaks else None,
        parity=loss_divergence(losses[0], losses[1], loss_rtol, parity_steps) if losses is not None else None,
        eager_prefix=eager_prefix,
    )
