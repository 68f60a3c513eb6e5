"""Distributed data parallelism for training variants (`parallel=ddp|fsdp`): the process group torchrun's
environment describes, Dynamo's DDP setting (`parallel.optimize_ddp`), and DDP or FSDP2 wrapping of a fresh
model (FSDP2 shards each repeated block, then the root); apply_compile then compiles it as any model."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from pipeline.axes.compile import repeated_blocks
from pipeline.config.schema import ParallelConfig

OPTIMIZE_DDP = {"on": True, "off": False, "compiled_autograd": "python_reducer"}


@dataclass(frozen=True, kw_only=True)
class Ranks:
    """This process's place in the job (torchrun's environment)."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def from_env(cls) -> Ranks:
        return cls(rank=int(os.environ.get("RANK", "0")), world_size=int(os.environ.get("WORLD_SIZE", "1")))


# What a rank's collective raises when a peer died (gloo, NCCL): a consequence, never a job's root cause.
PEER_FAILURE_MARKS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote worker crashing",
    "Broken pipe",
    "ncclRemoteError",
    "NCCL communicator was aborted",
)


def is_peer_failure(exc: BaseException) -> bool:
    """Whether `exc` is a broken collective (another rank failed first), not this rank's own error."""
    return isinstance(exc, dist.DistError) or any(mark in str(exc) for mark in PEER_FAILURE_MARKS)


def init_process_group(device: torch.device) -> str:
    """Join the job's process group (NCCL on GPUs, gloo on the CPU); returns the backend."""
    if device.type == "cuda":
        dist.init_process_group("nccl", device_id=device)
        return "nccl"
    dist.init_process_group("gloo")
    return "gloo"


def configure_dynamo(par: ParallelConfig) -> None:
    """Dynamo's DDP handling for this job (set before any model is wrapped or compiled)."""
    import torch._dynamo

    if par.strategy == "ddp":
        torch._dynamo.config.optimize_ddp = OPTIMIZE_DDP[par.optimize_ddp]
        torch._dynamo.config.compiled_autograd = par.optimize_ddp == "compiled_autograd"


def parallelize(model: nn.Module, par: ParallelConfig, device: torch.device) -> nn.Module:
    """`model` wrapped for `par.strategy` (unchanged for `none`)."""
    if par.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=par.bucket_cap_mb)
    if par.strategy != "fsdp":
        return model
    # FSDP2: each repeated block its own unit, then the root (the rest of the parameters)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(
        param_dtype=_dtype(par.param_dtype), reduce_dtype=_dtype(par.reduce_dtype or par.param_dtype)
    )
    kwargs = {"reshard_after_forward": par.reshard_after_forward, "mp_policy": policy}
    blocks = repeated_blocks(model)
    if not blocks:
        raise ValueError(f"parallel=fsdp: {type(model).__name__} has no repeated blocks to shard")
    for block in blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)
    return model


def _dtype(name: str | None) -> torch.dtype | None:
    return getattr(torch, name) if name else None
