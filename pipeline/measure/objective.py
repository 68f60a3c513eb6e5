"""What a job is judged on, defined once (torch-free): the work one unit of it does (:class:`Work`, stated
by the worker) and the figure a sweep ranks configurations by (:class:`Objective`, chosen by `choose`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pipeline.measure.registry import HIGHER, METRICS, estimate, interval_of

STEP_P50 = "step/p50_ms"
SAMPLES_PER_S = "throughput/samples_per_s"
TOKENS_PER_S = "throughput/tokens_per_s"
SPEEDUP = "speedup/vs_eager"  # a compiled job's paired speedup over its eager copy
GEOMEAN_SPEEDUP = "sweep/geomean_speedup"  # a sweep's geometric mean of its passing jobs' SPEEDUP


@dataclass(frozen=True, kw_only=True)
class Work:
    """What one unit of a job does: a training step, a forward call, a decode step."""

    unit: str  # what a unit is, in words ("training step")
    samples: float  # samples one unit processes, over every rank (every call's where batch sizes cycle)
    tokens: float | None  # tokens one unit processes (token models); None for image models
    objective: str = STEP_P50  # the metric this scenario is judged on unless the sweep says otherwise

    def tags(self) -> dict[str, str]:
        return {
            "unit": self.unit,
            "samples_per_unit": f"{self.samples:g}",
            "tokens_per_unit": "" if self.tokens is None else f"{self.tokens:g}",
            "objective": self.objective,
        }

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> Work | None:
        """The work a run's tags state, or None for a run that states none (a failure before its worker)."""
        try:
            return cls(
                unit=tags["unit"],
                samples=float(tags["samples_per_unit"]),
                tokens=float(tags["tokens_per_unit"]) if tags.get("tokens_per_unit") else None,
                objective=tags.get("objective") or STEP_P50,
            )
        except (KeyError, ValueError):
            return None

    @classmethod
    def from_dict(cls, data: Mapping[str, object] | None) -> Work | None:
        if not data:
            return None
        return cls(**{k: data[k] for k in ("unit", "samples", "tokens", "objective") if k in data})  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class Objective:
    """The metric a sweep ranks by, which way is better, and where its 95% interval comes from."""

    metric: str
    label: str
    higher_is_better: bool
    interval: tuple[str, str] | None = None  # the metrics holding its interval's ends
    inverse_of: str | None = None  # a rate of this latency objective: its interval is that one's turned over

    def estimate(self, metrics: Mapping[str, float]) -> tuple[float, float, float]:
        """(figure, low, high) of one job."""
        value = metrics[self.metric]
        if self.interval is not None:
            low, high = self.interval
            return value, metrics.get(low, value), metrics.get(high, value)
        if self.inverse_of is not None:
            p50, low, high = OBJECTIVES[self.inverse_of].estimate(metrics)
            # A median whose interval reaches 0 ms (two or three measured steps) bounds no rate above.
            return value, value * p50 / high, value * p50 / low if low > 0 else math.inf
        return value, value, value

    @property
    def ascending(self) -> bool:
        """The order a table sorts in to show the best first."""
        return not self.higher_is_better


def paired_speedup(metrics: Mapping[str, float]) -> tuple[float, float, float]:
    """A compiled job's paired speedup as verdicts judge it: (speedup, low, high), its 95% interval (its
    rounds' range for runs that logged none). One that follows the host (`step/host_bound`) holds for its
    own host speed only, so its interval widens to speedup x p50/p90 .. x p50/p10 of its steps."""
    s, low, high = estimate(metrics, SPEEDUP)
    if low is None or high is None:
        low, high = metrics.get("speedup/round_min", s), metrics.get("speedup/round_max", s)
    p10, p50, p90 = (metrics.get(f"step/{q}_ms") for q in ("p10", "p50", "p90"))
    if metrics.get("step/host_bound") and p10 and p50 and p90:
        low, high = min(low, s * p50 / p90), max(high, s * p50 / p10)
    return s, low, high


def higher_is_better(metric: str) -> bool:
    """Which way the registry says `metric` is better; ValueError for a metric with no better side."""
    better = METRICS[metric].better if metric in METRICS else None
    if better is None:
        raise ValueError(f"{metric} has no better side to rank by (pipeline/measure/registry.py)")
    return better == HIGHER


def _objective(metric: str, label: str, inverse_of: str | None = None) -> Objective:
    return Objective(
        metric=metric,
        label=label,
        higher_is_better=higher_is_better(metric),
        interval=interval_of(metric),
        inverse_of=inverse_of,
    )


STEP_TIME = _objective(STEP_P50, "median step time, ms (lower is better)")
LATENCY = _objective("latency/p50_ms", "median latency of one call (synchronized), ms (lower is better)")
SAMPLES = _objective(SAMPLES_PER_S, "throughput, samples/s (higher is better)", inverse_of=STEP_P50)
TOKENS = _objective(TOKENS_PER_S, "throughput, tokens/s (higher is better)", inverse_of=STEP_P50)
OBJECTIVES = {o.metric: o for o in (STEP_TIME, LATENCY, SAMPLES, TOKENS)}


def objective_named(metric: str) -> Objective:
    """The objective for a metric: a known one, or a registered metric ranked the way the registry says is
    better (ValueError for one with no better side: sweep.objective's check refuses it first)."""
    if metric in OBJECTIVES:
        return OBJECTIVES[metric]
    higher = higher_is_better(metric)
    return Objective(
        metric=metric,
        label=f"{metric} ({'higher' if higher else 'lower'} is better)",
        higher_is_better=higher,
    )


def choose(works: Iterable[Work | None], configured: str | None = None) -> Objective:
    """The objective of a sweep whose jobs state these works: `sweep.objective` when it names one; else,
    while every job does the same work per unit, their scenario's default (if they share one; else the
    median step time); else throughput (tokens/s when every job counts tokens, samples/s otherwise)."""
    if configured:
        return objective_named(configured)
    known = [w for w in works if w is not None]
    per_unit = {(w.samples, w.tokens) for w in known}
    defaults = {w.objective for w in known}
    if len(per_unit) <= 1:
        return objective_named(defaults.pop() if len(defaults) == 1 else STEP_P50)
    return TOKENS if all(w.tokens for w in known) else SAMPLES
