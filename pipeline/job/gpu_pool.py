"""GPUs per job where several jobs share a machine (`hydra/launcher=local_gpus`): a job takes free GPUs
of `gpu_pool` with an exclusive `flock` per GPU in a machine-wide lock dir (freed when its process dies),
waiting its turn in a queue of tickets, and its worker sees only those GPUs (in NVML's PCI order). With
`benchmark.overlap` a GPU takes several jobs, each slot with its own share of this process's CPU cores."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pipeline.nvml import nvml


def pool_lock_dir() -> Path:
    """The machine's GPU locks, shared by every sweep on it (PIPELINE_GPU_LOCK_DIR moves them)."""
    return Path(os.environ.get("PIPELINE_GPU_LOCK_DIR") or f"/tmp/pipeline-gpu-pool-{os.getuid()}")


def pool_indices(spec: str | int | list[int]) -> list[int]:
    """`all` -> every GPU NVML sees; [0, 2] -> [0, 2]; 3 -> [3]."""
    if spec == "all":
        with nvml() as n:
            return list(range(n.nvmlDeviceGetCount()))
    return [spec] if isinstance(spec, int) else [int(i) for i in spec]


@contextlib.contextmanager
def gpu_slot(
    spec: str | int | list[int],
    lock_dir: Path,
    poll_s: float = 0.2,
    on_wait: object = print,
    count: int = 1,
    per_gpu: int = 1,
    turn: str | None = None,
) -> Iterator[dict[str, str]]:
    """Hold `count` GPUs of the pool (all at once, never some while waiting for the rest) and yield the
    worker's environment. With `per_gpu` > 1 (benchmark.overlap) a GPU takes another job once every GPU
    has as many. `turn`: this job's place among those waiting (earlier first; default: when it asked)."""
    indices = pool_indices(spec)
    if not indices:
        raise ValueError(f"gpu_pool={spec!r} holds no GPU (NVML sees none, or the list is empty)")
    if count > len(indices):
        raise ValueError(f"parallel.nproc={count} GPUs wanted, gpu_pool={spec!r} holds {len(indices)}")
    assert per_gpu == 1 or count == 1, "benchmark.overlap shares a GPU among one-GPU jobs only"
    with _ticket(lock_dir / "queue", turn or f"{time.time():017.6f}") as mine:
        while True:
            held, slot = _take(indices, lock_dir, count, per_gpu) if _my_turn(mine) else ([], 0)
            if held:
                break
            if callable(on_wait):  # said once
                on_wait(
                    f"waiting for {count} free GPU(s) of gpu_pool={spec} ({len(indices)} GPUs, all taken or too few free)"
                )
                on_wait = None
            time.sleep(poll_s)
    try:
        taken = ",".join(str(i) for i, _ in held)
        env = {"CUDA_VISIBLE_DEVICES": taken, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PIPELINE_GPU_INDEX": taken}
        if per_gpu > 1:
            ((index, _),) = held
            position, groups = indices.index(index), per_gpu * len(indices)
            cores = sorted(os.sched_getaffinity(0))  # this process's, shared out among every GPU's slots
            shares = [core_group(cores, s * len(indices) + position, groups) for s in range(per_gpu)]
            env["PIPELINE_GPU_SLOT"] = str(slot)
            env["PIPELINE_MEASURE_LOCK"] = str(lock_dir / f"gpu{index}.measure.lock")
            env["PIPELINE_CPUS"] = cpu_list(shares[slot])
            env["PIPELINE_GPU_CPUS"] = cpu_list(c for share in shares for c in share)  # the measuring job's
        yield env
    finally:
        _release(held)


@contextlib.contextmanager
def _ticket(queue: Path, turn: str) -> Iterator[Path]:
    """This job's place in the machine's queue for GPUs, locked until it has one; locked before it is
    renamed into place, so a ticket is never seen unlocked while its job lives."""
    queue.mkdir(parents=True, exist_ok=True)
    name = f"{turn}.{os.getpid()}.{time.monotonic_ns()}"
    draft = queue / f".{name}"
    handle = _try_lock(draft)
    assert handle is not None  # a name of its own: no one else holds it
    path = queue / f"{name}{TICKET}"
    draft.rename(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        _release([(0, handle)])


TICKET = ".ticket"


def _my_turn(mine: Path) -> bool:
    """Whether no live ticket comes before this one (tickets of jobs that died are cleared)."""
    for path in sorted(mine.parent.glob(f"*{TICKET}")):
        if path.name >= mine.name:
            return True
        handle = _try_lock(path, write_pid=False)
        if handle is None:  # its job still waits
            return False
        with contextlib.suppress(OSError):  # its job died waiting: its turn is gone
            path.unlink()
        _release([(0, handle)])
    return True


def _take(indices: list[int], lock_dir: Path, count: int, per_gpu: int) -> tuple[list[tuple[int, Any]], int]:
    """`count` free GPUs of one slot, all locked (exclusive flock per GPU and slot) or none, and the slot's
    number (every GPU's first slot before any's second; slot 0's lock is the GPU's own, which a job
    without overlap takes; overlap is for one-GPU jobs); ([], 0) when no slot has `count` free."""
    for slot in range(per_gpu):
        held: list[tuple[int, Any]] = []
        for index in indices:
            name = f"gpu{index}.lock" if slot == 0 else f"gpu{index}.slot{slot}.lock"
            handle = _try_lock(lock_dir / name)
            if handle is not None:
                held.append((index, handle))
            if len(held) == count:
                return held, slot
        _release(held)
    return [], 0


def _try_lock(path: Path, *, write_pid: bool = True) -> Any:
    """The file, exclusively locked by this process (its pid written in it), or None if another holds it."""
    handle = open(path, "a")  # noqa: SIM115 - held until the job ends
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    if write_pid:
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
    return handle


def cpu_list(cores: Iterable[int]) -> str:
    """[2, 0, 1, 0] -> `0,1,2`: the form PIPELINE_CPUS and PIPELINE_GPU_CPUS take."""
    return ",".join(str(c) for c in sorted(set(cores)))


def core_group(cores: list[int], group: int, groups: int) -> list[int]:
    """The `group`-th of `groups` contiguous shares of `cores`, sizes differing by one at most (with
    fewer cores than groups, one core each, round-robin)."""
    if len(cores) < groups:
        return [cores[group % len(cores)]]
    size, extra = divmod(len(cores), groups)  # the first `extra` groups take one core more
    start = group * size + min(group, extra)
    return cores[start : start + size + (group < extra)]


def _release(held: list[tuple[int, Any]]) -> None:
    for _, handle in held:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
