"""The verdict rule on synthetic step times: interval coverage, false winners and power by noise model and
measured steps, and the rule replayed on step times recorded on a loaded CPU host.

    python benchmarks/verdict_power.py          # both tables of docs/verdicts.md (about 2 min on one core)
    python benchmarks/verdict_power.py --steps  # the table by measured steps (why MIN_STEPS is 10)
    python benchmarks/verdict_power.py --host   # the recorded CPU host's sweeps (benchmarks/results/cpu-2026-11-25-load)
    python benchmarks/verdict_power.py --sequential  # measuring until decided: paired jobs and their verdicts

All are deterministic and run on a CPU.

Each trial draws the step times of two jobs from a noise model, turns each into the metrics a job logs
(pipeline.measure.stats.Latency, the noisy flag of pipeline.measure.noise.Noise at the default
benchmark.noisy_spread_pct) and decides as a sweep does (pipeline.sweep.summary.summarize: the pooled
estimates, the noise allowance, the verdict). The noise models:

* `gaussian rho=r`: an AR(1) series (lag-1 correlation r) with 1% noise around the mean;
* `bursty`: a shared host: quiet steps (AR(1), rho 0.35, 1% noise) and, from each step with
  probability 2%, a stall of 1 + Geometric(mean 1.5) steps, each stalled step 5-50x slower (log-uniform):
  about 5% of steps stalled;
* `bursty, frequent`: the same with stalls starting at 5% and lasting 1 + Geometric(mean 3): about 17%.

"False fastest": two identical configurations, one named fastest. "Found": a configuration 3% faster
(every step of the other one, stalls included, 1.03x as long) named fastest.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
from collections.abc import Callable
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.measure.noise import Noise  # noqa: E402
from pipeline.measure.objective import Work  # noqa: E402
from pipeline.measure.sequential import (  # noqa: E402
    FASTER,
    SAME,
    SLOWER,
    Looks,
    Measuring,
    Stop,
    StopRule,
    speedup_interval,
)
from pipeline.measure.stats import Latency, effective_count, percentile, t975  # noqa: E402
from pipeline.sweep.summary import Row, summarize  # noqa: E402
from pipeline.sweep.verdict import FASTEST, Rule, Verdict  # noqa: E402

TRIALS = 1000
STEPS = (10, 30, 100)
NOISY_SPREAD_PCT = 10.0  # benchmark.noisy_spread_pct's default
HOST = ROOT / "benchmarks/results/cpu-2026-11-25-load/steps.json"

Generator = Callable[[float, int, random.Random], list[float]]


def gaussian(rho: float, noise: float = 0.01) -> Generator:
    def draw(mean_ms: float, n: int, rng: random.Random) -> list[float]:
        x, out = rng.gauss(0, 1), []
        for _ in range(n):
            x = rho * x + math.sqrt(1 - rho * rho) * rng.gauss(0, 1)
            out.append(mean_ms * (1 + noise * x))
        return out

    return draw


def bursty(start: float = 0.02, extra: float = 1.5) -> Generator:
    """Quiet AR(1) steps (rho 0.35, 1%) with stalls: from each step with probability `start`, a stall of
    1 + Geometric(mean `extra`) steps, each 5-50x slower (log-uniform)."""
    quiet = gaussian(0.35)

    def draw(mean_ms: float, n: int, rng: random.Random) -> list[float]:
        out, left = quiet(mean_ms, n, rng), 0
        for i in range(n):
            if left == 0 and rng.random() < start:
                left = 1
                while rng.random() < extra / (1 + extra):
                    left += 1
            if left:
                out[i] *= math.exp(rng.uniform(math.log(5), math.log(50)))
                left -= 1
        return out

    return draw


MODELS: dict[str, Generator] = {
    "gaussian rho=0": gaussian(0.0),
    "gaussian rho=0.35": gaussian(0.35),
    "gaussian rho=0.8": gaussian(0.8),
    "bursty": bursty(),
    "bursty, frequent": bursty(0.05, 3.0),
}


def job_metrics(steps: list[float]) -> dict[str, float]:
    """The metrics a job logs for these step times (those the verdict reads)."""
    lat = Latency.from_values(steps)
    noise = Noise(spread_pct=lat.spread_pct, cpu_steal_pct=None, limit_pct=NOISY_SPREAD_PCT)
    return {**lat.metrics(), **noise.metrics(), "step/count": float(len(steps))}


def row(name: str, steps: list[float]) -> Row:
    return Row(
        name=name,
        status="FINISHED",
        config={"model": "m", "mode": "eager", "job": name},
        metrics=job_metrics(steps),
        config_hash=name,
        pool_hash=name,
        work=Work(unit="training step", samples=8, tokens=None),
    )


def verdict(jobs: dict[str, list[float]], rule: Rule | None = None) -> Verdict:
    """The sweep's verdict over one job per configuration, as summarize gives it."""
    found = summarize("synthetic", [row(name, steps) for name, steps in jobs.items()], rule=rule).verdict
    assert found is not None
    return found


