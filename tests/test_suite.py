"""A suite's answer per model (pipeline/sweep/suite.py): each compiled job against its own eager copy,
counted by outcome, with the aggregates seed 001 reports; never a cross-model ranking."""

from __future__ import annotations

import math
import statistics

import pytest

from pipeline.sweep.suite import FAILED, FASTER, INCONCLUSIVE, SAME, SLOWER, answer, classify


def outcome(model: str, speedup: float, low: float, high: float, **extra):
    metrics = {"speedup/vs_eager": speedup, "speedup/ci95_low": low, "speedup/ci95_high": high, **extra}
    return classify(
        model=model, run_name=model, status="FINISHED", metrics=metrics, failure="", min_effect_pct=1.0
    )


def test_each_model_is_classed_by_its_paired_speedups_interval():
    assert outcome("a", 2.90, 2.76, 3.05).outcome == FASTER
    assert outcome("b", 0.90, 0.84, 0.95).outcome == SLOWER
    assert outcome("c", 1.00, 0.995, 1.005).outcome == SAME
    assert outcome("d", 1.18, 0.28, 5.01).outcome == INCONCLUSIVE  # resnet50's drifting H100 job
    assert outcome("e", 1.5, 1.4, 1.6, **{"parity/ok": 0.0}).outcome == FAILED
    crashed = classify(
        model="f", run_name="f", status="FAILED", metrics={}, failure="compile error: x", min_effect_pct=1.0
    )
    assert crashed.outcome == FAILED and crashed.failure.startswith("compile error")


def test_the_aggregates_count_outcomes_and_show_an_interval_only_over_five_models():
    def boot(values: list[float], intervals: list[tuple[float, float]]) -> tuple[float, float]:
        assert len(intervals) == len(values)  # each model's own interval goes along
        return min(values), max(values)

    few = answer([outcome("a", 2.0, 1.9, 2.1), outcome("b", 0.5, 0.45, 0.55)], bootstrap=boot)
    assert few.counts == {FASTER: 1, SLOWER: 1} and few.geomean == pytest.approx(1.0)
    assert few.geomean_ci is None and "5 at least" in few.geomean_note
    assert few.tags()["suite_faster"] == "1" and few.tags()["suite_failed"] == "0"
    many = answer([outcome(m, 1.5, 1.4, 1.6, **{"compile/total_s": 10.0}) for m in "abcde"], bootstrap=boot)
    assert many.geomean_ci == (1.5, 1.5) and many.pass_rate == 1.0 and many.compile_s_median == 10.0
    assert any(line.startswith("suite: 5 models") for line in many.lines())


def test_the_geometric_means_over_models_are_taken_on_the_log_scale():
    """The geometric mean of the speedups and of the memory ratios, as the answer's lines print them."""
    speedups, ratios = (1.1, 1.3, 0.93), (0.8, 1.2, 0.7)
    result = answer(
        [
            outcome(m, s, s * 0.99, s * 1.01, **{"memory/ratio_vs_eager": r})
            for m, s, r in zip("abc", speedups, ratios, strict=True)
        ],
        bootstrap=lambda values, intervals: (0.0, 0.0),
    )
    assert result.geomean == pytest.approx(math.exp(statistics.fmean(map(math.log, speedups))), rel=1e-12)
    assert result.memory_ratio_geomean == pytest.approx(math.prod(ratios) ** (1 / 3), rel=1e-12)
    assert "geometric-mean speedup over passing models: 1.1x (no interval over 3 models: 5 at least)" in (
        result.lines()
    )
    assert "peak memory compiled / eager, geometric mean: 0.876" in result.lines()
