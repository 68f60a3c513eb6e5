"""Statistics of measured durations, as a typed record (:class:`Latency`). Torch-free.

The 95% interval of a median step time (:func:`median_interval`) allows for three things step times do
(docs/verdicts.md has the tables):

* **Autocorrelation.** Consecutive steps are not independent draws (a clock boost, a busy host, the
  allocator's state carry over). With lag-1 autocorrelation rho, n steps carry about
  n (1 - rho) / (1 + rho) independent observations (at least 2; the autocorrelation is assumed to decay
  geometrically with the lag), and the half-width is Student's t(n_eff - 1) times the median's standard error.
* **Heavy tails.** One 5-50x stall must not decide the interval: rho is taken on the steps' ranks, with
  Kendall's small-sample bias correction, and the scale is the MAD's (1.4826 MAD), not the standard deviation's.
* **Several regimes.** On a loaded host steps fall in clusters, where a normal density at the median says
  nothing. So the interval is the hull of the normal-theory one (median +- t 1.2533 sigma / sqrt(n_eff)),
  which covers short strongly autocorrelated series, and the sign test's (the order statistics at
  0.5 +- 1.96 x 0.5 / sqrt(n_eff), which needs no density and no t), which covers multimodal ones.
"""

from __future__ import annotations

import itertools
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


MAX_RHO = 0.98
# Student's t, two-sided 95%, by degrees of freedom (above 30: the normal's 1.96).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
_T975.update(
    {10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}
)


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval (conservative between tabulated values)."""
    if df > 30:
        return 1.96
    return _T975[max(k for k in _T975 if k <= max(1, df))]


def blocks(values: list[float], count: int) -> list[list[float]]:
    """`values` cut in order into `count` contiguous blocks of near-equal size."""
    size, extra = divmod(len(values), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(values[start:end])
        start = end
    return out


def lag1_autocorrelation(values: list[float]) -> float:
    """The series' lag-1 autocorrelation (0 for fewer than 3 values or a constant series)."""
    if len(values) < 3:
        return 0.0
    mean = statistics.fmean(values)
    dev = [v - mean for v in values]
    den = sum(d * d for d in dev)
    return sum(a * b for a, b in itertools.pairwise(dev)) / den if den > 0 else 0.0


def effective_count(values_in_order: list[float]) -> float:
    """How many independent observations an autocorrelated series is worth (the paired speedup's log-ratios,
    pipeline/measure/paired.py): n (1 - rho) / (1 + rho), rho its lag-1 autocorrelation with Kendall's bias correction (+ (1 + 4 rho) / n; the raw estimate reads
    low), clipped to [0, MAX_RHO]; at least 2."""
    n = len(values_in_order)
    raw = lag1_autocorrelation(values_in_order)
    rho = min(max(raw + (1 + 4 * raw) / max(n, 1), 0.0), MAX_RHO)
    return max(2.0, n * (1 - rho) / (1 + rho))


def ranks(values: list[float]) -> list[float]:
    """Each value's rank among `values` (0 for the smallest; ties share their mean rank)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def median_effective_count(values_in_order: list[float]) -> float:
    """How many independent observations a series is worth for its median: n (1 - rho) / (1 + rho), rho
    the lag-1 autocorrelation of the steps' ranks (robust to stalls) with Kendall's bias correction
    (+ (1 + 4 rho) / n), clipped to [0, MAX_RHO]; at least 2."""
    n = len(values_in_order)
    raw = lag1_autocorrelation(ranks(values_in_order))
    rho = min(max(raw + (1 + 4 * raw) / max(n, 1), 0.0), MAX_RHO)
    return max(2.0, n * (1 - rho) / (1 + rho))


def quantiles(confidence: float, df: int) -> tuple[float, float]:
    """Student's t (df degrees of freedom) and the normal's two-sided quantiles at `confidence`."""
    if confidence == 0.95:
        return t975(df), 1.96
    from scipy.special import ndtri, stdtrit  # levels other than 95%: a measurement's looks

    return float(stdtrit(max(1, df), 0.5 + confidence / 2)), float(ndtri(0.5 + confidence / 2))


def median_interval(values_in_order: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Interval of the median of a series of durations at `confidence`, honest for autocorrelation, heavy
    tails and steps from several regimes (the module's docstring); its low end is at least 0."""
    s = sorted(values_in_order)
    center = percentile(s, 0.5)
    n_eff = median_effective_count(values_in_order)
    t, z = quantiles(confidence, int(n_eff) - 1)
    sigma = 1.4826 * statistics.median(abs(v - center) for v in s)
    if sigma == 0 and len(s) > 1:
        sigma = statistics.stdev(s)
    half = t * 1.2533 * sigma / math.sqrt(n_eff)
    reach = z * 0.5 / math.sqrt(n_eff)  # how far the median's rank may be from the middle, as a fraction
    low = min(center - half, percentile(s, max(0.0, 0.5 - reach)))
    high = max(center + half, percentile(s, min(1.0, 0.5 + reach)))
    return max(low, 0.0), high


# An interval that spans more than this factor (high / low) says nothing about its figure: for an interval
# centred on its figure v, [v - w/2, v + w/2], it is the same as being wider than the figure (w > v); for a
# ratio (a speedup) it is the same width on the log scale, whichever way the ratio points.
UNDETERMINED_FACTOR = 3.0


def undetermined(low: float, high: float) -> bool:
    """Whether an interval is too wide to be shown as numbers: it reaches 0 or infinity, or spans more than
    UNDETERMINED_FACTOR (docs/verdicts.md)."""
    if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
        return True
    return high / low > UNDETERMINED_FACTOR


@dataclass(frozen=True, kw_only=True)
class Latency:
    """Durations in milliseconds, summarized: built in one place (:meth:`from_values`)."""

    count: int
    mean: float
    p10: float
    p50: float
    p90: float
    p99: float
    std: float
    min: float
    max: float
    ci95_low: float  # interval of the median (95% over all of a job's looks): autocorrelation, tails, regimes
    ci95_high: float

    @classmethod
    def from_values(cls, values_ms: list[float], confidence: float = 0.95) -> Latency:
        """`values_ms` in the order they were measured (the interval depends on it); the median's interval
        at `confidence` (a measurement that looked several times: its looks' level)."""
        s = sorted(values_ms)
        low, high = median_interval(values_ms, confidence)
        return cls(
            count=len(s),
            mean=statistics.fmean(s),
            p10=percentile(s, 0.1),
            p50=percentile(s, 0.5),
            p90=percentile(s, 0.9),
            p99=percentile(s, 0.99),
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
            f"{section}/p99_ms": self.p99,
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
    def of(cls, step: Latency, samples: float, tokens: float | None) -> Throughput:
        """At the median of `step`, a unit of `samples` samples (and `tokens` tokens, token models)."""
        per_s = 1000 / step.p50
        return cls(samples_per_s=samples * per_s, tokens_per_s=tokens * per_s if tokens else None)

    def metrics(self) -> dict[str, float]:
        m = {"throughput/samples_per_s": self.samples_per_s}
        if self.tokens_per_s is not None:
            m["throughput/tokens_per_s"] = self.tokens_per_s
        return m
