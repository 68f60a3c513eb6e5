"""The verdict rule on synthetic step times: interval coverage, false winners and power by noise model and
measured steps, and the rule replayed on step times recorded on a loaded CPU host.

    python benchmarks/verdict_power.py          # both tables of docs/verdicts.md (about 2 min on one core)
    python benchmarks/verdict_power.py --steps  # the table by measured steps (why MIN_STEPS is 10)
    python benchmarks/verdict_power.py --host   # the recorded CPU host's sweeps (benchmarks/results/cpu-2026-11-25-load)

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
import sys
from collections.abc import Callable
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.measure.noise import Noise  # noqa: E402
from pipeline.measure.objective import Work  # noqa: E402
from pipeline.measure.stats import Latency, percentile  # noqa: E402
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


def main() -> None:
    if "--steps" in sys.argv[1:]:
        by_steps()
    elif "--host" in sys.argv[1:]:
        by_host()
    else:
        by_model()


if __name__ == "__main__":
    main()
