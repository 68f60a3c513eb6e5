"""The sweep's verdict: which configuration is fastest (it beats every other on the log scale by more
than the intervals, the host's noise allowance and `sweep.min_effect_pct`), a tie, or inconclusive.
Paired speedups decide where they exist; severe interference and too few steps stop separate jobs'
figures from deciding. docs/verdicts.md gives the rule and why it is sound. Torch-free."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

Z95 = 1.96
WAYS = {
    "intervals": "step-time intervals",
    "paired speedup": "the paired eager baseline",
    "paired speedups": "paired speedups",
}
FASTEST, TIE, INCONCLUSIVE = "fastest", "tie", "inconclusive"
# Measured steps a single job needs before its interval decides: with fewer, identical pairs are called
# fastest far more often than the interval's 5% (python benchmarks/verdict_power.py --steps).
MIN_STEPS = 10
# p90 / p10 beyond this: the host ran in spells of very different speed, and another job may have spent
# all its steps in one slow spell looking steady (docs/verdicts.md).
SEVERE_SLOWDOWN = 3.0
# Why a comparison stayed undecided, as the verdict says it (the first that applies).
UNDECIDED = {
    "severe": "the host interfered severely ({what}): a whole job can run in a slow spell, so separate jobs' "
    "step times cannot be compared; paired speedups can",
    "few steps": "fewer than {min_steps} measured steps in a job",
    "noisy": "noisy jobs, jobs that waited for a CPU or shared their CPUs with busy processes: the host may "
    "have slowed them that far",
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
    # The best the figure may be once the host's slowing is allowed for (summary.reach); None: unbounded
    # for a noisy figure, none for a quiet one.
    reach: float | None = None
    slowdown: float | None = None  # the largest p90 / p10 of the configuration's jobs' steps
    slowdown_job: str | None = None  # the job it belongs to
    contended_job: str | None = None  # a job whose threads waited for CPUs others held (step/cpu_contended)
    contended_wait_pct: float | None = None  # its threads' share of wanted CPU time spent waiting
    # The paired eager baseline: the separate eager configuration's name and the speedup interval over it.
    eager_name: str | None = None
    speedup: tuple[float, float, float] | None = None  # (speedup, low, high)
    base: str | None = None  # the configuration without its compile settings (shared with its eager copy)
    steps: int | None = None  # a single job's measured steps (None: repeats pooled, between-job interval)

    @property
    def log_se(self) -> float:
        """Standard error of log(value), from the 95% interval."""
        return (_ln(self.high) - _ln(self.low)) / (2 * Z95)


@dataclass(frozen=True, kw_only=True)
class Rule:
    min_effect_pct: float = 1.0  # a smaller difference is a tie even when it is real
    min_steps: int = MIN_STEPS  # a single job with fewer measured steps cannot decide
    severe_slowdown: float = SEVERE_SLOWDOWN  # a job slowed more (p90 / p10): separate jobs cannot decide
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
        return f"verdict: inconclusive among {names} ({self.reason}; rerun with a larger benchmark.budget_s, repeats or on a quiet machine; objective: {self.objective})"


def _ln(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _bounds(e: Estimate, higher_is_better: bool) -> tuple[float, float, float, float]:
    """(figure, best end, worst end, noise allowance beyond the best end) on the log scale of cost: lower is
    better whatever the objective."""
    sign = -1.0 if higher_is_better else 1.0
    best, worst = (e.high, e.low) if higher_is_better else (e.low, e.high)
    center, best_c, worst_c = sign * _ln(e.value), sign * _ln(best), sign * _ln(worst)
    if e.reach is None:  # a noisy figure whose reach is unknown may be anything better
        return center, best_c, worst_c, math.inf if e.noisy else 0.0
    reach = sign * _ln(e.reach)
    return center, best_c, worst_c, best_c - reach if reach < best_c else 0.0


def compare(a: Estimate, b: Estimate, rule: Rule, *, severe: bool = False) -> Comparison:
    """Which of two configurations is better, if the data can say; `severe`: the sweep's host interfered
    severely (see the module's docstring), so only paired figures decide."""
    if a.eager_name == b.name and a.speedup is not None:
        return _paired(a, b, rule)
    if b.eager_name == a.name and b.speedup is not None:
        return _paired(b, a, rule)
    if a.speedup is not None and b.speedup is not None and a.base is not None and a.base == b.base:
        return _by_speedups(a, b, rule)
    if severe:
        return Comparison(better=None, reason="severe")
    if any(e.steps is not None and e.steps < rule.min_steps for e in (a, b)):
        return Comparison(better=None, reason="few steps")
    effect = math.log1p(rule.min_effect_pct / 100)
    ca, best_a, worst_a, allow_a = _bounds(a, rule.higher_is_better)
    cb, best_b, worst_b, allow_b = _bounds(b, rule.higher_is_better)
    gap = cb - ca  # > 0: a is better
    a_apart = gap > effect and gap > math.hypot(worst_a - ca, cb - best_b)  # a's worse side, b's better
    b_apart = -gap > effect and -gap > math.hypot(worst_b - cb, ca - best_a)
    if a_apart and gap > math.hypot(worst_a - ca, cb - best_b) + allow_b:
        return Comparison(better=a.name, reason="intervals")
    if b_apart and -gap > math.hypot(worst_b - cb, ca - best_a) + allow_a:
        return Comparison(better=b.name, reason="intervals")
    spread = math.hypot(max(worst_a - ca, ca - best_a), max(worst_b - cb, cb - best_b))
    if abs(gap) + spread + allow_a + allow_b < effect:
        return Comparison(better=None, reason="tie")
    # Apart on their intervals, not once the host's slowing is allowed for: the noise left it open.
    return Comparison(better=None, reason="noisy" if a_apart or b_apart else "wide")


def _paired(compiled: Estimate, eager: Estimate, rule: Rule) -> Comparison:
    """A compiled configuration against its own paired eager baseline: the speedup's interval decides."""
    assert compiled.speedup is not None
    speedup, low, high = compiled.speedup
    effect = math.log1p(rule.min_effect_pct / 100)
    if low > 1 and math.log(speedup) > effect:
        return Comparison(better=compiled.name, reason="paired speedup")
    if high < 1 and -math.log(speedup) > effect:
        return Comparison(better=eager.name, reason="paired speedup")
    inside = -effect < _ln(low) and _ln(high) < effect
    return Comparison(better=None, reason="tie" if inside else "wide")


def _by_speedups(a: Estimate, b: Estimate, rule: Rule) -> Comparison:
    """Two compiled configurations of one base configuration: each was timed against its own eager copy in
    alternating rounds, so their speedups compare them free of drift between the two jobs (noisy or not)."""
    assert a.speedup is not None and b.speedup is not None
    (sa, la, ha), (sb, lb, hb) = a.speedup, b.speedup
    effect = math.log1p(rule.min_effect_pct / 100)
    diff = _ln(sa) - _ln(sb)  # > 0: a is faster
    if diff > math.hypot(_ln(sa) - _ln(la), _ln(hb) - _ln(sb)) and diff > effect:
        return Comparison(better=a.name, reason="paired speedups")
    if -diff > math.hypot(_ln(ha) - _ln(sa), _ln(sb) - _ln(lb)) and -diff > effect:
        return Comparison(better=b.name, reason="paired speedups")
    spread = math.hypot(*(max(_ln(h) - _ln(s), _ln(s) - _ln(lo)) for s, lo, h in (a.speedup, b.speedup)))
    return Comparison(better=None, reason="tie" if abs(diff) + spread < effect else "wide")


def severe_job(estimates: list[Estimate], rule: Rule) -> Estimate | None:
    """The configuration the host slowed most beyond the severe limit, else one with a contended job."""
    severe = [e for e in estimates if e.slowdown is not None and e.slowdown > rule.severe_slowdown]
    if severe:
        return max(severe, key=lambda e: e.slowdown or 0.0)
    return next((e for e in estimates if e.contended_job is not None), None)


def severe_what(e: Estimate, rule: Rule) -> str:
    """What made `e` (severe_job's answer) severe, in words."""
    if e.slowdown is not None and e.slowdown > rule.severe_slowdown:
        return (
            f"{e.slowdown_job or e.name}'s slowest tenth of steps took {e.slowdown:.1f}x as long as its fastest "
            f"tenth, beyond {rule.severe_slowdown:g}x"
        )
    return (
        f"{e.contended_job}'s compute threads waited for a CPU {e.contended_wait_pct or 0:.0f}% of the time they "
        "wanted one while other processes held the cores"
    )


def decide(estimates: list[Estimate], rule: Rule, objective: str) -> Verdict:
    """The verdict over the passing configurations (see the module's docstring)."""
    verdict = partial(Verdict, objective=objective)
    if len(estimates) < 2:
        names = [e.name for e in estimates]
        return verdict(kind=INCONCLUSIVE, tied=names, reason="fewer than two passing configurations")
    severe = severe_job(estimates, rule)
    results = {
        (a.name, b.name): compare(a, b, rule, severe=severe is not None)
        for i, a in enumerate(estimates)
        for b in estimates[i + 1 :]
    }
    beaten = {y if c.better == x else x for (x, y), c in results.items() if c.better}
    unbeaten = [e.name for e in estimates if e.name not in beaten]
    own = [c for pair, c in results.items() if len(unbeaten) == 1 and unbeaten[0] in pair]
    if own and all(c.better == unbeaten[0] for c in own):  # the one unbeaten beats every other
        ways = sorted({WAYS[c.reason] for c in own})
        return verdict(kind=FASTEST, fastest=unbeaten[0], reason="separated by " + " and ".join(ways))
    contenders = unbeaten or [e.name for e in estimates]
    undecided = [
        c.reason for (x, y), c in results.items() if c.better is None and x in contenders and y in contenders
    ]
    if not unbeaten:
        return verdict(kind=INCONCLUSIVE, tied=contenders, reason="the comparisons contradict each other")
    if any(reason in UNDECIDED for reason in undecided):
        why = next(text for reason, text in UNDECIDED.items() if reason in undecided)
        why = why.format(min_steps=rule.min_steps, what=severe_what(severe, rule) if severe else "")
        reason = why if "severe" in undecided else f"{why}: they cannot be told apart"
        return verdict(kind=INCONCLUSIVE, tied=contenders, reason=reason)
    reason = f"within {rule.min_effect_pct:g}% of each other, measured precisely enough to say so"
    return verdict(kind=TIE, tied=contenders, reason=reason)
