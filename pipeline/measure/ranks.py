"""A distributed job's figures across its ranks: each rank times its own steps, and the job's step times
are its slowest rank's own series (a per-step maximum over ranks would count a delay twice: once on the
late rank, once on the peer waiting for it at the next collective). Each rank's own median, memory,
compile time and graph counts are gathered for their maximum and spread (`ParallelFigures`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from pipeline.measure.sequential import Looks
from pipeline.measure.stats import percentile
from pipeline.measure.timing import Variant

# Figures each rank reports for itself (by registry name), gathered after the report is made:
# name -> (its maximum over ranks, its spread over ranks or None, its per-rank series).
PER_RANK: dict[str, tuple[str, str | None, str]] = {
    "memory/peak_allocated_gib": (
        "memory/rank_peak_allocated_max_gib",
        "memory/rank_peak_allocated_spread_pct",
        "rank/peak_allocated_gib",
    ),
    "memory/cpu_rss_peak_gib": (
        "memory/rank_cpu_rss_max_gib",
        "memory/rank_cpu_rss_spread_pct",
        "rank/cpu_rss_peak_gib",
    ),
    "compile/total_s": ("compile/rank_total_max_s", "compile/rank_total_spread_pct", "rank/compile_total_s"),
    "diagnose/graph_breaks": ("diagnose/rank_max_graph_breaks", None, "rank/graph_breaks"),
    "diagnose/unique_graphs": ("diagnose/rank_max_unique_graphs", None, "rank/unique_graphs"),
    "diagnose/backend_graphs": ("diagnose/rank_max_backend_graphs", None, "rank/backend_graphs"),
    "diagnose/recompiles_after_warmup": (
        "diagnose/rank_max_recompiles",
        None,
        "rank/recompiles_after_warmup",
    ),
}


def gather(values: list[float], device: torch.device) -> list[list[float]]:
    """Every rank's `values` (same length on every rank), on every rank. NCCL gathers CUDA tensors."""
    where = device if dist.get_backend() == "nccl" else torch.device("cpu")
    mine = torch.tensor(values, dtype=torch.float64, device=where)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return [t.tolist() for t in every]


def slowest_rank(per_rank: list[list[float]]) -> int:
    """The rank whose median step is the largest (the lowest such rank on a tie)."""
    medians = [percentile(sorted(steps), 0.5) for steps in per_rank]
    return medians.index(max(medians))


def agree(value: Any, device: torch.device, *, broadcast: bool = False) -> Any:
    """One value on every rank of a distributed job: rank 0's (`broadcast`, any picklable value) or the
    largest (a number). Outside a distributed job, the value itself."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    where = device if dist.get_backend() == "nccl" else torch.device("cpu")
    if broadcast:
        box = [value]
        dist.broadcast_object_list(box, src=0, device=where)
        return box[0]
    found = torch.tensor([float(value)], dtype=torch.float64, device=where)
    dist.all_reduce(found, op=dist.ReduceOp.MAX)
    return found.item()


def agreed_looks(first: int, most: int, device: torch.device) -> Looks:
    """One plan of looks on every rank: rank 0's, whose answers the others follow (plans made from each
    rank's own unit times can differ in length)."""
    return agree(Looks.plan(first, most), device, broadcast=True)


def slowest_rank_steps(variant: Variant, device: torch.device) -> float:
    """Replace the variant's step times by its slowest rank's own (same steps, same rounds: its rounds'
    medians follow); returns this rank's own median before the replacement."""
    own = percentile(sorted(variant.step_ms), 0.5)
    per_rank = gather(variant.step_ms, device)
    variant.step_ms = per_rank[slowest_rank(per_rank)]
    return own


def align_ranks(device: torch.device) -> None:
    """Every rank waits here for the others, its device idle, so that the timed rounds start together and a
    first step does not time a peer's host work as a wait in a collective. Before the rounds and after each
    look, never between rounds (a sync there would drain the device every round)."""
    if not dist.is_initialized():
        return
    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[device.index if device.index is not None else torch.cuda.current_device()])
        torch.cuda.synchronize(device)
    else:
        dist.barrier()


# The ranks' own medians and their paired eager copy's, named as PER_RANK's figures (the eager copy's: no maximum).
OWN_P50 = ("step/rank_p50_max_ms", "step/rank_spread_pct", "rank/step_p50_ms")
EAGER_P50 = (None, "eager/rank_spread_pct", "rank/eager_step_p50_ms")


@dataclass(frozen=True, kw_only=True)
class ParallelFigures:
    """What a distributed job adds to its metrics: the world, and each per-rank figure on every rank (index =
    rank) with the names of its maximum, spread and series."""

    world_size: int
    figures: list[tuple[tuple[str | None, str | None, str], list[float]]]

    @classmethod
    def collect(
        cls, *, own_p50_ms: float, eager_p50_ms: float | None, metrics: dict[str, float], device: torch.device
    ) -> ParallelFigures:
        mine = [own_p50_ms, math.nan if eager_p50_ms is None else eager_p50_ms]
        mine += [float(metrics.get(name, math.nan)) for name in PER_RANK]
        own, eager, *columns = (list(col) for col in zip(*gather(mine, device), strict=True))
        figures = [(OWN_P50, own)] + ([(EAGER_P50, eager)] if eager_p50_ms is not None else [])
        figures += [
            (names, col)
            for names, col in zip(PER_RANK.values(), columns, strict=True)
            if not any(math.isnan(v) for v in col)
        ]
        return cls(world_size=dist.get_world_size(), figures=figures)

    def metrics(self) -> dict[str, float]:
        m = {"parallel/world_size": float(self.world_size)}
        for (max_name, spread_name, _), values in self.figures:
            if max_name is not None:
                m[max_name] = max(values)
            if spread_name is not None:  # (max - min) / max, in %: how unequal the ranks are
                top = max(values)
                m[spread_name] = 100 * (top - min(values)) / top if top > 0 else 0.0
        return m

    def series(self) -> dict[str, list[float]]:
        """Per-rank values as metric histories whose step is the rank."""
        return {series: values for (_, _, series), values in self.figures}
