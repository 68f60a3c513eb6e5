"""How a job was measured, in words: written into every run's description."""

from __future__ import annotations

import torch


def describe_method(
    *,
    device: torch.device,
    warmup: int,
    measured: int,
    rounds: int,
    paired: bool,
    data_loader: bool,
    parallel: str = "none",
    world_size: int = 1,
    unit: str = "step",
) -> str:
    clock = (
        f"CUDA events recorded at every {unit} boundary on the compute stream, read after the loop"
        if device.type == "cuda"
        else f"time.perf_counter at every {unit} boundary (CPU ops are synchronous)"
    )
    lines = [
        f"Timing: {measured} measured {unit}s after {warmup} warm-up {unit}s; {clock}; no host sync inside the timed loop.",
        "Statistics: median (p50), mean, p10, p90, std, and a 95% interval of the median that counts the steps' effective number "
        "(consecutive steps are autocorrelated: n (1 - rho) / (1 + rho) from their lag-1 autocorrelation rho). A job whose p10-p90 spread exceeds "
        "benchmark.noisy_spread_pct of the median is flagged (step/noisy), with the host's CPU steal over the measured steps (step/cpu_steal_pct).",
        "Compile time: the torch.compile call(s) (compile/setup_s) plus the warm-up wall time (each warm-up step synced) in excess of the steady-state median; torch's own compile totals are logged beside it as compile/torch_total_s.",
        "Data: "
        + (
            "a DataLoader making CPU batches, copied to the device inside every step (the copy is measured)."
            if data_loader
            else "batches generated once on the device and rotated (no host work in the step)."
        ),
    ]
    if device.type == "cuda":
        lines.append(
            "Memory: CUDA caching-allocator peaks (allocated, reserved) over the warm-up including compilation (job_*) and over the measured steps; NVML per-process usage; CPU peak RSS."
        )
    else:
        lines.append("Memory: CPU peak RSS only (no device allocator on the CPU).")
    if paired:
        lines.append(
            f"Paired eager baseline: an eager copy with the same initial weights and batches, in the same worker, timed in {rounds} rounds alternating with the compiled variant "
            "(C1 E1 C2 E2 ...) so drift hits both alike; speedup = eager median / compiled median. Memory figures come from solo phases only: an eager probe runs alone "
            "first and is freed, then the compiled variant warms up and runs round 1 before the eager copy exists; memory/ratio_vs_eager compares reserved peaks "
            "(CUDA-graph pools show as reserved, not allocated)."
        )
    if parallel != "none":
        lines.append(
            f"Distributed ({parallel}, {world_size} ranks started by torchrun, one process per device): every rank times its own steps; after the "
            "measured loop the per-step times are gathered and a step's time is the slowest rank's (the statistics above are of those); "
            "trainer.batch_size is per rank and throughput counts every rank; each rank's own median, memory, compile time and graph counts "
            "are logged as rank/* histories (step = rank) with their maximum and spread; the paired eager copy runs in the same process group."
        )
    lines.append(
        "Isolation: every job runs in a fresh spawned Python process; nothing (compile caches in memory, CUDA context, peak counters) carries over between jobs."
    )
    return "\n".join(lines)
