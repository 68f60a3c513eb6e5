"""The sweep's verdict: which configuration is fastest, or that the data cannot say. Torch-free.

The rule (docs/verdicts.md says why it is sound):

* Each configuration is an :class:`Estimate`: its objective (median step time, or throughput when
  batch sizes or sequence lengths differ) with a 95% interval that accounts for autocorrelated steps
  (counting the effective number of autocorrelated steps, pipeline/measure/stats.py), pooled over repeats.
* Two configurations are compared on the log scale: one is faster when the difference exceeds 1.96
  standard errors of the difference *and* the smallest effect worth acting on
  (`sweep.min_effect_pct`, 1%). A compiled configuration and the eager configuration it was
  paired with are compared on the paired speedup instead (measured in one worker, in alternating
  rounds, so drift between the two jobs cannot fake a difference), and two compiled configurations of
  one base configuration on their paired speedups.
* A noisy job (`step/noisy`) never decides a comparison by its step times; an interval wider than
  `sweep.max_interval_pct` (half-width, % of the figure) does not either: separate jobs' intervals
  hold their step-to-step noise, not the drift between jobs, which only precise figures bound.
  Paired figures (one worker, alternating rounds) decide on their own intervals.
* A single job with fewer than `MIN_STEPS` measured steps never decides by its step times: the scale of
  a handful of steps is itself unknown (the MAD of three steps is near zero when two nearly agree), and such
  intervals cover the true median far less than 95% of the time (docs/verdicts.md has the table).
* `fastest`: one configuration is faster than every other. Otherwise the configurations no one beats
  are reported: `tie` when every comparison among them was precise enough to say they are within the
  smallest effect of each other, `inconclusive` (rerun advised) when noise or wide intervals stopped a
  comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Z95 = 1.96
WAYS = {
    "intervals": "step-time intervals",
    "paired speedup": "the paired eager baseline",
    "paired speedups": "paired speedups",
}
FASTEST, TIE, INCONCLUSIVE = "fastest", "tie", "inconclusive"
# Measured steps a single job needs before its interval decides. On synthetic AR(1) steps (rho 0-0.8),
# identical pairs were called fastest in 3.9-7.5% of trials at 3 steps, 1.4-2.5% at 10
# (python benchmarks/verdict_power.py --steps).
MIN_STEPS = 10
# Why a comparison stayed undecided, as the verdict says it (the first that applies; {min_steps}: the rule's).
UNDECIDED = {
    "noisy": "noisy jobs",
    "few steps": "fewer than {min_steps} measured steps in a job",
    "wide": "intervals too wide",
}


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """One configuration's figure for the objective, with its 95% interval."""

    name: str
    value: float
    low: float
    high: float
    noisy: bool = False
    # The paired eager baseline: the separate eager configuration's name and the speedup interval over it.
    eager_name: str | None = None
    speedup: tuple[float, float, float] | None = None  # (speedup, low, high)
    base: str | None = None  # the configuration without its compile settings (shared with its eager copy)
    steps: int | None = None  # a single job's measured steps (None: repeats pooled, between-job interval)

    @property
    def half_pct(self) -> float:
        """Half-width of the interval, in percent of the figure."""
        return 100 * (self.high - self.low) / 2 / self.value

    @property
    def log_se(self) -> float:
        """Standard error of log(value), from the 95% interval."""
        return (math.log(self.high) - math.log(self.low)) / (2 * Z95)


@dataclass(frozen=True, kw_only=True)
class Rule:
    min_effect_pct: float = 1.0  # a smaller difference is a tie even when it is real
    min_steps: int = MIN_STEPS  # a single job with fewer measured steps cannot decide
    max_interval_pct: float = 2.5  # a wider interval (half-width) cannot decide
    higher_is_better: bool = False  # step time: lower is better; throughput: higher


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Between two configurations: the better one's name, or None with the reason it is undecided."""

    better: str | None
    reason: str  # how it was decided ("paired speedup", "intervals") or why not (UNDECIDED's keys, "tie")


@dataclass(kw_only=True)
class Verdict:
    kind: str  # fastest, tie or inconclusive
    objective: str  # what was ranked, e.g. "median step time (ms, lower is better)"
    fastest: str | None = None
    tied: list[str] = field(default_factory=list)  # the configurations no one beats, when not `fastest`
    reason: str = ""

    def line(self) -> str:
        """The verdict in one line, as the terminal, summary.md and the parent's description say it."""
        if self.kind == FASTEST:
            return f"verdict: fastest: {self.fastest} ({self.reason}; objective: {self.objective})"
        names = ", ".join(self.tied)
        if not self.tied:
            return f"verdict: inconclusive ({self.reason}; objective: {self.objective})"
        if self.kind == TIE:
            return f"verdict: tie between {names} ({self.reason}; objective: {self.objective})"
        return f"verdict: inconclusive among {names} ({self.reason}; rerun with more steps, repeats or on a quiet machine; objective: {self.objective})"


