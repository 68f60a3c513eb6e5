"""Measuring until the question is decided (torch-free). A job looks at round counts fixed before its first
round (:class:`Looks`), each look spending 5%/K of the 5% (Bonferroni), so the intervals of all K looks hold
together with 95% wherever it stops (:class:`Measuring`). The paired speedup's interval is built from the
rounds' pair ratios (:func:`paired_interval`); docs/verdicts.md has the reasoning and the tables."""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from functools import cache

from scipy.special import ndtri, stdtrit

from pipeline.measure.stats import median_effective_count, sample_std

ALPHA = 0.05  # the chance, over all looks together, that an interval misses its figure
GROWTH = 1.5  # rounds at a look / rounds at the look before
LAST_LOOK_GAIN = 1.2  # a last look at the budget's end when it holds this many times the rounds before it
OVERRUN = 1.1  # a look is still taken when the rounds' own pace predicts it ends within 10% past the budget
EXACT_UP_TO = 60  # pairs up to which the signed-rank distribution is computed exactly

DECIDED, PRECISE, BUDGET, FIXED = "decided", "precise", "budget", "fixed"
FASTER, SLOWER, SAME = "faster", "slower", "no difference"


@dataclass(frozen=True)
class Looks:
    """Round counts at which a job looks, fixed before its first round; each look spends alpha / K."""

    counts: tuple[int, ...]
    alpha: float = ALPHA

    @classmethod
    def plan(cls, first: int, most: int, growth: float = GROWTH) -> Looks:
        """Looks at `first` rounds, then about `growth` times as many each, and a last one at `most` rounds
        (what the budget holds) when that adds a fifth or more to the look before. At least one look."""
        counts = [max(1, first)]
        while math.ceil(counts[-1] * growth) <= most:
            counts.append(max(counts[-1] + 1, math.ceil(counts[-1] * growth)))
        if most >= counts[-1] * LAST_LOOK_GAIN:
            counts.append(most)
        return cls(tuple(counts))

    @property
    def confidence(self) -> float:
        """Each look's interval holds with this probability; all of them together with 1 - alpha."""
        return 1 - self.alpha / len(self.counts)


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval, on the scale it was computed on (logs for ratios)."""

    estimate: float
    low: float
    high: float
    method: str  # "signed-rank" or "t"


@cache
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the 2^n sign patterns give each signed-rank sum W+ = 0 .. n(n+1)/2."""
    counts = [1]
    for rank in range(1, n + 1):  # each pattern with this rank's sign -, and each shifted by it with +
        pad = [0] * rank
        counts = [a + b for a, b in zip(counts + pad, pad + counts, strict=True)]
    return tuple(counts)


def signed_rank_critical(n: int, alpha: float) -> int | None:
    """The largest c with P(W+ <= c) <= alpha / 2 under the null (W+ symmetric), or None when even
    c = 0 is too likely: n pairs cannot give a two-sided interval at this level."""
    if n <= EXACT_UP_TO:  # the sums whose cumulative probability is within alpha / 2, less one
        total = 2.0**n
        c = sum(1 for below in itertools.accumulate(_signed_rank_counts(n)) if below / total <= alpha / 2) - 1
    else:
        mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        c = math.floor(mean - ndtri(1 - alpha / 2) * sd - 0.5)
    return c if c >= 0 else None


def paired_interval(log_ratios: list[float], confidence: float) -> Interval:
    """The pair log-ratios' Hodges-Lehmann estimate with Wilcoxon's signed-rank interval (the Walsh
    averages' order statistics), widened for the pairs' autocorrelation: the critical count moves from
    the middle by sqrt(n / n_eff) as the rank statistic's spread does. Too few pairs for the level:
    Student's t interval of the mean, over the pairs' effective number (autocorrelation)."""
    n = len(log_ratios)
    if n < 2:
        return Interval(log_ratios[0], -math.inf, math.inf, "t")
    n_eff = min(float(n), median_effective_count(log_ratios))
    c = signed_rank_critical(n, 1 - confidence)
    walsh = sorted((a + b) / 2 for a, b in itertools.combinations_with_replacement(log_ratios, 2))
    middle = len(walsh) / 2
    if c is not None:
        c = math.floor(middle - (middle - c) * math.sqrt(n / n_eff))
    if c is not None and c >= 0:
        return Interval(statistics.median(walsh), walsh[c], walsh[len(walsh) - 1 - c], "signed-rank")
    mean, spread = statistics.fmean(log_ratios), sample_std(log_ratios)
    half = stdtrit(max(1.0, n_eff - 1), 0.5 + confidence / 2) * spread / math.sqrt(n_eff)
    return Interval(mean, mean - half, mean + half, "t")


def speedup_interval(log_ratios: list[float], confidence: float) -> tuple[float, float, float]:
    """(low, estimate, high) of the paired speedup, on the ratio scale (paired_interval's)."""
    found = paired_interval(log_ratios, confidence)
    return math.exp(found.low), math.exp(found.estimate), math.exp(found.high)


