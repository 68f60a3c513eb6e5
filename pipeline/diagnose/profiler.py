"""A torch.profiler trace of a few extra steps (`profile=true`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch


def profile_steps(run_step: Callable[[], None], device: torch.device, out_dir: Path, active: int = 3) -> str:
    """A torch.profiler trace (Chrome JSON) of `active` steps after a skipped and a warm-up step, and
    the table of the top kernels by self time."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    out_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=active),
        on_trace_ready=tensorboard_trace_handler(str(out_dir)),
        record_shapes=True,
    ) as prof:
        for _ in range(2 + active):
            run_step()
            prof.step()
    averages = prof.key_averages()
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    try:
        table = averages.table(sort_by=key, row_limit=25)
    except (AttributeError, KeyError, ValueError):
        table = averages.table(row_limit=25)
    (out_dir / "top_kernels.txt").write_text(table)
    return table
