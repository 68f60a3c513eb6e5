"""The host's own CPU speed: a fixed piece of Python work timed in bursts before the timed rounds, so a
job says how far the host moved while it measured (a launch-bound step runs at the host's speed, which on
some VMs switches between full and about half). Torch-free."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from pipeline.measure.stats import percentile

REFERENCE_ITERATIONS = 2500  # well under a millisecond on a server core at full speed
MIN_BURST_S = 0.002  # a burst is 3 calls at least: about 2 ms


def reference_work(iterations: int = REFERENCE_ITERATIONS) -> int:
    """A fixed piece of Python work of the kind a kernel launch's host path does (tuples, dict stores,
    hashing, calls)."""
    acc = 0
    table: dict[int, tuple[int, int, str]] = {}
    for i in range(iterations):
        item = (i, i + 1, str(i))
        table[i & 255] = item
        acc += len(item) + hash(item[2]) % 7
    return acc


@dataclass(kw_only=True)
class HostCheck:
    """The reference work's times (ms), gathered in short bursts over a job's timed rounds."""

    burst_s: float  # seconds of reference work per burst (0: off)
    every: int = 1  # a burst before every this many rounds (short rounds: fewer bursts of 3 calls or more)
    samples_ms: list[float] = field(default_factory=list)
    calls: int = 0  # sample() calls so far

    def spread_over(self, total_s: float, rounds: int) -> None:
        """`total_s` of reference work over `rounds` rounds, in bursts of MIN_BURST_S or more."""
        per_round = total_s / max(rounds, 1) if total_s > 0 else 0.0
        self.every = max(1, math.ceil(MIN_BURST_S / per_round)) if 0 < per_round < MIN_BURST_S else 1
        self.burst_s = max(per_round, MIN_BURST_S) if per_round > 0 else 0.0

    def sample(self) -> None:
        """One burst every `every` calls: the reference work back to back for `burst_s` (3 calls at least)."""
        self.calls += 1
        if self.burst_s <= 0 or (self.calls - 1) % self.every:
            return
        started = time.perf_counter()
        calls = 0
        while calls < 3 or time.perf_counter() - started < self.burst_s:
            t0 = time.perf_counter()
            reference_work()
            self.samples_ms.append((time.perf_counter() - t0) * 1000)
            calls += 1

    @property
    def p50_ms(self) -> float | None:
        return percentile(sorted(self.samples_ms), 0.5) if self.samples_ms else None

    @property
    def spread_pct(self) -> float | None:
        """(p90 - p10) / p50 of the reference work: how far the host's speed moved (steady: a few %)."""
        if len(self.samples_ms) < 5:
            return None
        s = sorted(self.samples_ms)
        p10, p50, p90 = percentile(s, 0.1), percentile(s, 0.5), percentile(s, 0.9)
        return 100 * (p90 - p10) / p50 if p50 > 0 else None

    def metrics(self) -> dict[str, float]:
        p50, spread = self.p50_ms, self.spread_pct
        if p50 is None or spread is None:
            return {}
        return {"host/reference_p50_ms": p50, "host/reference_spread_pct": spread}
