"""GPUs per job (one, or `parallel.nproc` for a distributed job) on a machine where several jobs run at once (`hydra/launcher=local_gpus`).

The jobs of a sweep share a pool of GPUs (`gpu_pool`: `all`, or a list such as `[0,1]`). Before it
spawns its worker, a job takes the first free GPU of the pool, holding an exclusive `flock` on a file
per GPU in a machine-wide lock dir (shared by every sweep on the machine), and waits while every GPU
is taken. The worker then sees only that GPU:
`CUDA_VISIBLE_DEVICES=<its index>` with `CUDA_DEVICE_ORDER=PCI_BUS_ID`, so the index means what
`nvidia-smi` and NVML say. The lock goes with the job's process, so a crashed job frees its GPU.
The job's own process never initializes CUDA; the GPUs are counted through NVML.

With `benchmark.overlap` each GPU takes two jobs (`per_gpu=2`, a lock per slot): one compiles while the
other measures, and the worker's measure lock (pipeline.measure.gate, PIPELINE_MEASURE_LOCK, one per
GPU) lets only one of them measure at a time. Each slot gets its own share of this process's CPU
cores (PIPELINE_CPUS), so that the compiling job's compiler never runs on the measuring job's cores.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def pool_lock_dir() -> Path:
    """GPUs belong to the machine, not to one sweep: every sweep on this machine shares these locks
    (PIPELINE_GPU_LOCK_DIR to move them)."""
    return Path(os.environ.get("PIPELINE_GPU_LOCK_DIR") or f"/tmp/pipeline-gpu-pool-{os.getuid()}")


def pool_indices(spec: str | int | list[int]) -> list[int]:
    """`all` -> every GPU NVML sees; [0, 2] -> [0, 2]; 3 -> [3]."""
    if spec == "all":
        import pynvml

        pynvml.nvmlInit()
        try:
            return list(range(pynvml.nvmlDeviceGetCount()))
        finally:
            pynvml.nvmlShutdown()
    return [spec] if isinstance(spec, int) else [int(i) for i in spec]


@contextlib.contextmanager
def gpu_slot(
    spec: str | int | list[int],
    lock_dir: Path,
    poll_s: float = 0.2,
    on_wait: object = print,
    count: int = 1,
    per_gpu: int = 1,
) -> Iterator[dict[str, str]]:
    """Hold `count` GPUs of the pool (a distributed job's `parallel.nproc`; all at once, never some
    while waiting for the rest) for the duration; yields the environment the worker needs. With
    `per_gpu=2` (benchmark.overlap, one GPU per job) a GPU takes a second job once every GPU has one."""
    indices = pool_indices(spec)
    if not indices:
        raise ValueError(f"gpu_pool={spec!r} holds no GPU (NVML sees none, or the list is empty)")
    if count > len(indices):
        raise ValueError(f"parallel.nproc={count} GPUs wanted, gpu_pool={spec!r} holds {len(indices)}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        held, slot = (
            (_take(indices, lock_dir, count), 0) if per_gpu == 1 else _take_slot(indices, lock_dir, per_gpu)
        )
        if held:
            try:
                taken = ",".join(str(i) for i, _ in held)
                env = {
                    "CUDA_VISIBLE_DEVICES": taken,
                    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                    "PIPELINE_GPU_INDEX": taken,
                }
                if per_gpu > 1:
                    ((index, _),) = held
                    group = slot * len(indices) + indices.index(index)
                    env.update(
                        {
                            "PIPELINE_GPU_SLOT": str(slot),
                            "PIPELINE_MEASURE_LOCK": str(lock_dir / f"gpu{index}.measure.lock"),
                            "PIPELINE_CPUS": ",".join(
                                str(c) for c in core_group(group, per_gpu * len(indices))
                            ),
                        }
                    )
                yield env
            finally:
                _release(held)
            return
        if not waited and callable(on_wait):
            on_wait(
                f"waiting for {count} free GPU(s) of gpu_pool={spec} ({len(indices)} GPUs, all taken or too few free)"
            )
            waited = True
        time.sleep(poll_s)


def _take(indices: list[int], lock_dir: Path, count: int) -> list[tuple[int, Any]]:
    """`count` free GPUs, locked (exclusive flock per GPU), or none at all."""
    held: list[tuple[int, Any]] = []
    for index in indices:
        handle = _try_lock(lock_dir / f"gpu{index}.lock")
        if handle is None:
            continue
        held.append((index, handle))
        if len(held) == count:
            return held
    _release(held)
    return []


def _take_slot(indices: list[int], lock_dir: Path, per_gpu: int) -> tuple[list[tuple[int, Any]], int]:
    """One slot of one GPU, locked, and the slot's number: every GPU's first slot before any GPU's
    second (slot 0's lock is the GPU's own lock, so a job without overlap on the same machine still
    sees the GPU taken); ([], 0) when every slot is taken."""
    for slot in range(per_gpu):
        for index in indices:
            handle = _try_lock(
                lock_dir / (f"gpu{index}.lock" if slot == 0 else f"gpu{index}.slot{slot}.lock")
            )
            if handle is not None:
                return [(index, handle)], slot
    return [], 0


def _try_lock(path: Path) -> Any:
    """The file, exclusively locked by this process (its pid written in it), or None if another holds it."""
    handle = open(path, "w")  # noqa: SIM115 - held until the job ends
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def core_group(group: int, groups: int) -> list[int]:
    """The `group`-th of `groups` equal shares of this process's CPU cores (contiguous; with fewer
    cores than groups, one core each, shared round-robin)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < groups:
        return [cores[group % len(cores)]]
    size = len(cores) // groups
    return cores[group * size : (group + 1) * size]


def _release(held: list[tuple[int, Any]]) -> None:
    for _, handle in held:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
