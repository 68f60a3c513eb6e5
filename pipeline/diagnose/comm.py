"""A distributed step's communication, from a torch.profiler trace of a few extra steps (`diagnose.comm`):
exposed collective time (collectives running while nothing else did, waiting for a late peer included)
and the collectives' bus bandwidth as nccl-tests defines it (:func:`bus_factor`), against the machine's
own (:mod:`pipeline.diagnose.comm_probe`). Torch-free at import; `diagnose` imports torch."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GB = 1e9  # nccl-tests' GB/s

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER = "all_reduce", "all_gather", "reduce_scatter"
BROADCAST, OTHER = "broadcast", "other"

# Bytes of one element, by the names traces give dtypes, lowercased ("Float" from NCCL kernels' args,
# "c10::BFloat16" from CPU ops' input types).
DTYPE_BYTES = {
    name: width
    for width, names in (
        (4, ("float", "float32", "int", "int32")),
        (2, ("bfloat16", "c10::bfloat16", "half", "float16", "c10::half", "short", "int16")),
        (8, ("double", "float64", "long", "int64")),
        (1, ("byte", "uint8", "char", "int8", "bool", "float8_e4m3fn", "float8_e5m2")),
    )
    for name in names
}


def bus_factor(kind: str, world: int) -> float | None:
    """busbw / algbw for `kind` over `world` ranks (nccl-tests); None for a collective it does not define."""
    if world < 1:
        raise ValueError(f"world={world}: at least one rank")
    share = (world - 1) / world  # 2 * share is exactly 2 * (world - 1) / world: doubling rounds nothing
    return {ALL_REDUCE: 2 * share, ALL_GATHER: share, REDUCE_SCATTER: share, BROADCAST: 1.0}.get(kind)


def algbw_gbps(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (1e9): an all-gather's or reduce-scatter's whole buffer per second."""
    return size_bytes / seconds / GB


def busbw_gbps(kind: str, size_bytes: float, seconds: float, world: int) -> float | None:
    factor = bus_factor(kind, world)
    return None if factor is None else algbw_gbps(size_bytes, seconds) * factor


def collective_kind(name: str) -> str:
    """A collective's kind from its name in a trace: an NCCL kernel's (`ncclDevKernel_AllReduce_Sum_f32`),
    its `Collective name` argument (`_allgather_base`), gloo's (`gloo:all_gather`)."""
    flat = name.lower().replace("_", "").replace(":", "")
    kinds = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST)
    return next((kind for kind in kinds if kind.replace("_", "") in flat), OTHER)


def dtype_bytes(name: Any) -> int | None:
    return DTYPE_BYTES.get(str(name).lower().removeprefix("torch."))


# ----------------------------------------------------------------------------------------- a trace read


@dataclass(frozen=True)
class Collective:
    """One collective as it ran: an NCCL kernel, or on gloo's thread."""

    kind: str
    start_us: float
    dur_us: float
    size_bytes: int | None  # nccl-tests' S: an all-gather's or reduce-scatter's whole buffer; None if unknown


@dataclass(frozen=True)
class TraceComm:
    """A trace's collectives and the intervals in which the device (or the step's thread) computed."""

    collectives: list[Collective]
    compute: list[tuple[float, float]]

    @property
    def collective_us(self) -> float:
        """Time some collective ran (overlapping collectives counted once)."""
        return union_length(merge((c.start_us, c.start_us + c.dur_us) for c in self.collectives))

    @property
    def exposed_us(self) -> float:
        """Time some collective ran and nothing else did."""
        comm = merge((c.start_us, c.start_us + c.dur_us) for c in self.collectives)
        return union_length(comm) - overlap_length(comm, merge(self.compute))


def merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Intervals merged into disjoint, sorted ones."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def union_length(merged: list[tuple[float, float]]) -> float:
    return sum(end - start for start, end in merged)