def false_fastest(draw: Generator, n: int, trials: int = TRIALS, seed: int = 3) -> float:
    """% of trials in which one of two identical configurations was named fastest."""
    rng = random.Random(seed)
    named = sum(
        verdict({"a": draw(10, n, rng), "b": draw(10, n, rng)}).kind == FASTEST for _ in range(trials)
    )
    return 100 * named / trials


def found(draw: Generator, n: int, trials: int = TRIALS, seed: int = 4) -> float:
    """% of trials in which the configuration 3% faster was named fastest."""
    rng = random.Random(seed)
    right = 0
    for _ in range(trials):
        v = verdict({"slow": [1.03 * s for s in draw(10, n, rng)], "fast": draw(10, n, rng)})
        right += v.kind == FASTEST and v.fastest == "fast"
    return 100 * right / trials


def coverage(draw: Generator, n: int, trials: int = TRIALS, seed: int = 5) -> float:
    """% of jobs whose interval holds the model's true median (from 200,000 steps)."""
    rng = random.Random(seed)
    true = percentile(sorted(s for _ in range(400) for s in draw(10, 500, rng)), 0.5)
    held = 0
    for _ in range(trials):
        lat = Latency.from_values(draw(10, n, rng))
        held += lat.ci95_low <= true <= lat.ci95_high
    return 100 * held / trials


def by_model() -> None:
    """The two tables of docs/verdicts.md: false fastest with coverage, and power."""
    steps = " / ".join(str(n) for n in STEPS)
    print(f"| noise model | false fastest, {steps} steps | interval coverage, {steps} steps |")
    print("|---|---|---|")
    for name, draw in MODELS.items():
        false = " / ".join(f"{false_fastest(draw, n):.1f}%" for n in STEPS)
        cover = " / ".join(f"{coverage(draw, n):.1f}%" for n in STEPS)
        print(f"| {name} | {false} | {cover} |")
    print()
    print(f"| noise model | true 3% difference found, {steps} steps |")
    print("|---|---|")
    for name, draw in MODELS.items():
        print(f"| {name} | " + " / ".join(f"{found(draw, n):.1f}%" for n in STEPS) + " |")


def by_steps() -> None:
    """Interval coverage and false winners of identical pairs by a job's measured steps, the limit off."""
    rhos = (0.0, 0.35, 0.8)
    cells: dict[int, list[tuple[float, float]]] = {}
    for rho in rhos:
        for n in (3, 5, 10, 20, 30):
            draw = gaussian(rho)
            cover = coverage(draw, n, 2 * TRIALS)
            rng, false = random.Random(5), 0
            for _ in range(2 * TRIALS):
                jobs = {"a": draw(10, n, rng), "b": draw(10, n, rng)}
                false += verdict(jobs, Rule(min_steps=1)).kind == FASTEST
            cells.setdefault(n, []).append((cover, 100 * false / (2 * TRIALS)))
    names = " / ".join(f"{r:g}" for r in rhos)
    print(f"| measured steps | coverage, rho {names} | false fastest without the limit, rho {names} |")
    print("|---|---|---|")
    for n, row_ in cells.items():
        cover = " / ".join(f"{c:.1f}%" for c, _ in row_)
        false = " / ".join(f"{f:.1f}%" for _, f in row_)
        print(f"| {n} | {cover} | {false} |")