@dataclass(frozen=True, kw_only=True)
class Stop:
    """Why and when a job stopped measuring."""

    reason: str  # DECIDED, PRECISE, BUDGET (out of budget first) or FIXED (benchmark.budget_s=0)
    answer: str | None  # paired: FASTER, SLOWER or SAME once decided; None otherwise
    rounds: int  # rounds per variant at the stopping look
    look: int  # which look (1-based) of `looks`
    looks: int  # looks planned
    seconds: float  # time spent in timed rounds up to the stop (warm-up and compilation not counted)
    confidence: float  # each reported interval's level (all looks together: 95%)
    paired: bool = True  # the question was the paired speedup's; else the lone figure's precision

    def metrics(self) -> dict[str, float]:
        answered = {"measure/answered": float(self.answer is not None)} if self.paired else {}
        return {
            "measure/seconds": self.seconds,
            "measure/rounds": float(self.rounds),
            "measure/looks": float(self.look),
            "measure/decided": float(self.reason in (DECIDED, PRECISE)),
            **answered,
            "measure/interval_level_pct": 100 * self.confidence,
        }

    def brief(self) -> str:
        """The same for a job's last line: `decided in 3.2 s`, `faster but imprecise within budget (30.1 s)`,
        `undecided within budget (30.1 s)`, a lone figure's `imprecise within budget (30.1 s)`; empty for a
        fixed length."""
        if self.reason in (DECIDED, PRECISE):
            return f"{self.reason} in {self.seconds:.1f} s"
        if self.reason == FIXED:
            return ""
        if not self.paired or self.answer:  # a lone figure's question is its precision
            answer = f"{self.answer} but " if self.answer else ""
            return f"{answer}imprecise within budget ({self.seconds:.1f} s)"
        return f"undecided within budget ({self.seconds:.1f} s)"

    def words(self) -> str:
        """How long it measured and why it stopped, in a few words."""
        took = f"{self.seconds:.1f} s, {self.rounds} rounds"
        if self.reason == DECIDED:
            return f"measured {took}: decided ({self.answer}) at look {self.look} of {self.looks}"
        if self.reason == PRECISE:
            return f"measured {took}: precise enough at look {self.look} of {self.looks}"
        if not self.paired:
            answered = "its interval wider than benchmark.target_pct"
        elif self.answer:
            answered = f"{self.answer}, less precisely than benchmark.target_pct"
        else:
            answered = "undecided"
        if self.reason == FIXED:
            return f"measured {took} (a fixed length: benchmark.budget_s=0): {answered}"
        return f"measured {took}: {answered} within budget (benchmark.budget_s)"


@dataclass(frozen=True, kw_only=True)
class StopRule:
    """The question a job's measurement answers, and how long it may take."""

    min_effect_pct: float  # sweep.min_effect_pct: a smaller speedup is no difference
    target_pct: float  # benchmark.target_pct: an interval's half-width that is precise enough
    budget_s: float  # benchmark.budget_s: seconds of timed rounds at most (0: one look, a fixed length)

    def answer(self, low: float, high: float) -> str | None:
        """A speedup interval's answer, if it has one (on the ratio scale)."""
        effect = math.log1p(self.min_effect_pct / 100)
        lo, hi = (math.log(x) if x > 0 else -math.inf for x in (low, high))
        if lo > effect:
            return FASTER
        if hi < -effect:
            return SLOWER
        if -effect < lo and hi < effect:
            return SAME
        return None

    def precise(self, low: float, estimate: float, high: float) -> bool:
        """Whether an interval's half-width is within the target, in % of its figure (log scale for
        ratios and times alike: the worse side)."""
        if not (low > 0 and math.isfinite(high) and estimate > 0):
            return False
        half = max(math.log(high / estimate), math.log(estimate / low))
        return half <= math.log1p(self.target_pct / 100)


class Measuring:
    """The stopping rule in motion: told the rounds done and the time they took, it says when to look and,
    at a look, whether to stop; `advance` moves on to the next look."""

    def __init__(self, looks: Looks, rule: StopRule, *, paired: bool):
        self.looks, self.rule, self.paired = looks, rule, paired
        self.index = 0  # the next look

    @property
    def next_count(self) -> int:
        return self.looks.counts[self.index]

    def due(self, rounds: int) -> bool:
        return rounds >= self.next_count

    def advance(self) -> None:
        self.index += 1

    def look(self, rounds: int, seconds: float, low: float, estimate: float, high: float) -> Stop | None:
        """At a due look: why to stop, or None to go on. `low, estimate, high`: the paired speedup
        (paired) or the figure, at this look's level."""
        answer = self.rule.answer(low, high) if self.paired else None
        precise = self.rule.precise(low, estimate, high)
        last = self.index == len(self.looks.counts) - 1
        if not last and self.rule.budget_s > 0:
            ahead = seconds / max(rounds, 1) * (self.looks.counts[self.index + 1] - rounds)  # at its own pace
            last = seconds + ahead > self.rule.budget_s * OVERRUN
        if precise and (answer is not None or not self.paired):
            reason = DECIDED if self.paired else PRECISE
        elif last:
            reason = FIXED if self.rule.budget_s <= 0 else BUDGET
        else:
            return None
        return Stop(
            reason=reason,
            answer=answer,
            rounds=rounds,
            look=self.index + 1,
            looks=len(self.looks.counts),
            seconds=seconds,
            confidence=self.looks.confidence,
            paired=self.paired,
        )