def overlap_length(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of the intersection of two merged interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if end > start:
            total += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def read_trace(events: list[dict[str, Any]], *, world: int) -> TraceComm:
    """The collectives and compute of one rank's Chrome trace (`traceEvents`). On a GPU the NCCL kernels
    are the collectives and every other kernel, copy and memset is compute; on the CPU gloo's `gloo:*`
    events are the collectives and the aten ops of the step's thread (the main thread) are compute."""
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]
    device = [e for e in complete if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return _read_device(device, complete) if device else _read_gloo(complete, world)


def _read_device(device: list[dict[str, Any]], complete: list[dict[str, Any]]) -> TraceComm:
    # the CPU op that carries a collective's arguments (record_param_comms), by its External id
    launched_by: dict[Any, dict[str, Any]] = {}
    for e in complete:
        args = e.get("args") or {}
        if e.get("cat") == "cpu_op" and "Collective name" in args and "External id" in args:
            launched_by.setdefault(args["External id"], args)
    collectives, compute = [], []
    for e in device:
        start, dur = float(e["ts"]), float(e["dur"])
        if e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower():
            args = e.get("args") or {}
            meta = args if "Collective name" in args else launched_by.get(args.get("External id"), {})
            kind = collective_kind(str(meta.get("Collective name") or e["name"]))
            collectives.append(Collective(kind, start, dur, _nccl_size(meta)))
        else:
            compute.append((start, start + dur))
    return TraceComm(collectives=collectives, compute=compute)


def _read_gloo(complete: list[dict[str, Any]], world: int) -> TraceComm:
    collectives, compute = [], []
    for e in complete:
        name = str(e.get("name", ""))
        start, dur = float(e["ts"]), float(e["dur"])
        if name.startswith("gloo:"):
            kind = collective_kind(name)
            collectives.append(Collective(kind, start, dur, _gloo_size(kind, e.get("args") or {}, world)))
        elif e.get("cat") == "cpu_op" and name.startswith("aten::") and e.get("tid") == e.get("pid"):
            compute.append((start, start + dur))
    return TraceComm(collectives=collectives, compute=compute)


def _nccl_size(meta: dict[str, Any]) -> int | None:
    """nccl-tests' S from record_param_comms' arguments: the larger of the input and output."""
    width = dtype_bytes(meta.get("dtype"))
    counts = [meta.get("In msg nelems"), meta.get("Out msg nelems")]
    counts = [int(c) for c in counts if isinstance(c, (int, float)) and c >= 0]
    if width is None or not counts:
        return None
    return max(counts) * width


def _gloo_size(kind: str, args: dict[str, Any], world: int) -> int | None:
    """A gloo collective's S from its input shape; an all-gather's input is one rank's share."""
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    width = dtype_bytes(types[0]) if types else None
    if not dims or width is None or not isinstance(dims[0], list):
        return None
    size = math.prod(int(d) for d in dims[0]) * width
    return size * world if kind == ALL_GATHER else size


# ----------------------------------------------------------------------------------------- the figures


@dataclass(frozen=True, kw_only=True)
class RankComm:
    """One rank's profiled steps: per step, and the sums the job's bandwidths are made of."""

    exposed_ms: float  # per step
    collective_ms: float  # per step
    size_bytes: float  # collectives' bytes per step (nccl-tests' S)
    profiled_step_ms: float  # wall time per profiled step (the profiler's overhead included)
    timed_us: float = 0.0  # the duration of the collectives whose size is known, all profiled steps
    bus_bytes: float = 0.0  # their bytes x bus factor
    compared_us: float = 0.0  # the duration of those the probe measured too (its kinds)
    compared_bus_bytes: float = 0.0
    probe_us: float = 0.0  # the time the probe's bus bandwidth at their sizes gives those


def rank_comm(trace: TraceComm, *, steps: int, world: int, wall_s: float, probe: Any | None) -> RankComm:
    """Per-step figures of one rank's trace of `steps` steps (`wall_s`: their wall time, synced), and
    its collectives' time and bus bytes beside the time the probe gives them."""
    sums = {"timed_us": 0.0, "bus_bytes": 0.0, "compared_us": 0.0, "compared_bus_bytes": 0.0, "probe_us": 0.0}
    for c in trace.collectives:
        factor = bus_factor(c.kind, world)
        if c.size_bytes is None or factor is None or c.dur_us <= 0:
            continue
        sums["timed_us"] += c.dur_us
        sums["bus_bytes"] += c.size_bytes * factor
        bw = probe.busbw(c.kind, c.size_bytes) if probe is not None else None
        if bw:
            sums["compared_us"] += c.dur_us
            sums["compared_bus_bytes"] += c.size_bytes * factor
            sums["probe_us"] += c.size_bytes * factor / (bw * GB) * 1e6
    return RankComm(
        exposed_ms=trace.exposed_us / 1000 / steps,
        collective_ms=trace.collective_us / 1000 / steps,
        size_bytes=sum(c.size_bytes or 0 for c in trace.collectives) / steps,
        profiled_step_ms=wall_s * 1000 / steps,
        **sums,
    )


@dataclass(frozen=True, kw_only=True)
class CommFigures:
    """A distributed job's communication, per step, over its ranks (`comm/*`, `rank/comm_*`)."""

    ranks: list[RankComm]
    probe_peak_gbps: float | None = None

    def metrics(self) -> dict[str, float]:
        ranks = self.ranks
        exposed = max(r.exposed_ms for r in ranks)  # the most any rank lost to communication per step
        collective = sum(r.collective_ms for r in ranks)
        # the same steps' time: the share is of what was profiled
        step = max(r.profiled_step_ms for r in ranks)
        m = {
            "comm/exposed_ms": exposed,
            "comm/exposed_pct": 100 * exposed / step if step > 0 else math.nan,
            "comm/collective_ms": max(r.collective_ms for r in ranks),
            "comm/overlapped_pct": 100 * (1 - sum(r.exposed_ms for r in ranks) / collective)
            if collective > 0
            else 0.0,
            "comm/mb_per_step": ranks[0].size_bytes / 1e6,
            "comm/profiled_step_ms": step,
        }
        timed = sum(r.timed_us for r in ranks)
        if timed > 0:
            m["comm/busbw_gbps"] = sum(r.bus_bytes for r in ranks) / (timed / 1e6) / GB
        expected, compared = sum(r.probe_us for r in ranks), sum(r.compared_us for r in ranks)
        if expected > 0 and compared > 0:
            m["comm/probe_busbw_gbps"] = sum(r.compared_bus_bytes for r in ranks) / (expected / 1e6) / GB
            m["comm/busbw_vs_probe"] = expected / compared  # achieved / probe, at the same sizes
        if self.probe_peak_gbps is not None:
            m["comm/probe_peak_busbw_gbps"] = self.probe_peak_gbps
        return m

    def series(self) -> dict[str, list[float]]:
        return {
            "rank/comm_exposed_ms": [r.exposed_ms for r in self.ranks],
            "rank/comm_collective_ms": [r.collective_ms for r in self.ranks],
        }


def comm_phrase(m: dict[str, float]) -> str | None:
    """`comm exposed 3.10 ms/step (9% of a step), busbw 212 GB/s (64% of ...)`; None without comm/*."""
    if "comm/exposed_ms" not in m:
        return None
    text = f"comm exposed {m['comm/exposed_ms']:.2f} ms/step ({m['comm/exposed_pct']:.0f}% of a step)"
    if "comm/busbw_gbps" in m:
        text += f", busbw {m['comm/busbw_gbps']:.3g} GB/s"
        if "comm/busbw_vs_probe" in m:
            text += f" ({m['comm/busbw_vs_probe']:.0%} of this machine's at those sizes)"
    return text


# ----------------------------------------------------------------------------------------- profiling

PROFILED_STEPS = 3


def diagnose(run_unit: Callable[[], None], device: Any, out_dir: Path) -> CommFigures:
    """Profile PROFILED_STEPS extra units on every rank after a warm-up, read each rank's trace (kept as
    `out_dir/trace.rank<r>.json.gz`) and gather the figures; CommNotRead on every rank if one failed."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from pipeline.diagnose.comm_probe import PROBE_FILE, Probe
    from pipeline.measure.clocks import synchronize
    from pipeline.measure.ranks import align_ranks, gather

    cuda = device.type == "cuda"
    rank, world = dist.get_rank(), dist.get_world_size()
    out_dir.mkdir(parents=True, exist_ok=True)
    run_unit()  # a warm-up outside the trace
    align_ranks(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    fields = [f.name for f in dataclasses.fields(RankComm)]
    probe = Probe.load(out_dir / PROBE_FILE)
    try:
        with profile(activities=activities, record_shapes=not cuda) as prof:  # gloo's sizes need the shapes
            started = time.perf_counter()
            for _ in range(PROFILED_STEPS):
                run_unit()
            synchronize(device)
            wall_s = time.perf_counter() - started
        # the profiler's Chrome trace, its events read back, kept as `<path>.gz`
        path = out_dir / f"trace.rank{rank}.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
        with open(path, "rb") as raw, gzip.open(f"{path}.gz", "wb") as packed:
            packed.writelines(raw)
        path.unlink()
        trace = read_trace(events, world=world)
        mine = rank_comm(trace, steps=PROFILED_STEPS, world=world, wall_s=wall_s, probe=probe)
        values = [float(getattr(mine, f)) for f in fields]
        failed = ""
    except Exception as exc:  # a diagnosis, not the measurement: the job keeps its figures, and says why
        values, failed = [math.nan] * len(fields), f"rank {rank}: {type(exc).__name__}: {exc}"[:300]
    every = gather(values, device)  # every rank gets here, its trace read or not: no rank waits forever
    if any(math.isnan(v) for row in every for v in row):
        raise CommNotRead(failed or "another rank's trace was not read")
    return CommFigures(
        ranks=[RankComm(**dict(zip(fields, row, strict=True))) for row in every],
        probe_peak_gbps=probe.peak_busbw() if probe is not None else None,
    )


class CommNotRead(RuntimeError):
    """The profiled steps could not be read on some rank (the job's figures stand without comm/*)."""