def by_host() -> None:
    """The rule on step times recorded on a 2-core CPU host: each recorded sweep of one configuration's
    jobs (identical work) replayed whole and as every 2-job sweep its jobs make, and the issue's depth 1
    against depth 6 sweeps."""
    data = json.loads(HOST.read_text())
    print(
        "| recorded sweep (identical configurations) | jobs | verdict of the whole sweep | 2-job sweeps called fastest |"
    )
    print("|---|---|---|---|")
    for name, jobs in data["identical"].items():
        whole = verdict({f"job{i}": steps for i, steps in enumerate(jobs)}).kind
        pairs = list(combinations(jobs, 2))
        named = sum(verdict({"a": a, "b": b}).kind == FASTEST for a, b in pairs)
        print(f"| {name} | {len(jobs)} | {whole} | {named} of {len(pairs)} |")
    print()
    print(
        "| recorded sweeps of depth 1 against depth 6 | sweeps | fastest: depth 1 | fastest: depth 6 | inconclusive |"
    )
    print("|---|---|---|---|---|")
    for name, pairs in data["depth"].items():
        kinds = [verdict({"depth=1": one, "depth=6": six}) for one, six in pairs]
        right = sum(v.kind == FASTEST and v.fastest == "depth=1" for v in kinds)
        wrong = sum(v.kind == FASTEST and v.fastest == "depth=6" for v in kinds)
        print(f"| {name} | {len(pairs)} | {right} | {wrong} | {len(pairs) - right - wrong} |")


# ------------------------------------------------------------------------ measuring until decided
# A paired job as pipeline/scenarios/protocol.py runs it, its device replaced by a host model: the compiled
# variant's solo round, the eager probe's, then rounds of k units alternating E C | C E | ..., each about
# ROUND_S, looks planned from the solo rounds' times and the budget, and at each due look the paired
# speedup's interval (pipeline.measure.sequential, the code the worker runs) and the stopping rule.
ROUND_S, FIRST_ROUNDS, BUDGET_S, TARGET_PCT, MIN_EFFECT_PCT = 0.02, 10, 30.0, 1.0, 1.0
UNIT_MS = 20.0  # the eager unit's time on an undisturbed host
SEQ_TRIALS = 500


class Host:
    """A host's slowing of each step, in the order the steps run, whichever variant runs them: `draw` is
    one of MODELS (its AR(1) noise and stalls belong to the host), or a two-speed VM (`two_speed`)."""

    def __init__(self, draw: Generator | None, rng: random.Random, *, two_speed: bool = False):
        self.draw, self.rng, self.two_speed = draw, rng, two_speed
        self.buffer: list[float] = []
        self.clock_s, self.state_until_s, self.slow = 0.0, 0.0, False

    def step(self, base_ms: float, host_share: float) -> float:
        """One step of `base_ms` on an undisturbed host, `host_share` of it the host's own work."""
        if self.two_speed:  # vCPUs at two speeds 1.8x apart, switching every 50-100 ms (issue 26)
            if self.clock_s >= self.state_until_s:
                self.slow = self.rng.random() < 0.6
                self.state_until_s = self.clock_s + self.rng.uniform(0.05, 0.10)
            speed = 1.8 if self.slow else 1.0
            ms = base_ms * (1 - host_share + host_share * speed) * (1 + 0.01 * self.rng.gauss(0, 1))
        else:
            if not self.buffer:
                assert self.draw is not None
                self.buffer = self.draw(1.0, 500, self.rng)[::-1]
            ms = base_ms * self.buffer.pop()
        self.clock_s += ms / 1000
        return ms


HOSTS: dict[str, Callable[[random.Random], Host]] = {
    **{name: (lambda rng, d=draw: Host(d, rng)) for name, draw in MODELS.items()},
    "two-speed VM": lambda rng: Host(None, rng, two_speed=True),
}


