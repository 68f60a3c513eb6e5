"""The paired eager baseline: speedup, memory ratio and loss parity of the compiled variant against an
eager copy run in the same worker, on the same weights and batches, in alternating rounds."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from pipeline.measure.memory import MemoryPeaks, gib
from pipeline.measure.parity import LossParity, loss_divergence
from pipeline.measure.stats import MIN_BLOCK, Latency, blocks, effective_count, t975
from pipeline.measure.timing import Variant


@dataclass(frozen=True, kw_only=True)
class PairedComparison:
    """The compiled variant against its paired eager copy on one figure: the headline laps, or the
    latency of synchronized calls (`label`); the eager copy's statistics are logged under `eager/`
    with the figure's prefix (`eager/p50_ms`, `eager/latency_p50_ms`)."""

    eager: Latency
    speedup: float  # eager median / compiled median, over all rounds
    round_speedups: list[float]  # per round: eager round median / compiled round median
    ci95: tuple[float, float]  # interval of `speedup` from paired blocks (see speedup_interval)
    eager_peaks: MemoryPeaks | None  # the eager probe's, alone on the device (CUDA only)
    memory_ratio: float | None  # compiled / eager reserved peak over the measured steps (CUDA only)
    parity: LossParity | None  # training: loss curves compared (other scenarios judge their outputs)
    eager_prefix: str = "eager/"  # `eager/latency_` for the latency of synchronized calls

    def metrics(self) -> dict[str, float]:
        e = self.eager_prefix
        m = {
            f"{e}p50_ms": self.eager.p50,
            f"{e}p10_ms": self.eager.p10,
            f"{e}p90_ms": self.eager.p90,
            f"{e}p50_ci95_low_ms": self.eager.ci95_low,
            f"{e}p50_ci95_high_ms": self.eager.ci95_high,
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


def speedup_interval(
    compiled_ms: list[float], eager_ms: list[float], rounds: list[int], speedup: float
) -> tuple[float, float]:
    """95% interval of the speedup from paired blocks: each round of either variant is cut into the same
    number of contiguous blocks, and block j of compiled round r is paired with block j of eager round
    r, measured a moment apart, so drift between rounds cancels in the ratio. The interval of the mean
    log-ratio counts the pairs' effective number (their own autocorrelation, as for step times in
    pipeline/measure/stats.py) and is centred on the overall speedup. Too few steps for two pairs: the
    lowest and highest per-round speedup."""
    per_round = min(rounds) // MIN_BLOCK
    if per_round * len(rounds) < 2:
        ratios = [
            _median_ratio(e, c)
            for e, c in zip(_rounds(eager_ms, rounds), _rounds(compiled_ms, rounds), strict=True)
        ]
        return min(min(ratios), speedup), max(max(ratios), speedup)
    logs = [
        math.log(_median_ratio(e, c))
        for e_round, c_round in zip(_rounds(eager_ms, rounds), _rounds(compiled_ms, rounds), strict=True)
        for e, c in zip(blocks(e_round, per_round), blocks(c_round, per_round), strict=True)
    ]
    n_eff = min(effective_count(logs), len(logs))
    half = t975(int(n_eff) - 1) * statistics.stdev(logs) / math.sqrt(n_eff)
    return speedup * math.exp(-half), speedup * math.exp(half)


def _rounds(values: list[float], rounds: list[int]) -> list[list[float]]:
    out, start = [], 0
    for n in rounds:
        out.append(values[start : start + n])
        start += n
    return out


def _median_ratio(eager: list[float], compiled: list[float]) -> float:
    return statistics.median(eager) / statistics.median(compiled)


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
) -> PairedComparison:
    """Speedup of a figure (the headline laps, or `label`'s: median of eager / median of compiled, same
    worker, interleaved rounds of equal size), its spread over rounds, memory ratio (solo reserved
    peaks), and loss parity when `losses` (compiled, eager curves) are given."""
    label = label or main.primary
    rounds = main.round_sizes[label]
    assert rounds == eager.round_sizes[label], "paired variants are timed in rounds of equal size"
    compiled_ms, eager_ms = main.laps[label], eager.laps[label]
    eager_latency = eager.latency(label)
    probe_peaks = probe.peaks if cuda and probe is not None and probe.peaks.reserved else None
    speedup = eager_latency.p50 / main.latency(label).p50
    return PairedComparison(
        eager=eager_latency,
        speedup=speedup,
        ci95=speedup_interval(compiled_ms, eager_ms, rounds, speedup),
        round_speedups=[
            _median_ratio(e, c)
            for e, c in zip(_rounds(eager_ms, rounds), _rounds(compiled_ms, rounds), strict=True)
        ],
        eager_peaks=probe_peaks,
        memory_ratio=main.peaks.reserved / probe_peaks.reserved if probe_peaks else None,
        parity=loss_divergence(losses[0], losses[1], loss_rtol, parity_steps) if losses is not None else None,
        eager_prefix=eager_prefix,
    )
