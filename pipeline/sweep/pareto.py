"""The Pareto front of a throughput search: throughput (higher is better) against compile time and
memory (lower is better). A finished job is on the front when no other finished job is at least as
good on all three and better on one. Torch-free."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipeline.display import figure
from pipeline.status import FINISHED

COMPILE_METRIC = "compile/total_s"  # an eager job compiles nothing: 0 s
MEMORY_METRICS = ("memory/peak_reserved_gib", "memory/cpu_rss_peak_gib")  # the device's, else the host's


@dataclass(frozen=True, kw_only=True)
class ParetoPoint:
    """One finished job in the three figures the front trades off."""

    name: str
    run_id: str
    throughput: float
    compile_s: float
    memory_gib: float
    on_front: bool = False

    def dominates(self, other: ParetoPoint) -> bool:
        """At least as good on all three figures and better on one."""
        mine, theirs = ((-p.throughput, p.compile_s, p.memory_gib) for p in (self, other))  # lower is better
        return all(a <= b for a, b in zip(mine, theirs, strict=True)) and mine != theirs


@dataclass(frozen=True, kw_only=True)
class ParetoFront:
    """Every finished job's point (front first, by throughput), the throughput metric and the memory
    figure used (the same for every point)."""

    throughput_metric: str
    memory_metric: str
    points: list[ParetoPoint]

    @property
    def front(self) -> list[ParetoPoint]:
        return [p for p in self.points if p.on_front]


def pareto_front(rows: list, throughput_metric: str) -> ParetoFront | None:
    """The front over the finished jobs (`Row`s) that measured `throughput_metric`; None when fewer
    than two did or they share no memory figure."""
    done = [r for r in rows if r.status == FINISHED and throughput_metric in r.metrics]
    # the first memory figure every job has (device memory where jobs ran on a GPU)
    memory = next((m for m in MEMORY_METRICS if done and all(m in r.metrics for r in done)), None)
    if len(done) < 2 or memory is None:
        return None
    points = [
        ParetoPoint(
            name=r.name,
            run_id=r.run_id,
            throughput=r.metrics[throughput_metric],
            compile_s=r.metrics.get(COMPILE_METRIC, 0.0),
            memory_gib=r.metrics[memory],
        )
        for r in done
    ]
    marked = [dataclasses.replace(p, on_front=not any(q.dominates(p) for q in points)) for p in points]
    marked.sort(key=lambda p: (not p.on_front, -p.throughput))
    return ParetoFront(throughput_metric=throughput_metric, memory_metric=memory, points=marked)


def front_lines(front: ParetoFront) -> list[str]:
    """The front in words, one line per point, best throughput first."""
    unit = front.throughput_metric.rsplit("/", 1)[-1].replace("_per_s", "/s")
    lines = [
        f"Pareto front of {front.throughput_metric} (higher), {COMPILE_METRIC} and {front.memory_metric} (lower): "
        f"{len(front.front)} of {len(front.points)} finished jobs"
    ]
    for p in front.front:
        lines.append(
            f"{p.name}: {figure(p.throughput)} {unit}, compile {figure(p.compile_s)} s, memory {figure(p.memory_gib)} GiB"
        )
    return lines
