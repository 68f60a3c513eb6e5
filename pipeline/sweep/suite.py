"""A suite's answer (`sweep.kind=suite`): per model, the compiled job against its own paired eager copy
(faster, slower, no difference, inconclusive or failed), then the pass rate, geometric-mean speedup,
compile time and memory ratio over models. Models are never ranked against each other. Torch-free."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.display import figure, rounded
from pipeline.measure.objective import SPEEDUP, paired_speedup
from pipeline.status import FINISHED

FASTER, SLOWER, SAME, INCONCLUSIVE, FAILED = "faster", "slower", "no difference", "inconclusive", "failed"
OUTCOMES = (FASTER, SLOWER, SAME, INCONCLUSIVE, FAILED)
# A bootstrap over fewer models (or jobs) has too few values to resample to say how far their mean could be.
MIN_BOOTSTRAP_JOBS = 5


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True, kw_only=True)
class ModelOutcome:
    """One model's compiled job against its paired eager copy."""

    model: str
    run_name: str
    outcome: str
    speedup: float | None = None
    low: float | None = None  # the paired speedup's 95% interval
    high: float | None = None
    failure: str = ""  # the failure's class and message, for `failed`
    compile_s: float | None = None
    memory_ratio: float | None = None  # compiled / eager reserved peak (CUDA)


def failures_line(by_class: dict[str, int]) -> str:
    """`failures by class: 1 compile error, 2 timeout`: a suite's failed models, a sweep's failed jobs."""
    return "failures by class: " + ", ".join(f"{n} {kind}" for kind, n in sorted(by_class.items()))


def classify(
    *, model: str, run_name: str, status: str, metrics: dict[str, float], failure: str, min_effect_pct: float
) -> ModelOutcome:
    """By the paired speedup's 95% interval (objective.paired_speedup): `faster` above 1 + min_effect,
    `slower` below 1 / (1 + min_effect), `no difference` within those bounds, `inconclusive` across
    one; `failed` for a job that did not finish or whose parity failed."""
    common = {
        "model": model,
        "run_name": run_name,
        "compile_s": metrics.get("compile/total_s"),
        "memory_ratio": metrics.get("memory/ratio_vs_eager"),
    }
    if status != FINISHED or metrics.get("parity/ok") == 0.0 or SPEEDUP not in metrics:
        reason = failure or (
            "loss or output parity failed" if metrics.get("parity/ok") == 0.0 else "no speedup"
        )
        return ModelOutcome(outcome=FAILED, failure=reason, **common)
    speedup, low, high = paired_speedup(metrics)
    up, down = 1 + min_effect_pct / 100, 1 / (1 + min_effect_pct / 100)
    if low > up:
        outcome = FASTER
    elif high < down:
        outcome = SLOWER
    elif low >= down and high <= up:
        outcome = SAME
    else:
        outcome = INCONCLUSIVE
    return ModelOutcome(outcome=outcome, speedup=speedup, low=low, high=high, **common)


@dataclass(kw_only=True)
class SuiteAnswer:
    outcomes: list[ModelOutcome]
    counts: dict[str, int] = field(default_factory=dict)  # by outcome
    failures: dict[str, int] = field(default_factory=dict)  # failed models by class
    pass_rate: float | None = None  # models that finished with parity / models
    geomean: float | None = None  # of the paired speedups of passing models
    geomean_ci: tuple[float, float] | None = None  # over >= MIN_BOOTSTRAP_JOBS models
    geomean_note: str = ""  # why there is no interval
    compile_s_median: float | None = None
    memory_ratio_geomean: float | None = None

    def tags(self) -> dict[str, str]:
        """The parent run's tags: a count per outcome (`suite_faster`, ..., `suite_failed`)."""
        tags = {f"suite_{name.replace(' ', '_')}": str(self.counts.get(name, 0)) for name in OUTCOMES}
        tags["suite_models"] = str(len(self.outcomes))
        return tags

    def lines(self) -> list[str]:
        """The answer in words: the counts, then the aggregates."""
        n = len(self.outcomes)
        counts = ", ".join(f"{self.counts.get(name, 0)} {name}" for name in OUTCOMES)
        out = [f"suite: {n} models compiled against their own eager copies: {counts}"]
        if self.failures:
            out.append(failures_line(self.failures))
        if self.pass_rate is not None:
            out.append(f"pass rate: {100 * self.pass_rate:.0f}% ({n - self.counts.get(FAILED, 0)} of {n})")
        if self.geomean is not None:
            shown, ci = figure(self.geomean), f" ({self.geomean_note})"
            if self.geomean_ci:
                shown, low, high = rounded(self.geomean, *self.geomean_ci)
                ci = f" [95% bootstrap over models {low}, {high}]"
            out.append(f"geometric-mean speedup over passing models: {shown}x{ci}")
        if self.compile_s_median is not None:
            out.append(f"compile time, median over models: {figure(self.compile_s_median)} s")
        if self.memory_ratio_geomean is not None:
            out.append(f"peak memory compiled / eager, geometric mean: {figure(self.memory_ratio_geomean)}")
        return out


Bootstrap = Callable[[list[float], list[tuple[float, float]]], tuple[float, float]]


def answer(outcomes: list[ModelOutcome], *, bootstrap: Bootstrap) -> SuiteAnswer:
    """The suite's answer from its models' outcomes; `bootstrap(speedups, intervals)` gives the geometric
    mean's 95% interval over models, each model's own interval carried (pipeline.sweep.summary's)."""
    result = SuiteAnswer(outcomes=sorted(outcomes, key=lambda o: (OUTCOMES.index(o.outcome), o.model)))
    result.counts = dict(Counter(o.outcome for o in outcomes))
    result.failures = dict(Counter(o.failure.split(":", 1)[0] for o in outcomes if o.outcome == FAILED))
    if outcomes:
        result.pass_rate = sum(o.outcome != FAILED for o in outcomes) / len(outcomes)
    passing = [o for o in outcomes if o.outcome != FAILED and o.speedup]
    speedups = [o.speedup for o in passing if o.speedup]
    if speedups:
        result.geomean = geomean(speedups)
        if len(speedups) >= MIN_BOOTSTRAP_JOBS:
            intervals = [(o.low or o.speedup, o.high or o.speedup) for o in passing]
            result.geomean_ci = bootstrap(speedups, intervals)  # type: ignore[arg-type]
        else:
            result.geomean_note = f"no interval over {len(speedups)} models: {MIN_BOOTSTRAP_JOBS} at least"
    compile_s = [o.compile_s for o in outcomes if o.compile_s is not None]
    if compile_s:
        result.compile_s_median = statistics.median(compile_s)
    ratios = [o.memory_ratio for o in outcomes if o.memory_ratio]
    if ratios:
        result.memory_ratio_geomean = geomean(ratios)
    return result
