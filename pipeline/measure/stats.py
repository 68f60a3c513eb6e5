"""Statistics of measured durations (:class:`Latency`), and an interval of their median that holds for
autocorrelated, heavy-tailed steps from several regimes (:func:`median_interval`; docs/verdicts.md has
the tables). Torch-free."""

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


MAX_RHO = 0.98
# Student's t, two-sided 95%, by degrees of freedom (above 30: the normal's 1.96).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
_T975.update(
    {10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}
)


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval (conservative between tabulated values)."""
    return 1.96 if df > 30 else _T975[max(k for k in _T975 if k <= max(1, df))]


def sample_std(values: list[float]) -> float:
    """The sample standard deviation (n - 1) in floating point: `statistics.stdev` sums exact fractions,
    about 50 times slower, and a verdict's simulations (benchmarks/verdict_power.py) call this 10^5 times."""
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def lag1_autocorrelation(values: list[float]) -> float:
    """The series' lag-1 autocorrelation (0 for fewer than 3 values or a constant series)."""
    if len(values) < 3:
        return 0.0
    mean = statistics.fmean(values)
    dev = [v - mean for v in values]
    den = sum(d * d for d in dev)
    return sum(a * b for a, b in itertools.pairwise(dev)) / den if den > 0 else 0.0


def _worth(n: int, raw: float) -> float:
    """n (1 - rho) / (1 + rho), rho the raw lag-1 autocorrelation with Kendall's bias correction
    (+ (1 + 4 rho) / n: the raw estimate reads low), clipped to [0, MAX_RHO]; at least 2."""
    rho = min(max(raw + (1 + 4 * raw) / max(n, 1), 0.0), MAX_RHO)
    return max(2.0, n * (1 - rho) / (1 + rho))


def effective_count(values_in_order: list[float]) -> float:
    """How many independent observations an autocorrelated series is worth (`_worth` of its values)."""
    return _worth(len(values_in_order), lag1_autocorrelation(values_in_order))


def ranks(values: list[float]) -> list[float]:
    """Each value's rank among `values` (0 for the smallest; ties share their mean rank)."""
    out, first = [0.0] * len(values), 0
    order = sorted(range(len(values)), key=values.__getitem__)
    for _, group in itertools.groupby(order, key=values.__getitem__):
        tied = list(group)
        last = first + len(tied) - 1
        for k in tied:
            out[k] = (first + last) / 2
        first = last + 1
    return out


def median_effective_count(values_in_order: list[float]) -> float:
    """How many independent observations a series is worth for its median: `_worth` of its ranks'
    autocorrelation (robust to stalls)."""
    return _worth(len(values_in_order), lag1_autocorrelation(ranks(values_in_order)))


def median_interval(values_in_order: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Interval of the median of a series of durations at `confidence`, its low end at least 0: the hull of
    the normal-theory interval (median +- t 1.2533 sigma / sqrt(n_eff), sigma the MAD's, for short strongly
    autocorrelated series) and the sign test's order statistics (no density: for multimodal ones)."""
    s = sorted(values_in_order)
    center = percentile(s, 0.5)
    n_eff = median_effective_count(values_in_order)
    df = int(n_eff) - 1
    if confidence == 0.95:  # Student's t and the normal's two-sided quantiles
        t, z = t975(df), 1.96
    else:  # levels other than 95%: a measurement's looks
        from scipy.special import ndtri, stdtrit

        t, z = float(stdtrit(max(1, df), 0.5 + confidence / 2)), float(ndtri(0.5 + confidence / 2))
    sigma = 1.4826 * statistics.median(abs(v - center) for v in s)
    if sigma == 0 and len(s) > 1:
        sigma = sample_std(s)
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


SUMMARY = ("p50", "mean", "p10", "p90", "p99", "std", "min", "max")  # a figure's statistics, as logged
PAIRED = ("p50", "p10", "p90")  # those a paired eager copy logs


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
            std=sample_std(s) if len(s) > 1 else 0.0,
            min=s[0],
            max=s[-1],
            ci95_low=low,
            ci95_high=high,
        )

    @property
    def spread_pct(self) -> float:
        """(p90 - p10) / p50, in percent: how much steady-state durations vary."""
        return 100 * (self.p90 - self.p10) / self.p50

    def metrics(self, prefix: str = "step/", figures: tuple[str, ...] = SUMMARY) -> dict[str, float]:
        """`figures` and the median's interval under the registry's names (`step/p50_ms`, ...); a paired
        eager copy logs PAIRED under `eager/` or `eager/latency_`."""
        m = {f"{prefix}{figure}_ms": getattr(self, figure) for figure in figures}
        return {**m, f"{prefix}p50_ci95_low_ms": self.ci95_low, f"{prefix}p50_ci95_high_ms": self.ci95_high}


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
