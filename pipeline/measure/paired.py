"""The paired eager baseline: speedup, memory ratio and loss parity of the compiled variant against an
eager copy run in the same worker, on the same weights and batches, in alternating rounds."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.measure.memory import MemoryPeaks, gib
from pipeline.measure.parity import LossParity, loss_divergence
from pipeline.measure.stats import Latency
from pipeline.measure.timing import Variant


@dataclass(frozen=True, kw_only=True)
class PairedComparison:
    eager: Latency
    speedup: float  # eager median / compiled median, over all rounds
    round_speedups: list[float]  # per round: eager round median / compiled round median
    eager_peaks: MemoryPeaks | None  # the eager probe's, alone on the device (CUDA only)
    memory_ratio: float | None  # compiled / eager reserved peak over the measured steps (CUDA only)
    parity: LossParity

    def metrics(self) -> dict[str, float]:
        m = {
            "eager/p50_ms": self.eager.p50,
            "eager/p10_ms": self.eager.p10,
            "eager/p90_ms": self.eager.p90,
            "speedup/vs_eager": self.speedup,
            "speedup/round_min": min(self.round_speedups),
            "speedup/round_max": max(self.round_speedups),
        }
        if self.eager_peaks is not None and self.memory_ratio is not None:
            m["eager/peak_allocated_gib"] = gib(self.eager_peaks.allocated)
            m["eager/peak_reserved_gib"] = gib(self.eager_peaks.reserved)
            m["memory/ratio_vs_eager"] = self.memory_ratio
        return {**m, **self.parity.metrics()}


def compare(
    main: Variant, eager: Variant, probe: Variant | None, *, cuda: bool, loss_rtol: float, parity_steps: int
) -> PairedComparison:
    """Speedup (median of eager / median of compiled, same worker, interleaved rounds), its spread over
    rounds, memory ratio (solo reserved peaks), and loss parity."""
    eager_latency = eager.latency()
    probe_peaks = probe.peaks if cuda and probe is not None and probe.peaks.reserved else None
    return PairedComparison(
        eager=eager_latency,
        speedup=eager_latency.p50 / main.latency().p50,
        round_speedups=[e / c for e, c in zip(eager.round_p50_ms, main.round_p50_ms, strict=True)],
        eager_peaks=probe_peaks,
        memory_ratio=main.peaks.reserved / probe_peaks.reserved if probe_peaks else None,
        parity=loss_divergence(main.losses.tolist(), eager.losses.tolist(), loss_rtol, parity_steps),
    )
