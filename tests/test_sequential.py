"""Measuring until decided (pipeline/measure/sequential.py): the intervals against scipy's own tests, the
looks' joint coverage under optional stopping, and the stopping rule; and a job that stops early when it is
quiet and measures on when it is not (the real CLI)."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest
from scipy import stats

from pipeline.config.schema import BenchmarkConfig
from pipeline.measure import sequential as seq
from tests.conftest import output, run_cli, runs, store_copy

RULE = seq.StopRule(min_effect_pct=1.0, target_pct=2.5, budget_s=30.0)


def anticorrelated(n: int, rng: random.Random, mean: float = 0.0, sd: float = 0.05) -> list[float]:
    """Independent draws ordered so that neighbours alternate around the mean: their lag-1 autocorrelation
    is negative, so the effective count is n and the intervals are the textbook ones."""
    x = sorted(rng.gauss(mean, sd) for _ in range(n))
    return [x[i // 2] if i % 2 == 0 else x[-1 - i // 2] for i in range(n)]


@pytest.mark.parametrize("n", [6, 9, 14, 25, 40])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_the_signed_rank_critical_count_is_scipys_exact_quantile(n, alpha):
    c = seq.signed_rank_critical(n, alpha)
    cdf = _scipy_signed_rank_cdf(n)  # scipy's exact signed-rank distribution
    if c is None:
        assert cdf[0] > alpha / 2
    else:
        assert cdf[c] <= alpha / 2 < cdf[c + 1]


def _scipy_signed_rank_cdf(n: int) -> list[float]:
    """P(W+ <= w) for w = 0 .. n(n+1)/2 from scipy's exact one-sided wilcoxon p-values: ranks 1..n with the
    signs of a chosen subset negative give W+ = w exactly."""
    total = n * (n + 1) // 2
    out = []
    for w in range(total + 1):
        negative, left = set(), total - w  # the ranks whose sum is total - w carry a minus sign
        for rank in range(n, 0, -1):
            if rank <= left:
                negative.add(rank)
                left -= rank
        x = [(-r if r in negative else r) for r in range(1, n + 1)]
        out.append(stats.wilcoxon(x, alternative="less", method="exact").pvalue if w < total else 1.0)
    return out


def test_the_paired_interval_is_the_inversion_of_scipys_signed_rank_test():
    """Inside the interval the exact two-sided test keeps the shift; just outside it rejects it."""
    rng = random.Random(1)
    x = anticorrelated(20, rng, 0.1)
    found = seq.paired_interval(x, 0.95)
    assert found.method == "signed-rank" and found.low < found.estimate < found.high
    eps = 1e-9

    def p(shift: float) -> float:
        return stats.wilcoxon([v - shift for v in x], method="exact").pvalue

    assert p(found.low + eps) >= 0.05 and p(found.high - eps) >= 0.05
    assert p(found.low - eps) < 0.05 and p(found.high + eps) < 0.05
    assert found.estimate == pytest.approx(
        statistics.median((a + b) / 2 for i, a in enumerate(x) for b in x[i:])
    )


def test_with_too_few_pairs_for_the_level_the_interval_is_students_t_as_scipy_gives_it():
    x = anticorrelated(4, random.Random(2), 0.2)
    found = seq.paired_interval(x, 0.99)
    low, high = stats.t.interval(0.99, len(x) - 1, loc=statistics.fmean(x), scale=stats.sem(x))
    assert found.method == "t"
    assert (found.low, found.high) == pytest.approx((low, high))


def test_autocorrelated_pairs_widen_the_interval_and_keep_its_coverage():
    """AR(1) pair ratios at rho 0.6: the textbook interval (treating them as independent) misses the true
    value far more than 5% of the time; the widened one holds."""
    rng, held, naive_held, trials = random.Random(3), 0, 0, 400
    for _ in range(trials):
        z, x = rng.gauss(0, 1), []
        for _ in range(60):
            z = 0.6 * z + math.sqrt(1 - 0.36) * rng.gauss(0, 1)
            x.append(0.02 * z)
        found = seq.paired_interval(x, 0.95)
        held += found.low <= 0 <= found.high
        c = seq.signed_rank_critical(60, 0.05)
        walsh = sorted((a + b) / 2 for i, a in enumerate(x) for b in x[i:])
        naive_held += walsh[c] <= 0 <= walsh[-1 - c]
    assert held / trials >= 0.93
    assert naive_held / trials < 0.85


def test_looks_are_planned_in_advance_and_each_spends_its_share_of_five_percent():
    looks = seq.Looks.plan(10, 100)
    assert looks.counts == (10, 15, 23, 35, 53, 80, 100)  # the last at the budget's end
    assert 1 - looks.confidence == pytest.approx(0.05 / 7)  # each look's share
    assert seq.Looks.plan(10, 90).counts[-1] == 80  # 90 adds too little to pay for a look
    assert seq.Looks.plan(10, 5).counts == (10,)  # a budget too short for more: the first look alone
    assert seq.Looks.plan(90, 0).confidence == pytest.approx(0.95)


def test_stopping_at_any_look_keeps_every_interval_right_95_percent_of_the_time():
    """A stopping rule that peeks at the worst moment (it stops the first time an interval misses the
    truth) is wrong in at most 5% of trials: the intervals of all looks hold together."""
    rng, wrong, trials = random.Random(4), 0, 1000
    looks = seq.Looks.plan(10, 200)
    for _ in range(trials):
        x = [rng.gauss(0, 0.05) for _ in range(looks.counts[-1])]
        wrong += any(
            not (found.low <= 0 <= found.high)
            for n in looks.counts
            for found in [seq.paired_interval(x[:n], looks.confidence)]
        )
    naive = sum(
        any(
            not (f.low <= 0 <= f.high)
            for n in looks.counts
            for f in [seq.paired_interval([rng.gauss(0, 0.05) for _ in range(n)], 0.95)]
        )
        for _ in range(300)
    )
    assert wrong / trials <= 0.05
    assert naive / 300 > 0.1  # each look at 95%, peeking: false answers well above 5%


@pytest.mark.parametrize(
    "interval, answer",
    [((1.22, 1.25, 1.28), seq.FASTER), ((0.705, 0.72, 0.735), seq.SLOWER), ((0.995, 1.0, 1.005), seq.SAME)],
)
def test_a_precise_answer_stops_at_the_look(interval, answer):
    measuring = seq.Measuring(seq.Looks.plan(10, 100), RULE, paired=True)
    stop = measuring.look(10, 1.0, *interval)
    assert stop is not None and stop.reason == seq.DECIDED and stop.answer == answer and stop.look == 1
    assert "decided" in stop.words() and answer in stop.words()


def test_an_open_or_imprecise_answer_measures_on_until_the_budget():
    measuring = seq.Measuring(seq.Looks.plan(10, 100), RULE, paired=True)
    assert measuring.look(10, 1.0, 0.97, 1.02, 1.08) is None  # straddles 1.01: open
    measuring.advance()
    assert measuring.look(15, 1.5, 1.10, 1.30, 1.60) is None  # faster, but not to +-2.5%
    measuring.advance()
    stop = measuring.look(23, 25.0, 1.10, 1.30, 1.60)  # the next look (35 rounds) would need 38 s of 30
    assert stop is not None and stop.reason == seq.BUDGET and stop.answer == seq.FASTER
    assert "within budget" in stop.words() and stop.confidence == pytest.approx(1 - 0.05 / 7)


def test_the_sweeps_note_tells_a_direction_decided_within_budget_from_an_undecided_one():
    """A job out of budget with its speedup's direction known is less precise, not undecided (its own
    line says `faster but imprecise within budget`); only a paired job without a direction is undecided."""
    from pipeline.sweep.summary import Row, measuring_note

    def stopped(name: str, interval: tuple[float, float, float] | None, said: str) -> Row:
        measuring = seq.Measuring(seq.Looks.plan(10, 10), RULE, paired=interval is not None)
        stop = measuring.look(10, 30.0, *(interval or (9.0, 10.0, 11.5)))
        assert (
            stop is not None
            and stop.reason == seq.BUDGET
            and stop.brief() == f"{said} within budget (30.0 s)"
        )
        speedup = {"speedup/vs_eager": interval[1]} if interval else {}
        return Row(name=name, status="FINISHED", config={}, metrics={**stop.metrics(), **speedup})

    rows = [
        stopped("faster", (1.10, 1.30, 1.60), "faster but imprecise"),
        stopped("open", (0.97, 1.02, 1.08), "undecided"),
        stopped("eager", None, "imprecise"),  # a lone figure: its question is its precision
    ]
    note = measuring_note(rows)
    budget = "ran to their budget (benchmark.budget_s) or a fixed length"
    assert note is not None and "0 of 3 stopped decided" in note
    assert f"2 {budget} less precise than benchmark.target_pct (faster, eager)" in note
    assert f"1 {budget} with their speedup undecided (open)" in note
    old = Row(name="old", status="FINISHED", config={}, metrics={**rows[0].metrics, "measure/answered": 0.0})
    assert "with their speedup undecided (old)" in measuring_note([old])  # type: ignore[operator]


def test_a_lone_figure_stops_once_precise():
    measuring = seq.Measuring(seq.Looks.plan(10, 100), RULE, paired=False)
    assert measuring.look(10, 1.0, 9.0, 10.0, 11.5) is None
    measuring.advance()
    stop = measuring.look(15, 1.5, 9.9, 10.0, 10.2)
    assert stop is not None and stop.reason == seq.PRECISE and stop.answer is None


def test_a_fixed_length_looks_once_at_95_percent():
    rule = seq.StopRule(min_effect_pct=1.0, target_pct=2.5, budget_s=0.0)
    measuring = seq.Measuring(seq.Looks.plan(3, 0), rule, paired=True)
    stop = measuring.look(3, 0.1, 0.5, 1.0, 2.0)
    assert stop is not None and stop.reason == seq.FIXED and stop.confidence == pytest.approx(0.95)


TIMED = [
    "model=custom",
    "model.id=timed",
    "model._target_=tests.timing_models.slow_in_eager",
    "model.input.height=8",
    "model.input.width=8",
    "model.input.num_classes=4",
    "compile.backend=aot_eager",
    "trainer.steps=6",
    "trainer.warmup_steps=2",
    "benchmark.rounds=8",
    "benchmark.budget_s=5",
    "benchmark.target_pct=10",
    "diagnose.flops=false",
]


@pytest.mark.slow  # the default suite's 5 minutes (CI runs it: make test-all)
@pytest.mark.whole_host  # its quiet job is quiet only with no other test beside it
def test_a_quiet_job_decides_sooner_than_a_noisy_one_which_measures_on(tmp_path, empty_store_file):
    """Compiled skips the eager variant's 5 ms of its 15: 1.5x. Quiet, an early look decides it to +-10%
    (the first on an idle host; two or three on CI's: 0.64 s); with stalls of up to 40 ms in a third of
    the units, the job measures on, look after look, for more than twice as long (7 looks, 4.7 s). A host
    whose own speed moved while the quiet job measured (its host check, or its steps' spread) makes that
    job noisy too: the pair is measured once more, as a user would rerun it."""

    def measure(folder: Path) -> tuple[dict[str, float], dict[str, float]]:
        store = store_copy(empty_store_file, folder)
        proc = run_cli(
            [*TIMED, "+model.kwargs.jitter_ms=40", "+model.kwargs.jitter_p=0,0.35"],
            folder,
            store,
            multirun=True,
        )
        assert proc.returncode == 0, output(proc)
        by_p = {
            r.data.params["model.kwargs.jitter_p"]: r.data.metrics
            for r in runs(store)
            if "model.kwargs.jitter_p" in r.data.params
        }
        return by_p["0"], by_p["0.35"]

    def apart(quiet: dict[str, float], noisy: dict[str, float]) -> bool:
        return (
            noisy["measure/looks"] > quiet["measure/looks"]
            and noisy["measure/seconds"] > 2 * quiet["measure/seconds"]
        )

    quiet, noisy = measure(tmp_path / "first")
    limit = BenchmarkConfig().noisy_spread_pct  # what the job's own note calls the host having moved
    host_moved = quiet.get("host/reference_spread_pct", 0.0) > limit or quiet.get("step/noisy") == 1.0
    if not apart(quiet, noisy) and host_moved:
        quiet, noisy = measure(tmp_path / "again")
    assert quiet["measure/decided"] == 1, quiet
    assert quiet["speedup/ci95_low"] > 1.01
    assert noisy["measure/looks"] > quiet["measure/looks"], noisy
    assert noisy["measure/seconds"] > 2 * quiet["measure/seconds"], noisy