def paired_job(host: Host, speedup: float, *, budget_s: float = BUDGET_S) -> tuple[Stop, dict[str, float]]:
    """One paired job on `host`: eager units of UNIT_MS, compiled ones `speedup` times faster (on the
    two-speed VM eager's host share is 0.8 and compiled's the same, so `speedup` is the truth); returns
    how it stopped and the metrics the sweep reads."""
    unit_e, unit_c, share = UNIT_MS, UNIT_MS / speedup, 0.8
    units = max(1, round(ROUND_S * 1000 / ((unit_e + unit_c) / 2)))

    def run(base: float) -> list[float]:
        return [host.step(base, share) for _ in range(units)]

    solo_c, probe_e = run(unit_c), run(unit_e)
    per_round_s = units * (statistics.median(solo_c) + statistics.median(probe_e)) / 1000
    looks = Looks.plan(FIRST_ROUNDS, int(budget_s / per_round_s) if budget_s > 0 else FIRST_ROUNDS)
    rule = StopRule(min_effect_pct=MIN_EFFECT_PCT, target_pct=TARGET_PCT, budget_s=budget_s)
    measuring = Measuring(looks, rule, paired=True)
    compiled, eager, logs, seconds, rounds = [solo_c], [], [], 0.0, 0
    while True:
        first_e = rounds % 2 == 0
        a = run(unit_e if first_e else unit_c)
        b = run(unit_c if first_e else unit_e)
        e, c = (a, b) if first_e else (b, a)
        eager.append(e)
        compiled.append(c)
        logs.append(math.log(statistics.median(e) / statistics.median(c)))
        seconds += (sum(a) + sum(b)) / 1000
        rounds += 1
        if not measuring.due(rounds):
            continue
        low, estimate, high = speedup_interval(logs, looks.confidence)
        stop = measuring.look(rounds, seconds, low, estimate, high)
        if stop is not None:
            break
        measuring.advance()
    steps = [ms for r in compiled for ms in r]
    lat = Latency.from_values(steps, stop.confidence)
    noise = Noise(spread_pct=lat.spread_pct, cpu_steal_pct=None, limit_pct=NOISY_SPREAD_PCT)
    eager_lat = Latency.from_values([ms for r in eager for ms in r], stop.confidence)
    metrics = {
        **lat.metrics(),
        **noise.metrics(),
        **stop.metrics(),
        "step/count": float(len(steps)),
        "speedup/vs_eager": estimate,
        "speedup/ci95_low": low,
        "speedup/ci95_high": high,
        "eager/p50_ms": eager_lat.p50,
    }
    return stop, metrics


def fixed_paired_job(host: Host, speedup: float, measured: int = 90) -> tuple[str | None, float]:
    """The protocol before measuring until decided, for comparison: the compiled variant's solo round, then
    E1 C2 E2 C3 E3, 3 rounds of measured / 3 steps each; each round cut into blocks of 3 steps, block j of
    compiled round r paired with block j of eager round r, the t interval of their mean log-ratio over its
    effective number, centred on eager median / compiled median. Returns its answer and its seconds."""
    per_round = measured // 3
    share, rounds = 0.8, {"c": [], "e": []}
    for variant in ("c", "e", "c", "e", "c", "e"):
        base = UNIT_MS / speedup if variant == "c" else UNIT_MS
        rounds[variant].append([host.step(base, share) for _ in range(per_round)])
    blocks_per_round = per_round // 3
    logs = []
    for e_round, c_round in zip(rounds["e"], rounds["c"], strict=True):
        for j in range(blocks_per_round):
            e, c = e_round[3 * j : 3 * j + 3], c_round[3 * j : 3 * j + 3]
            logs.append(math.log(statistics.median(e) / statistics.median(c)))
    all_e = [ms for r in rounds["e"] for ms in r]
    all_c = [ms for r in rounds["c"] for ms in r]
    center = statistics.median(all_e) / statistics.median(all_c)
    n_eff = min(effective_count(logs), len(logs))
    half = t975(int(n_eff) - 1) * statistics.stdev(logs) / math.sqrt(n_eff)
    low, high = center * math.exp(-half), center * math.exp(half)
    rule = StopRule(min_effect_pct=MIN_EFFECT_PCT, target_pct=TARGET_PCT, budget_s=0)
    return rule.answer(low, high), (sum(all_e) + sum(all_c)) / 1000


