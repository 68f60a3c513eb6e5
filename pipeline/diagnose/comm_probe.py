"""The machine's own collective bandwidth: all-reduce, all-gather and reduce-scatter over message sizes,
timed as nccl-tests times them, each size's bus bandwidth by nccl-tests' definition. A distributed job's
ranks run it once per machine (`ensure`), cached in `$PIPELINE_CACHE_DIR/comm_probe/` keyed by the host,
GPUs, driver, ranks, backend and versions, and copied into the job's `comm/probe.json`."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from pipeline.config.known_good import cache_root
from pipeline.diagnose.comm import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, algbw_gbps, busbw_gbps
from pipeline.measure.clocks import Laps
from pipeline.measure.ranks import align_ranks
from pipeline.nvml import nvml
from pipeline.redaction import write_atomic

KINDS = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER)
GPU_SIZES = tuple(2**k for k in range(10, 31, 2))  # 1 KiB .. 1 GiB, x4
CPU_SIZES = tuple(2**k for k in range(10, 23, 2))  # 1 KiB .. 4 MiB (gloo over loopback)
PROBE_FILE = "probe.json"


@dataclass(frozen=True)
class ProbeRow:
    kind: str
    size_bytes: int  # nccl-tests' S: the all-reduce's buffer, the whole gathered or scattered buffer
    time_us: float  # one call, the slowest rank's mean over the timed calls
    algbw_gbps: float
    busbw_gbps: float


@dataclass(kw_only=True)
class Probe:
    """One machine's sweep: its key (what it was measured on) and a row per collective and size."""

    machine: dict[str, Any]
    world_size: int
    seconds: float = 0.0  # what the sweep took
    rows: list[ProbeRow] = field(default_factory=list)

    def busbw(self, kind: str, size_bytes: float) -> float | None:
        """The probe's bus bandwidth of `kind` at `size_bytes` (GB/s): interpolated between the two
        nearest sizes on a log scale, the end's figure beyond either end; None for a kind not probed."""
        points = sorted(
            (r.size_bytes, r.busbw_gbps) for r in self.rows if r.kind == kind and r.busbw_gbps > 0
        )
        if not points or size_bytes <= 0:
            return None
        if size_bytes <= points[0][0]:
            return points[0][1]
        for (s0, b0), (s1, b1) in itertools.pairwise(points):
            if size_bytes <= s1:
                at = (math.log(size_bytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
                return math.exp(math.log(b0) + at * (math.log(b1) - math.log(b0)))
        return points[-1][1]

    def peak_busbw(self, kind: str = ALL_REDUCE) -> float | None:
        return max((r.busbw_gbps for r in self.rows if r.kind == kind), default=None)

    @classmethod
    def load(cls, path: Path) -> Probe | None:
        try:
            data = json.loads(path.read_text())
            return cls(
                machine=dict(data["machine"]),
                world_size=int(data["world_size"]),
                seconds=float(data.get("seconds", 0.0)),
                rows=[ProbeRow(**r) for r in data["rows"]],
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def table(self) -> str:
        lines = [f"{'collective':<15}{'size':>10}{'time us':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}"]
        for r in self.rows:
            lines.append(
                f"{r.kind:<15}{size_words(r.size_bytes):>10}{r.time_us:>12.1f}{r.algbw_gbps:>12.2f}{r.busbw_gbps:>12.2f}"
            )
        return "\n".join(lines)


def size_words(size: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


# ----------------------------------------------------------------------------------------- on the ranks


def machine_key(device: Any) -> dict[str, Any]:
    """What the probe's figures belong to: this host, the ranks and their devices, the libraries."""
    key: dict[str, Any] = {
        "host": platform.node(),
        "backend": dist.get_backend(),
        "world_size": dist.get_world_size(),
        "torch": torch.__version__,
        "device": device.type,
    }
    if device.type == "cuda":
        key.update(
            {
                "gpu": torch.cuda.get_device_name(device),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "nccl": ".".join(map(str, torch.cuda.nccl.version())),  # (2, 27, 5)
                "driver": _driver_version(),
            }
        )
    return key


def _driver_version() -> str | None:
    try:
        with nvml() as n:
            version = n.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        return None


def ensure(device: Any, job_copy: Path | None = None, *, force: bool = False) -> Probe | None:
    """This machine's probe, from the cache or measured now by every rank (rank 0 decides and tells the
    others, and writes the cache and `job_copy`; a rank that measured nothing reads rank 0's copy)."""
    rank = dist.get_rank()
    machine = machine_key(device)
    digest = hashlib.sha256(json.dumps(machine, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_root() / "comm_probe" / f"{digest}.json"  # the machine's cache, as known_good's
    probe = None if force or rank != 0 else Probe.load(path)
    where = device if dist.get_backend() == "nccl" else torch.device("cpu")
    cached = torch.tensor([0.0 if probe is None else 1.0], device=where)
    dist.broadcast(cached, src=0)
    if cached.item() == 0.0:
        probe = run(device, machine)
        if rank == 0:
            write(path, probe)
    if rank == 0 and job_copy is not None:
        assert probe is not None
        write(job_copy, probe)
    align_ranks(device)  # rank 0's copies are written before any rank reads them
    return probe if probe is not None else Probe.load(job_copy or path)


def write(path: Path, probe: Probe) -> None:
    write_atomic(path, json.dumps(asdict(probe), indent=1))


def run(device: Any, machine: dict[str, Any]) -> Probe:
    """Time every collective of KINDS at every size (float32 buffers): 5 warm-up calls, then 20 (10 from
    64 MiB up; 5 on the CPU) back to back; the slowest rank's mean per call."""
    cuda = device.type == "cuda"
    world = dist.get_world_size()
    sizes = GPU_SIZES if cuda else CPU_SIZES
    if cuda:  # the probe's buffers (S and S / world) well inside what every rank's device has free
        free = torch.tensor([float(torch.cuda.mem_get_info(device)[0])], device=device)
        dist.all_reduce(free, op=dist.ReduceOp.MIN)  # one list of sizes on every rank
        sizes = tuple(s for s in sizes if 4 * s <= free.item()) or sizes[:1]
    started = time.perf_counter()
    rows = []
    for kind in KINDS:
        for size in sizes:
            numel = max(world, size // 4 // world * world)  # float32, divisible among the ranks
            seconds = _time_collective(kind, numel, device, iters=(20 if size < 2**26 else 10) if cuda else 5)
            size_bytes = numel * 4
            bus = busbw_gbps(kind, size_bytes, seconds, world)
            assert bus is not None
            rows.append(ProbeRow(kind, size_bytes, seconds * 1e6, algbw_gbps(size_bytes, seconds), bus))
        if cuda:
            torch.cuda.empty_cache()
    return Probe(machine=machine, world_size=world, rows=rows, seconds=time.perf_counter() - started)


def _time_collective(kind: str, numel: int, device: Any, *, iters: int) -> float:
    """Seconds per call of `kind` on `numel` float32 (an all-gather's output): 5 warm-up calls, the ranks
    aligned, `iters` calls back to back; the slowest rank's."""
    cuda = device.type == "cuda"
    world = dist.get_world_size()
    whole = torch.ones(numel, dtype=torch.float32, device=device)
    share = torch.ones(numel // world, dtype=torch.float32, device=device)

    call = {
        ALL_REDUCE: lambda: dist.all_reduce(whole),
        ALL_GATHER: lambda: dist.all_gather_into_tensor(whole, share),
        REDUCE_SCATTER: lambda: dist.reduce_scatter_tensor(share, whole),
    }[kind]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # newer torch renames these; 2.11 has only these
        for _ in range(5):
            call()
        align_ranks(device)
        laps = Laps(device, 2)  # CUDA events on the device, perf_counter on the CPU
        laps.mark(None)
        for _ in range(iters):
            call()
        laps.mark(kind)
        seconds = laps.read()[kind][0] / 1000 / iters
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device if cuda else "cpu")
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        return float(slowest.item())
