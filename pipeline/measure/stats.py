"""Statistics of measured durations, as a typed record (:class:`Latency`). Torch-free."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_ci95(sorted_values: list[float]) -> tuple[float, float]:
    """Distribution-free 95% confidence interval of the median from order statistics."""
    n = len(sorted_values)
    half_width = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half_width) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half_width))
    return sorted_values[lo], sorted_values[hi]


@dataclass(frozen=True, kw_only=True)
class Latency:
    """Durations in milliseconds, summarized: built in one place (:meth:`from_values`)."""

    count: int
    mean: float
    p10: float
    p50: float
    p90: float
    std: float
    min: float
    max: float
    ci95_low: float  # distribution-free 95% confidence interval of the median
    ci95_high: float

    @classmethod
    def from_values(cls, values_ms: list[float]) -> Latency:
        s = sorted(values_ms)
        low, high = median_ci95(s)
        return cls(
            count=len(s),
            mean=statistics.fmean(s),
            p10=percentile(s, 0.1),
            p50=percentile(s, 0.5),
            p90=percentile(s, 0.9),
            std=statistics.stdev(s) if len(s) > 1 else 0.0,
            min=s[0],
            max=s[-1],
            ci95_low=low,
            ci95_high=high,
        )

    @property
    def spread_pct(self) -> float:
        """(p90 - p10) / p50, in percent: how much steady-state durations vary."""
        return 100 * (self.p90 - self.p10) / self.p50

    def metrics(self, section: str = "step") -> dict[str, float]:
        """The registry's names for these statistics (`step/p50_ms`, ...)."""
        return {
            f"{section}/p50_ms": self.p50,
            f"{section}/mean_ms": self.mean,
            f"{section}/p10_ms": self.p10,
            f"{section}/p90_ms": self.p90,
            f"{section}/std_ms": self.std,
            f"{section}/min_ms": self.min,
            f"{section}/max_ms": self.max,
            f"{section}/p50_ci95_low_ms": self.ci95_low,
            f"{section}/p50_ci95_high_ms": self.ci95_high,
        }


@dataclass(frozen=True, kw_only=True)
class Throughput:
    """Work per second at the median step time."""

    samples_per_s: float
    tokens_per_s: float | None  # token models only

    @classmethod
    def of(cls, step: Latency, batch_size: int, tokens_per_sample: int | None) -> Throughput:
        per_s = 1000 / step.p50
        return cls(
            samples_per_s=batch_size * per_s,
            tokens_per_s=batch_size * tokens_per_sample * per_s if tokens_per_sample else None,
        )

    def metrics(self) -> dict[str, float]:
        m = {"throughput/samples_per_s": self.samples_per_s}
        if self.tokens_per_s is not None:
            m["throughput/tokens_per_s"] = self.tokens_per_s
        return m