def compare(a: Estimate, b: Estimate, rule: Rule) -> Comparison:
    """Which of two configurations is better, if the data can say."""
    if a.eager_name == b.name and a.speedup is not None:
        return _paired(a, b, rule)
    if b.eager_name == a.name and b.speedup is not None:
        return _paired(b, a, rule)
    if a.speedup is not None and b.speedup is not None and a.base is not None and a.base == b.base:
        return _by_speedups(a, b, rule)
    if a.noisy or b.noisy:
        return Comparison(better=None, reason="noisy")
    if any(e.steps is not None and e.steps < rule.min_steps for e in (a, b)):
        return Comparison(better=None, reason="few steps")
    diff = math.log(b.value) - math.log(a.value)  # > 0: a is lower
    if rule.higher_is_better:
        diff = -diff
    se = math.hypot(a.log_se, b.log_se)
    # Two jobs' intervals hold each job's step-to-step noise, not the drift between the jobs (another
    # moment, another process): a wide interval never decides, precise ones bound that drift.
    wide = max(a.half_pct, b.half_pct) > rule.max_interval_pct
    if not wide and abs(diff) > Z95 * se and abs(diff) > math.log1p(rule.min_effect_pct / 100):
        return Comparison(better=a.name if diff > 0 else b.name, reason="intervals")
    return Comparison(better=None, reason="wide" if wide else "tie")


def _paired(compiled: Estimate, eager: Estimate, rule: Rule) -> Comparison:
    """A compiled configuration against its own paired eager baseline: the speedup's interval decides."""
    assert compiled.speedup is not None
    speedup, low, high = compiled.speedup
    effect = math.log1p(rule.min_effect_pct / 100)
    if low > 1 and math.log(speedup) > effect:
        return Comparison(better=compiled.name, reason="paired speedup")
    if high < 1 and -math.log(speedup) > effect:
        return Comparison(better=eager.name, reason="paired speedup")
    wide = 100 * (high - low) / 2 / speedup > rule.max_interval_pct
    return Comparison(better=None, reason="wide" if wide else "tie")


def _by_speedups(a: Estimate, b: Estimate, rule: Rule) -> Comparison:
    """Two compiled configurations of one base configuration: each was timed against its own eager copy in
    alternating rounds, so their speedups compare them free of drift between the two jobs (noisy or not)."""
    assert a.speedup is not None and b.speedup is not None
    se = [(math.log(s[2]) - math.log(s[1])) / (2 * Z95) for s in (a.speedup, b.speedup)]
    diff = math.log(a.speedup[0]) - math.log(b.speedup[0])  # > 0: a is faster
    if abs(diff) > Z95 * math.hypot(*se) and abs(diff) > math.log1p(rule.min_effect_pct / 100):
        return Comparison(better=a.name if diff > 0 else b.name, reason="paired speedups")
    wide = max(100 * (s[2] - s[1]) / 2 / s[0] for s in (a.speedup, b.speedup)) > rule.max_interval_pct
    return Comparison(better=None, reason="wide" if wide else "tie")


def decide(estimates: list[Estimate], rule: Rule, objective: str) -> Verdict:
    """The verdict over the passing configurations (see the module's docstring)."""
    if len(estimates) < 2:
        names = [e.name for e in estimates]
        return Verdict(
            kind=INCONCLUSIVE, objective=objective, tied=names, reason="fewer than two passing configurations"
        )
    results = {
        (a.name, b.name): compare(a, b, rule) for i, a in enumerate(estimates) for b in estimates[i + 1 :]
    }
    beaten = {y if c.better == x else x for (x, y), c in results.items() if c.better}
    unbeaten = [e.name for e in estimates if e.name not in beaten]
    if len(unbeaten) == 1 and _beats_all(unbeaten[0], estimates, results):
        ways = sorted({WAYS[c.reason] for pair, c in results.items() if unbeaten[0] in pair})
        return Verdict(
            kind=FASTEST,
            objective=objective,
            fastest=unbeaten[0],
            reason="separated by " + " and ".join(ways),
        )
    contenders = unbeaten or [e.name for e in estimates]
    undecided = [
        c.reason for (x, y), c in results.items() if c.better is None and x in contenders and y in contenders
    ]
    if not unbeaten:
        return Verdict(
            kind=INCONCLUSIVE,
            objective=objective,
            tied=contenders,
            reason="the comparisons contradict each other",
        )
    if any(reason in UNDECIDED for reason in undecided):
        why = next(text for reason, text in UNDECIDED.items() if reason in undecided)
        why = why.format(min_steps=rule.min_steps)
        return Verdict(
            kind=INCONCLUSIVE,
            objective=objective,
            tied=contenders,
            reason=f"{why}: they cannot be told apart",
        )
    return Verdict(
        kind=TIE,
        objective=objective,
        tied=contenders,
        reason=f"within {rule.min_effect_pct:g}% of each other or not separated by their intervals",
    )


def _beats_all(name: str, estimates: list[Estimate], results: dict[tuple[str, str], Comparison]) -> bool:
    for e in estimates:
        if e.name == name:
            continue
        c = results.get((name, e.name)) or results[(e.name, name)]
        if c.better != name:
            return False
    return True