def eager_row(name: str, metrics: dict[str, float]) -> Row:
    """The sweep's eager job, from a paired job's eager copy (its figure is what the verdict compares)."""
    steps = {k.replace("eager/", "step/"): v for k, v in metrics.items() if k == "eager/p50_ms"}
    m = {**job_metrics([metrics["eager/p50_ms"]] * 30), **steps}
    return Row(
        name=name,
        status="FINISHED",
        config={"model": "m", "mode": "eager"},
        metrics=m,
        config_hash=name,
        pool_hash=name,
        work=Work(unit="training step", samples=8, tokens=None),
    )


def compiled_row(name: str, mode: str, metrics: dict[str, float]) -> Row:
    return Row(
        name=name,
        status="FINISHED",
        config={"model": "m", "mode": mode},
        metrics=metrics,
        config_hash=name,
        pool_hash=name,
        work=Work(unit="training step", samples=8, tokens=None),
    )


def sequential_answers(trials: int = SEQ_TRIALS) -> None:
    """Paired jobs whose compiled variant is as fast as eager (any answer but `no difference` is false) and
    3% faster (`faster` is found): how often each answer came, by the look it came at."""
    print(
        "| host model | as fast: false answers by look 1 / 2 / 3 / all | as fast: no difference | as fast: measured s "
        "| 3% faster: found | 3% faster: measured s | before (90 steps, 3 rounds): false / found |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, make in HOSTS.items():
        rng = random.Random(11)
        same = [paired_job(make(rng), 1.0) for _ in range(trials)]
        false_by_look = [
            100 * sum(s.answer in (FASTER, SLOWER) and s.look <= k for s, _ in same) / trials
            for k in (1, 2, 3, 99)
        ]
        right = 100 * sum(s.answer == SAME for s, _ in same) / trials
        faster = [paired_job(make(rng), 1.03) for _ in range(trials)]
        found_ = 100 * sum(s.answer == FASTER for s, _ in faster) / trials
        before_false = sum(fixed_paired_job(make(rng), 1.0)[0] in (FASTER, SLOWER) for _ in range(trials))
        before_found = sum(fixed_paired_job(make(rng), 1.03)[0] == FASTER for _ in range(trials))
        print(
            f"| {name} | " + " / ".join(f"{f:.1f}%" for f in false_by_look) + f" | {right:.1f}% | "
            f"{statistics.mean(s.seconds for s, _ in same):.1f} | {found_:.1f}% | "
            f"{statistics.mean(s.seconds for s, _ in faster):.1f} | "
            f"{100 * before_false / trials:.1f}% / {100 * before_found / trials:.1f}% |"
        )


def sequential_verdicts(trials: int = SEQ_TRIALS) -> None:
    """Sweeps of an eager job and two compiled configurations of it, each paired with its own eager copy:
    identical compiled configurations (either named fastest is false), and one 3% faster than the other
    (found when it is named)."""
    print("| host model | identical: false fastest | 3% apart: found | 3% apart: wrong fastest |")
    print("|---|---|---|---|")
    for name, make in HOSTS.items():
        rng = random.Random(12)
        false = found_ = wrong = 0
        for trial in range(2 * trials):
            apart = trial >= trials
            _, a = paired_job(make(rng), 1.3)
            _, b = paired_job(make(rng), 1.3 * (1.03 if apart else 1.0))
            rows = [
                eager_row("eager", a),
                compiled_row("default", "default", a),
                compiled_row("other", "max-autotune", b),
            ]
            v = summarize("synthetic", rows).verdict
            assert v is not None
            named = v.fastest if v.kind == FASTEST else None
            if not apart:
                false += named is not None and named != "eager"
            else:
                found_ += named == "other"
                wrong += named is not None and named != "other"
        print(
            f"| {name} | {100 * false / trials:.1f}% | {100 * found_ / trials:.1f}% | {100 * wrong / trials:.1f}% |"
        )


def main() -> None:
    if "--sequential" in sys.argv[1:]:
        sequential_answers()
        print()
        sequential_verdicts()
    elif "--steps" in sys.argv[1:]:
        by_steps()
    elif "--host" in sys.argv[1:]:
        by_host()
    else:
        by_model()


if __name__ == "__main__":
    main()
