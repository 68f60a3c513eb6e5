"""The verdict rule on synthetic step times: interval coverage, false winners and power by autocorrelation.

    python benchmarks/verdict_power.py          # the table by autocorrelation in docs/verdicts.md (~1 min)
    python benchmarks/verdict_power.py --steps  # the table by measured steps (why MIN_STEPS is 10)

Both are deterministic and run on a CPU.

Each trial draws 90 step times per configuration from an AR(1) series (lag-1 correlation rho, 1%
noise), summarizes them as a job does (pipeline.measure.stats.Latency) and decides as a sweep does
(pipeline.sweep.verdict.decide).
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.measure.stats import Latency
from pipeline.sweep.verdict import FASTEST, Estimate, Rule, decide

TRIALS = 1000


def steps(mean_ms: float, rho: float, rng: random.Random, noise: float = 0.01, n: int = 90) -> list[float]:
    x, out = 0.0, []
    for _ in range(n):
        x = rho * x + math.sqrt(1 - rho * rho) * rng.gauss(0, 1)
        out.append(mean_ms * (1 + noise * x))
    return out


def estimate(name: str, values: list[float]) -> Estimate:
    lat = Latency.from_values(values)
    return Estimate(name=name, value=lat.p50, low=lat.ci95_low, high=lat.ci95_high)


def by_steps() -> None:
    """Interval coverage and false winners of identical pairs by a job's measured steps, the limit off."""
    rhos = (0.0, 0.35, 0.8)
    cells: dict[int, list[tuple[float, float]]] = {}
    for rho in rhos:
        for n in (3, 5, 10, 20, 30):
            rng, covered, false, trials = random.Random(5), 0, 0, 2 * TRIALS
            for _ in range(trials):
                a, b = estimate("a", steps(10, rho, rng, n=n)), estimate("b", steps(10, rho, rng, n=n))
                covered += a.low <= 10 <= a.high
                false += decide([a, b], Rule(min_steps=1), "ms").kind == FASTEST
            cells.setdefault(n, []).append((100 * covered / trials, 100 * false / trials))
    names = " / ".join(f"{r:g}" for r in rhos)
    print(f"| measured steps | coverage, rho {names} | false fastest without the limit, rho {names} |")
    print("|---|---|---|")
    for n, row in cells.items():
        coverage = " / ".join(f"{c:.1f}%" for c, _ in row)
        false = " / ".join(f"{f:.1f}%" for _, f in row)
        print(f"| {n} | {coverage} | {false} |")


def main() -> None:
    if "--steps" in sys.argv[1:]:
        by_steps()
        return
    print("| lag-1 rho | interval coverage | false fastest (identical pair) | true 3% difference found |")
    print("|---|---|---|---|")
    for rho in (0.0, 0.35, 0.5, 0.8, 0.9, 0.95):
        rng, covered, false = random.Random(3), 0, 0
        for _ in range(TRIALS):
            a, b = estimate("a", steps(10, rho, rng)), estimate("b", steps(10, rho, rng))
            covered += a.low <= 10 <= a.high
            false += decide([a, b], Rule(), "ms").kind == FASTEST
        rng, found = random.Random(4), 0
        for _ in range(TRIALS):
            v = decide(
                [estimate("slow", steps(10.3, rho, rng)), estimate("fast", steps(10, rho, rng))], Rule(), "ms"
            )
            found += v.kind == FASTEST and v.fastest == "fast"
        print(f"| {rho} | {covered / 10:.1f}% | {false / 10:.1f}% | {found / 10:.1f}% |")


if __name__ == "__main__":
    main()
