"""The measurement module: statistics, clocks, rounds, compile excess, loss parity."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline import measure


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_percentile_matches_numpy(q):
    values = sorted(random.Random(1).uniform(1, 100) for _ in range(37))
    assert measure.percentile(values, q) == pytest.approx(float(np.percentile(values, 100 * q)))


def test_summarize_against_numpy():
    values = [random.Random(2).gauss(50, 3) for _ in range(90)]
    s = measure.summarize(values)
    assert s["step_time_ms_p50"] == pytest.approx(float(np.median(values)))
    assert s["step_time_ms_mean"] == pytest.approx(float(np.mean(values)))
    assert s["step_time_ms_std"] == pytest.approx(float(np.std(values, ddof=1)))
    assert s["step_time_ms_min"] == min(values) and s["step_time_ms_max"] == max(values)
    assert s["step_time_ms_p50_ci95_low"] <= s["step_time_ms_p50"] <= s["step_time_ms_p50_ci95_high"]


@pytest.mark.parametrize("n", [8, 20, 50, 90, 200])
def test_median_ci_has_at_least_95_percent_coverage(n):
    """Exact coverage of the order-statistic interval, from the binomial distribution."""
    ranks = list(range(n))
    low, high = measure.median_ci95(ranks)  # values equal their 0-based ranks
    coverage = sum(math.comb(n, k) for k in range(low + 1, high + 1)) / 2**n
    assert coverage >= 0.95
    assert high - low < n - 1 or n < 10  # not the trivial [min, max] once n is large enough


def test_step_clock_on_cpu_measures_wall_time():
    clock = measure.StepClock(torch.device("cpu"), 3)
    clock.mark()
    for delay in (0.01, 0.02, 0.03):
        time.sleep(delay)
        clock.mark()
    times = clock.durations_ms()
    assert len(times) == 3
    for got, want in zip(times, (10, 20, 30), strict=True):
        assert want <= got < want + 15


@pytest.mark.parametrize(
    "total, rounds, expected", [(90, 3, [30, 30, 30]), (10, 3, [4, 3, 3]), (2, 3, [1, 1]), (5, 1, [5])]
)
def test_split_rounds(total, rounds, expected):
    assert measure.split_rounds(total, rounds) == expected


def test_compile_excess_counts_only_time_above_steady_state():
    assert measure.compile_excess_s([12.0, 0.1, 0.05], steady_ms=100) == pytest.approx(11.9)


def test_loss_parity_is_judged_on_the_first_steps():
    eager = [7.0, 6.9, 6.8, 6.0, 5.0, 4.0]
    close = [7.0, 6.91, 6.79, 9.0, 1.0, 0.5]  # same start, chaotic later
    out = measure.loss_divergence(close, eager, rtol=0.05, parity_steps=3)
    assert out["loss_parity"] == 1.0 and out["loss_divergence_max_rel"] == pytest.approx(0.01 / 6.8)
    assert out["loss_divergence_onset_step"] == 3  # reported where the curves part, not judged
    assert (
        measure.loss_divergence(eager, eager, rtol=0.05, parity_steps=3)["loss_divergence_onset_step"] == -1
    )
    broken = [7.0, 8.0, 9.0, 9.0, 9.0, 9.0]
    assert measure.loss_divergence(broken, eager, rtol=0.05, parity_steps=3)["loss_parity"] == 0.0
    assert measure.loss_divergence([float("nan")] * 6, eager, rtol=0.05, parity_steps=3)["loss_parity"] == 0.0


def test_every_logged_metric_has_a_unit_in_its_name_or_registry():
    for name, (unit, meaning) in measure.METRICS.items():
        assert unit and meaning, name
        if name.endswith("_gib"):
            assert unit == "GiB", name
        elif name.endswith("_ms") or "_ms_" in name:
            assert unit == "ms", name
        elif name.endswith("_s") and not name.endswith("_per_s"):
            assert unit == "s", name


def test_environment_never_copies_the_process_environment(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "secret-value-123")
    env = measure.environment(torch.device("cpu"))
    assert "secret-value-123" not in repr(env)
    assert {"torch", "python", "hostname", "git_commit"} <= set(env)


def test_device_batches_are_the_same_for_the_same_seed_and_follow_the_spec():
    from pipeline.data import DeviceBatches

    spec = {
        "kind": "tokens",
        "vocab_size": 100,
        "seq_len": 8,
        "target": "masked_token",
        "num_classes": 2,
        "channels": 3,
        "height": 4,
        "width": 4,
    }
    a = DeviceBatches(spec, 4, 3, torch.device("cpu"), torch.float32, seed=5)
    b = DeviceBatches(spec, 4, 3, torch.device("cpu"), torch.float32, seed=5)
    first = [next(a) for _ in range(4)]
    assert all(
        torch.equal(x["inputs"], y["inputs"]) and torch.equal(x["targets"], y["targets"])
        for x, y in zip(first, [next(b) for _ in range(4)], strict=True)
    )
    assert first[3] is first[0] and not torch.equal(
        first[0]["inputs"], first[1]["inputs"]
    )  # 3 distinct, rotated
    labelled = first[0]["targets"] != -100
    assert (
        torch.equal(first[0]["targets"][labelled], first[0]["inputs"][labelled]) and 0 < labelled.sum() < 32
    )


def test_step_time_spread_and_cpu_steal_come_from_the_measured_steps():
    v = measure.Variant("compiled", step=None, batches=None, losses=torch.zeros(0))  # type: ignore[arg-type]
    v.step_ms = [10.0, 10.0, 11.0, 12.0, 20.0, 10.5, 10.2, 10.1, 10.3, 10.4, 10.6]
    v.warmup_s = [1.0]
    v.cpu_jiffies, v.steal_jiffies = 400, 30
    m = measure.variant_metrics(v, batch_size=2, tokens_per_sample=None, compiled=True)
    s = sorted(v.step_ms)
    expected = 100 * (measure.percentile(s, 0.9) - measure.percentile(s, 0.1)) / measure.percentile(s, 0.5)
    assert m["step_time_spread_pct"] == pytest.approx(expected)
    assert m["cpu_steal_pct"] == pytest.approx(7.5)
    v.cpu_jiffies = 0  # no /proc/stat: no steal figure rather than a made-up 0
    assert "cpu_steal_pct" not in measure.variant_metrics(v, 2, None, True)


def test_a_measurement_is_noisy_only_beyond_the_spread_limit():
    steady = {"step_time_spread_pct": 4.3, "cpu_steal_pct": 0.0}  # ViT-B/16 amp default on a quiet H200
    noisy = {"step_time_spread_pct": 23.2, "cpu_steal_pct": 6.25}  # the same job while the host was busy
    assert measure.noise_note(steady, 10.0) is None
    note = measure.noise_note(noisy, 10.0)
    assert note is not None and note.startswith("noisy: p10-p90") and "23%" in note and "steal 6.2%" in note
    assert "steal" not in (measure.noise_note({"step_time_spread_pct": 23.2}, 10.0) or "")
    assert measure.noise_note(noisy, 25.0) is None


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux /proc/stat only")
def test_timed_rounds_read_the_hosts_cpu_time_around_the_measured_steps():
    steal, total = measure.cpu_times()
    assert 0 <= steal <= total and total > 0

    def slow_step(batch: int) -> torch.Tensor:
        time.sleep(0.02)  # a few scheduler ticks, so the kernel's CPU counters move
        return torch.zeros(())

    v = measure.Variant("eager", step=slow_step, batches=iter(range(9)), losses=torch.zeros(9))
    measure.timed_round(v, 3, torch.device("cpu"), measure.quiet, 1, 3)
    assert v.cpu_jiffies > 0 and 0 <= v.steal_jiffies <= v.cpu_jiffies
